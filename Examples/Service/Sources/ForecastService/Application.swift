import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorMetrics
import ConveyorPostgres
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceLifecycle
import Tracing

/// What this service answers for `GET /forecast/{city}`.
public struct Forecast: ResponseCodable, Equatable {
    /// The city.
    public var city: String
    /// "Sunny, 21.5 °C".
    public var text: String
}

/// `GET /me/saved` answers the upstream's saved cities as they are.
extension SavedCities: ResponseCodable {}

/// Owns the `HTTPClient` the upstream calls go through: it runs until the service group shuts
/// down gracefully, then shuts the client down. Added to the application's services *before* the
/// HTTP server (Hummingbird appends the server last), so the group shuts the server down first —
/// it stops accepting and lets the requests in flight finish, upstream calls included — and the
/// client only after.
public struct HTTPClientService: Service {
    /// The client, shared by every upstream call.
    public let client: HTTPClient
    /// Where the shutdown is logged.
    let logger: Logger

    /// Wraps `client`; the service shuts it down.
    public init(client: HTTPClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Waits for the graceful shutdown, then shuts the client down.
    public func run() async throws {
        // Returns when the group shuts down gracefully; throws if the task is cancelled instead.
        try? await gracefulShutdown()
        try await client.shutdown()
        logger.info("HTTP client shut down")
    }
}

/// The service's settings.
public struct ServiceConfiguration: Sendable {
    /// Where the service listens.
    public var host: String
    /// The port it listens on; 0 picks a free one.
    public var port: Int
    /// The upstream API.
    public var upstream: UpstreamConfiguration
    /// The PostgreSQL database every instance keeps the upstream's answers in
    /// (`postgres://user:password@host:port/database`); `nil` keeps them in this process's memory.
    public var cacheDatabase: URL?
    /// How long one call to that database may take before it counts as a miss.
    public var cacheDatabaseTimeout: Duration
    /// The secret (at least 16 bytes, the same on every instance) under which the shared cache
    /// writes identities, so it may keep private answers; `nil` keeps only shared ones.
    public var cacheIdentityKey: String?
    /// The 32-byte secret the upstream's token is sealed with in the same database, so that every
    /// instance shares one token (one sign-in per rejected token for the fleet); `nil` lets each
    /// instance sign in for itself.
    public var tokenEncryptionKey: String?
    /// The upstream's quota, `requests/seconds` (`100/60`: 100 requests a minute): with the
    /// database, every instance's together (a `PostgresRateLimitLedger` in it); without, this
    /// instance's. `nil`: only what the upstream announces.
    public var upstreamQuota: String?

    /// Creates the settings.
    public init(
        host: String = "127.0.0.1", port: Int = 8080, upstream: UpstreamConfiguration, cacheDatabase: URL? = nil,
        cacheDatabaseTimeout: Duration = .milliseconds(250), cacheIdentityKey: String? = nil,
        tokenEncryptionKey: String? = nil, upstreamQuota: String? = nil
    ) {
        self.upstreamQuota = upstreamQuota
        self.cacheIdentityKey = cacheIdentityKey
        self.tokenEncryptionKey = tokenEncryptionKey
        self.host = host
        self.port = port
        self.upstream = upstream
        self.cacheDatabase = cacheDatabase
        self.cacheDatabaseTimeout = cacheDatabaseTimeout
    }

