import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorLogging
import ConveyorMetrics
import ConveyorTracing
import Foundation
import Logging
import Tracing

/// What the upstream weather API answers for a city.
public struct Weather: Codable, Sendable, Equatable {
    /// The city's name.
    public var city: String
    /// The temperature, in °C.
    public var temperature: Double
    /// A word or two: "sunny".
    public var summary: String

    /// Creates a weather report.
    public init(city: String, temperature: Double, summary: String) {
        self.city = city
        self.temperature = temperature
        self.summary = summary
    }
}

/// A user's saved cities, from the upstream, for that user alone.
public struct SavedCities: Codable, Sendable, Equatable {
    /// The user.
    public var user: String
    /// The cities.
    public var cities: [String]
}

/// Where the upstream API is and how this service signs in to it.
public struct UpstreamConfiguration: Sendable {
    /// The upstream API's base URL.
    public var baseURL: URL
    /// The client credentials `POST /token` exchanges for a bearer token.
    public var clientID: String
    /// The secret of those credentials.
    public var clientSecret: String

    /// Creates the configuration.
    public init(baseURL: URL, clientID: String, clientSecret: String) {
        self.baseURL = baseURL
        self.clientID = clientID
        self.clientSecret = clientSecret
    }
}

/// The upstream API's token: none until the first 401, then whatever `POST /token` gave, renewed
/// when the upstream answers 401 again (AuthTokenBehavior refreshes once for every request that
/// got the 401, and resends them).
actor UpstreamSession: TokenProvider, TokenRefresher {
    private var token: String?
    private let tokens: NetworkClient
    private let credentials: TokenRequest

    struct TokenRequest: Encodable, Sendable {
        let clientID: String
        let clientSecret: String
    }

    struct TokenResponse: Decodable, Sendable {
        let accessToken: String
        enum CodingKeys: String, CodingKey { case accessToken = "access_token" }
    }

    init(tokens: NetworkClient, configuration: UpstreamConfiguration) {
        self.tokens = tokens
        self.credentials = TokenRequest(clientID: configuration.clientID, clientSecret: configuration.clientSecret)
    }

    func currentToken() async throws -> String? { token }

    func refreshToken(replacing expiredToken: String?) async throws -> String {
        let response = try await tokens.send(
            Request<TokenResponse>(method: .post, path: "/token", body: .json(credentials)))
        token = response.accessToken
        return response.accessToken
    }
}

/// The upstream API through Conveyor on AsyncHTTPClient: every behavior a service wants, in the
/// order that makes each one right.
public struct UpstreamClient: Sendable {
    let client: NetworkClient

    /// Makes the token provider every instance shares from this instance's sign-in (a
    /// `PostgresTokenStore`).
    public typealias SharedTokens = @Sendable (any TokenRefresher) throws -> any TokenProvider & TokenRefresher

    /// Builds the client on `http`, which the caller owns (``HTTPClientService`` shuts it down).
    /// - Parameters:
    ///   - http: The AsyncHTTPClient, made with `AsyncHTTPClientTransport.configuration()`.
    ///   - configuration: Where the upstream is and the credentials.
    ///   - logger: Where Conveyor's and AsyncHTTPClient's lines go.
    ///   - tracer: The tracer; `InstrumentationSystem.tracer` by default.
    ///   - metrics: The metrics sink; swift-metrics' `MetricsSystem.factory` by default.
    ///   - clock: The clock retry waits sleep on (tests inject one that does not wait).
    ///   - cache: Where the upstream's answers are kept: this process's memory by default, or a
    ///     `PostgresCacheStorage` every instance shares.
    ///   - sharedTokens: The token every instance shares, made from this instance's sign-in;
    ///     `nil` keeps the token in this process.
    ///   - deduplication: Where identical GETs in flight share one call (a test passes its own to
    ///     see when every caller has joined).
    ///   - limiter: The upstream's quota (every instance's, through a `PostgresRateLimitLedger`, or
    ///     this one's); `nil` follows only what the upstream announces.
    public init(
        http: HTTPClient, configuration: UpstreamConfiguration, logger: Logger, tracer: (any Tracer)? = nil,
        metrics: SwiftMetricsSink = SwiftMetricsSink(), clock: any Clock<Duration> = ContinuousClock(),
        cache: any CacheStorage = MemoryCacheStorage(), sharedTokens: SharedTokens? = nil, limiter: RateLimiter? = nil,
        deduplication: DeduplicationBehavior = DeduplicationBehavior()
    ) throws {
        let transport = try AsyncHTTPClientTransport(client: http)
        let settings = NetworkClient.Configuration(timeout: .seconds(10), clock: clock)
        // The token endpoint: retried and traced, never sent the bearer token it replaces.
        let tokens = NetworkClient(baseURL: configuration.baseURL, transport: transport, configuration: settings) {
            RetryBehavior()
            TracingBehavior(tracer: tracer)
        }
        let signIn = UpstreamSession(tokens: tokens, configuration: configuration)
        let session: any TokenProvider & TokenRefresher = try sharedTokens?(signIn) ?? signIn
        self.client = NetworkClient(baseURL: configuration.baseURL, transport: transport, configuration: settings) {
            RetryBehavior()                                      // 503 with Retry-After, timeouts, lost connections
            if let limiter { RateLimitBehavior(limiter) }        // the quota: each attempt that goes out
            AuthTokenBehavior(tokens: session, refresher: session)  // a 401 refreshes once and resends
            CacheBehavior(storage: cache)                        // max-age answers, in memory or shared
            deduplication                                        // identical GETs in flight share one call
            TracingBehavior(tracer: tracer)                      // a client span per attempt that goes out
            MetricsBehavior(sink: metrics)                       // http.client.request.duration per attempt
            RequestLoggerBehavior(logger: logger)                // AsyncHTTPClient logs with the request's id
            LoggingBehavior(sink: SwiftLogSink(logger: logger))  // last: logs each attempt as sent
        }
    }

    /// The saved cities of the user whose token is `userToken`, from the upstream on the user's
    /// behalf: the user's token instead of the service's (``AuthTokenBehavior`` left out), so the
    /// cache keeps the `private` answer for that user alone, in every instance's table.
    public func savedCities(userToken: String) async throws(NetworkError) -> SavedCities {
        var headers = HTTPHeaders()
        headers.add(name: "Authorization", value: "Bearer " + userToken)
        return try await client.send(
            Request<SavedCities>(path: "/saved", headers: headers).excluding(.type(AuthTokenBehavior.self)))
    }

    /// The weather in `city`, from the upstream (or its cache).
    public func weather(in city: String) async throws(NetworkError) -> Weather {
        try await client.send(Request<Weather>(path: "/weather/\(city)"))
    }
}
