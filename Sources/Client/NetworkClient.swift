public import ConveyorPipeline
public import Foundation

/// Sends requests through a chain of behaviors and a transport, and decodes the responses.
///
/// ```swift
/// let client = NetworkClient(baseURL: api, transport: URLSession.shared) {
///     AuthTokenBehavior(tokens: keychain)
///     ActivityCounterBehavior(counter: indicator)
///     RetryBehavior(.exponentialBackoff(maxAttempts: 3))
/// }
/// let movies: [Movie] = try await client.get("/movies/popular", query: ["page": 1])
/// ```
///
/// The behavior chain is flattened once, here; a request that adds or leaves out behaviors gets
/// the client's hook plan filtered and extended for that request only. A client can be shared
/// freely between tasks: its only mutable state is a small cache of the URLs it built for
/// relative paths, behind a lock.
public final class NetworkClient: NetworkClientProtocol {
    /// Settings of a client besides its base URL, transport and behaviors.
    public struct Configuration: Sendable {
        /// Encodes ``RequestBody/json(_:)`` bodies.
        public var encoder: JSONEncoder
        /// Decodes `Decodable` outputs.
        public var decoder: JSONDecoder
        /// Statuses that count as success; others fail with ``ConveyorPipeline/NetworkError/unauthorized(_:)``,
        /// ``ConveyorPipeline/NetworkError/notFound(_:)`` or ``ConveyorPipeline/NetworkError/unacceptableStatus(_:)``. `200..<300` by default.
        public var acceptableStatusCodes: Set<Int>
        /// The per-attempt timeout for requests that set none; `nil` (the default) leaves it to the
        /// transport (60 s for URLSession).
        public var timeout: Duration?
        /// The clock for timeouts and retry waits; tests inject a manual or immediate clock.
        public var clock: any Clock<Duration>
        /// A hard cap on attempts per request, whatever behaviors decide. 10 by default.
        public var attemptLimit: Int

        /// Creates a configuration.
        /// - Parameters:
        ///   - encoder: The JSON encoder.
        ///   - decoder: The JSON decoder.
        ///   - acceptableStatusCodes: Statuses that count as success.
        ///   - timeout: The default per-attempt timeout.
        ///   - clock: The clock for timeouts and retry waits.
        ///   - attemptLimit: The cap on attempts per request.
        public init(
            encoder: JSONEncoder = JSONEncoder(), decoder: JSONDecoder = JSONDecoder(),
            acceptableStatusCodes: Set<Int> = Set(200..<300), timeout: Duration? = nil,
            clock: any Clock<Duration> = ContinuousClock(), attemptLimit: Int = 10
        ) {
            self.encoder = encoder
            self.decoder = decoder
            self.acceptableStatusCodes = acceptableStatusCodes
            self.timeout = timeout
            self.clock = clock
            self.attemptLimit = attemptLimit
        }
    }

    /// The URL that request paths are relative to.
    public let baseURL: URL
    /// The settings.
    public let configuration: Configuration
    /// The client's behaviors, flattened, outermost first.
    public let behaviors: CombinedRequestBehavior
    private let runner: RequestRunner
    private let baseURLString: String
    /// Set when the base URL cannot make request URLs; every relative request then fails with it.
    private let baseURLProblem: String?
    /// URLs built for relative paths, so repeated paths skip URL parsing.
    let urlCache = PathURLCache()

    /// Creates a client.
    /// - Parameters:
    ///   - baseURL: The URL request paths are relative to, e.g. `https://api.example.com/v1`.
    ///   - transport: Sends the requests; ``URLSessionTransport/shared`` by default (safe redirects).
    ///   - configuration: Encoder, decoder, statuses, timeout, clock.
    ///   - behaviors: The behaviors every request runs through, outermost first.
    public init(
        baseURL: URL, transport: any HTTPTransport = URLSessionTransport.shared, configuration: Configuration = Configuration(),
        @RequestBehaviorBuilder behaviors: () -> [any RequestBehavior] = { [] }
    ) {
        self.baseURL = baseURL
        self.configuration = configuration
        self.behaviors = CombinedRequestBehavior(behaviors())
        self.runner = RequestRunner(
            transport: transport, clock: configuration.clock, attemptLimit: configuration.attemptLimit,
            acceptableStatusCodes: configuration.acceptableStatusCodes)
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURLString = base
        self.baseURLProblem =
            baseURL.scheme == nil || baseURL.host == nil
            ? "the base URL '\(baseURL.redactingQuery)' has no scheme or host" : nil
    }

    /// Sends a request through the client's behaviors (minus its exclusions) and its own.
    /// - Parameter request: The typed request.
    /// - Returns: The decoded output.
    /// - Throws: ``ConveyorPipeline/NetworkError``, and nothing else.
    public func send<Output>(_ request: Request<Output>) async throws(NetworkError) -> Output {
        let httpRequest = try makeHTTPRequest(request)
        let plan =
            request.exclusions.isEmpty && request.behaviors.isEmpty
            ? behaviors.plan() : behaviors.plan(excluding: request.exclusions, adding: request.behaviors)
        let context = RequestContext(request: httpRequest)
        let decoder = configuration.decoder
        return try await runner.run(httpRequest, plan: plan, context: context) { response in
            try request.decode(response, decoder)
        }
    }

    /// Builds the pipeline's request: URL, query, body, content type, timeout.
    /// - Parameter request: The typed request.
    /// - Returns: The request before any behavior ran.
    /// - Throws: ``ConveyorPipeline/NetworkError/invalidRequest(_:)`` for a bad URL or a body that cannot be encoded.
    public func makeHTTPRequest<Output>(_ request: Request<Output>) throws(NetworkError) -> HTTPRequest {
        let url = try URLBuilder.url(
            base: baseURLString, baseProblem: baseURLProblem, path: request.path, query: request.query,
            cache: urlCache)
        var headers = request.headers
        let body = try request.body.encoded(with: configuration.encoder)
        if let contentType = body?.1, !headers.contains("Content-Type") {
            headers.add(name: "Content-Type", value: contentType)
        }
        return HTTPRequest(
            method: request.method, url: url, headers: headers, body: body?.0,
            timeout: request.timeout ?? configuration.timeout)
    }
}