    /// From the environment: `HOST`, `PORT`, `UPSTREAM_URL`, `UPSTREAM_CLIENT_ID`,
    /// `UPSTREAM_CLIENT_SECRET`, `CACHE_DATABASE_URL`, `CACHE_DATABASE_TIMEOUT_MS`,
    /// `CACHE_IDENTITY_KEY`, `TOKEN_ENCRYPTION_KEY`, `UPSTREAM_QUOTA`.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment)
        -> ServiceConfiguration
    {
        ServiceConfiguration(
            host: environment["HOST"] ?? "127.0.0.1",
            port: environment["PORT"].flatMap(Int.init) ?? 8080,
            upstream: UpstreamConfiguration(
                baseURL: environment["UPSTREAM_URL"].flatMap(URL.init(string:)) ?? URL(string: "http://127.0.0.1:9090")!,
                clientID: environment["UPSTREAM_CLIENT_ID"] ?? "forecast-service",
                clientSecret: environment["UPSTREAM_CLIENT_SECRET"] ?? ""),
            cacheDatabase: environment["CACHE_DATABASE_URL"].flatMap(URL.init(string:)),
            cacheDatabaseTimeout: .milliseconds(environment["CACHE_DATABASE_TIMEOUT_MS"].flatMap(Int.init) ?? 250),
            cacheIdentityKey: environment["CACHE_IDENTITY_KEY"],
            tokenEncryptionKey: environment["TOKEN_ENCRYPTION_KEY"],
            upstreamQuota: environment["UPSTREAM_QUOTA"])
    }
}

/// Why the service could not start.
public struct ConfigurationError: Error, CustomStringConvertible {
    /// What is wrong (never the database's password).
    public let description: String
}

/// `requests/seconds` (`100/60`) as a quota.
func quota(_ text: String) throws -> RateLimiter.Quota {
    let parts = text.split(separator: "/")
    guard parts.count == 2, let requests = Int(parts[0]), let seconds = Int(parts[1]), requests > 0, seconds > 0 else {
        throw ConfigurationError(description: "UPSTREAM_QUOTA must be requests/seconds, such as 100/60")
    }
    return RateLimiter.Quota(requests, per: .seconds(seconds))
}

/// The database's client configuration from a `postgres://` URL (TLS off: a database on the
/// same network; turn it on for one that is not).
func postgresConfiguration(_ url: URL) throws -> PostgresClient.Configuration {
    guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false), parts.scheme == "postgres",
        let host = parts.host, let user = parts.user
    else { throw ConfigurationError(description: "CACHE_DATABASE_URL must be postgres://user:password@host:port/database") }
    return PostgresClient.Configuration(
        host: host, port: parts.port ?? 5432, username: user, password: parts.password,
        database: parts.path.count > 1 ? String(parts.path.dropFirst()) : nil, tls: .disable)
}

/// The application: its routes, the upstream client, and the `HTTPClient`'s lifecycle.
/// - Parameters:
///   - configuration: Where to listen and what to call.
///   - logger: The service's logger (Conveyor and AsyncHTTPClient log through it too).
///   - tracer: The tracer; `InstrumentationSystem.tracer` by default.
///   - metrics: Where `http.client.request.duration` goes; `MetricsSystem.factory` by default.
///   - clock: The clock the upstream client's retry waits sleep on.
///   - deduplication: Where identical upstream GETs in flight share one call.
///   - onServerRunning: Called with the bound port once the server listens.
public func buildApplication(
    _ configuration: ServiceConfiguration, logger: Logger, tracer: (any Tracer)? = nil,
    metrics: SwiftMetricsSink = SwiftMetricsSink(), clock: any Clock<Duration> = ContinuousClock(),
    deduplication: DeduplicationBehavior = DeduplicationBehavior(),
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) throws -> some ApplicationProtocol {
    // The shared cache, when configured: the PostgresClient is a service of the group (it runs
    // before the HTTP server starts and stops after it), the storage bounds every call it makes.
    var services: [any Service] = []
    var cache: any CacheStorage = MemoryCacheStorage()
    var sharedTokens: UpstreamClient.SharedTokens?
    let upstreamQuota = try configuration.upstreamQuota.map(quota)
    var limiter = upstreamQuota.map { RateLimiter(quota: $0) }
    if let url = configuration.cacheDatabase {
        var databaseConfiguration = try postgresConfiguration(url)
        // A connection the pool opens into a partition gives up with the cache's timeout, not
        // PostgresNIO's 10 s, during which it would hold one of the pool's places (Docs/Caching.md).
        databaseConfiguration.options.connectTimeout = configuration.cacheDatabaseTimeout
        let database = PostgresClient(configuration: databaseConfiguration, backgroundLogger: logger)
        do {
            cache = try PostgresCacheStorage(
                client: database, timeout: configuration.cacheDatabaseTimeout, logger: logger,
                identityKey: configuration.cacheIdentityKey.map { try CacheIdentityKey($0.utf8) })
        } catch {
            throw ConfigurationError(description: "CACHE_IDENTITY_KEY or the cache table: \(error)")
        }
        if let secret = configuration.tokenEncryptionKey {
            // One token for every instance: a rejected one is renewed by one of them.
            let key: TokenEncryptionKey
            do { key = try TokenEncryptionKey(secret.utf8) } catch {
                throw ConfigurationError(description: "TOKEN_ENCRYPTION_KEY: \(error)")
            }
            let name = configuration.upstream.clientID + "@" + configuration.upstream.baseURL.absoluteString
            let timeout = configuration.cacheDatabaseTimeout
            sharedTokens = { signIn in
                try PostgresTokenStore(
                    client: database, name: name, encryptionKey: key, refresher: signIn, timeout: timeout, logger: logger)
            }
        }
        if let upstreamQuota {
            // One quota for every instance: each takes grants of it from the database.
            let ledger = try PostgresRateLimitLedger(
                client: database, name: configuration.upstream.clientID + "@" + configuration.upstream.baseURL.absoluteString,
                timeout: configuration.cacheDatabaseTimeout, logger: logger)
            limiter = RateLimiter(sharedQuota: upstreamQuota, ledger: ledger)
        }
        services.append(database)
    }
    let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())
    let upstream: UpstreamClient
    do {
        upstream = try UpstreamClient(
            http: http, configuration: configuration.upstream, logger: logger, tracer: tracer, metrics: metrics,
            clock: clock, cache: cache, sharedTokens: sharedTokens, limiter: limiter, deduplication: deduplication)
    } catch {
        try? http.syncShutdown()
        throw error
    }
    services.append(HTTPClientService(client: http, logger: logger))
    let router = Router()
    router.get("/health") { _, _ in "ok" }
    router.get("/forecast/:city") { _, context -> Forecast in
        let city = try context.parameters.require("city")
        guard !city.isEmpty, city.unicodeScalars.allSatisfy({ $0.isASCII && CharacterSet.letters.contains($0) }) else {
            throw HTTPError(.badRequest, message: "A city is letters only.")
        }
        return try await forecast(for: city, from: upstream)
    }
    router.get("/me/saved") { request, _ -> SavedCities in
        // The caller's own token, passed on: the upstream answers for that user alone.
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer "), header.count > 7 else {
            throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer"], message: "Sign in first.")
        }
        do throws(NetworkError) {
            return try await upstream.savedCities(userToken: String(header.dropFirst(7)))
        } catch where error.status == 401 {
            throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer"], message: "Sign in again.")
        } catch {
            throw HTTPError(.badGateway, message: "The weather service failed (\(error.name)).")
        }
    }
    return Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port)),
        services: services,
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
        logger: logger)
}

/// The forecast, or the HTTP error that says why not: the upstream's 404 is ours, anything else
/// it failed with is a 502 (its details are in the logs, not in the answer).
func forecast(for city: String, from upstream: UpstreamClient) async throws -> Forecast {
    do {
        let weather = try await upstream.weather(in: city)
        return Forecast(city: weather.city, text: "\(weather.summary.capitalized), \(weather.temperature) °C")
    } catch where error.status == 404 {
        throw HTTPError(.notFound, message: "No such city.")
    } catch where NetworkError.rateLimited ~= error {
        // The upstream's quota is used up (by this instance or, shared, by the fleet): not sent.
        let seconds = max(1, Int((error.retryAfter ?? .seconds(1)).components.seconds) + 1)
        throw HTTPError(
            .serviceUnavailable, headers: [.retryAfter: String(seconds)], message: "The weather service's quota is used up.")
    } catch {
        throw HTTPError(.badGateway, message: "The weather service failed (\(error.name)).")
    }
}
