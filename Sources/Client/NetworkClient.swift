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
        /// Encodes ``RequestBody/json(_:)-enum.case`` bodies.
        public var encoder: JSONEncoder
        /// Decodes `Decodable` outputs.
        public var decoder: JSONDecoder
        /// Statuses that count as success; others fail with ``NetworkError/unacceptableStatus(_:)``
        /// (``NetworkError/unauthorized`` and ``NetworkError/notFound`` match a 401 and a 404).
        /// `200..<300` by default.
        public var acceptableStatusCodes: Set<Int>
        /// The per-attempt timeout for requests that set none; `nil` (the default) leaves it to the
        /// transport (60 s for URLSession). With a timeout, each attempt (its hooks included) and
        /// each retry decision must end within it; one that does not is abandoned with
        /// ``NetworkError/timedOut``. Durations longer than 100 years count as
        /// 100 years.
        public var timeout: Duration?
        /// How long a whole request may take, for requests that set none: every attempt, retry
        /// decision and backoff wait together; `nil` (the default) for no limit but each attempt's
        /// ``timeout``. An attempt in flight when it passes ends with ``NetworkError/timedOut``; a
        /// retry (or hedge) that could not start before it is not made, and the request ends with
        /// the failure it would have retried. Event streams have none (their idle timeout applies).
        public var totalTimeout: Duration?
        /// The clock retry waits sleep on (backoff, `Retry-After`). Tests inject
        /// `ImmediateClock` to skip the waits, or `ManualClock` to step through them; timeouts
        /// are not measured on it (see ``timeoutClock``).
        public var clock: any Clock<Duration>
        /// The clock timeouts are measured on: real time by default, so a test that skips retry
        /// waits with an immediate ``clock`` keeps a real safety timeout. Inject a manual clock
        /// here to test timeouts themselves.
        public var timeoutClock: any Clock<Duration>
        /// A hard cap on attempts per request, whatever behaviors decide. 10 by default.
        public var attemptLimit: Int
        /// The most body bytes a response may have, counted after content decoding (gzip);
        /// a larger one fails with ``NetworkError/responseTooLarge(limit:)``.
        /// ``URLSessionTransport`` stops the transfer as soon as the limit is passed. 64 MiB by
        /// default; `nil` for no limit.
        public var maxResponseSize: Int?

        /// The header names whose values are credentials for this client's requests: the built-in
        /// ones and any you add. The names the client's behaviors declare
        /// (``SensitiveHeaderDeclaring``, such as an ``AuthTokenBehavior``'s header) are added to
        /// them. Nothing here reaches another client. ``SensitiveHeaders/standard`` by default.
        public var sensitiveHeaders: SensitiveHeaders

        /// What requests may send that their callers did not (retries, event-stream reconnects, the
        /// retry after a token refresh), per origin: a fifth of the requests over 10 s, with a floor
        /// of one a second (see ``RetryBudget``). A new budget for each configuration by default, on
        /// the ``clock`` retries wait on (so a test's `ImmediateClock` moves its window as the
        /// waits pass); clients given the same instance share it. `nil`: no budget, only
        /// ``attemptLimit``.
        public var retryBudget: RetryBudget?

        /// The standard resilience settings, to pair with
        /// `CombinedRequestBehavior.standardResilience()`: the defaults, with a 10 s ``timeout``
        /// for each attempt and a 30 s ``totalTimeout`` for the whole request (the retry budget is
        /// on by default).
        public static var standardResilience: Configuration {
            var configuration = Configuration(timeout: .seconds(10))
            configuration.totalTimeout = .seconds(30)
            return configuration
        }

        /// The default ``maxResponseSize``: 64 MiB.
        public static let defaultMaxResponseSize = 64 * 1024 * 1024

        /// Creates a configuration.
        /// - Parameters:
        ///   - encoder: The JSON encoder.
        ///   - decoder: The JSON decoder.
        ///   - acceptableStatusCodes: Statuses that count as success.
        ///   - timeout: The default per-attempt timeout.
        ///   - clock: The clock retry waits sleep on.
        ///   - timeoutClock: The clock timeouts are measured on.
        ///   - attemptLimit: The cap on attempts per request.
        ///   - maxResponseSize: The most body bytes a response may have; `nil` for no limit.
        ///   - sensitiveHeaders: The header names whose values are credentials.
        public init(
            encoder: JSONEncoder = JSONEncoder(), decoder: JSONDecoder = JSONDecoder(),
            acceptableStatusCodes: Set<Int> = Set(200..<300), timeout: Duration? = nil,
            clock: any Clock<Duration> = ContinuousClock(), timeoutClock: any Clock<Duration> = ContinuousClock(),
            attemptLimit: Int = 10, maxResponseSize: Int? = Configuration.defaultMaxResponseSize,
            sensitiveHeaders: SensitiveHeaders = .standard
        ) {
            self.sensitiveHeaders = sensitiveHeaders
            self.retryBudget = RetryBudget(clock: clock)
            self.encoder = encoder
            self.decoder = decoder
            self.acceptableStatusCodes = acceptableStatusCodes
            self.timeout = timeout
            self.clock = clock
            self.timeoutClock = timeoutClock
            self.attemptLimit = attemptLimit
            self.maxResponseSize = maxResponseSize.map { max(0, $0) }
        }
    }

    /// The URL that request paths are relative to.
    public let baseURL: URL
    /// The settings.
    public let configuration: Configuration
    /// The client's behaviors, flattened, outermost first.
    public let behaviors: CombinedRequestBehavior
    let runner: RequestRunner
    private let baseURLString: String
    /// Set when the base URL cannot make request URLs; every relative request then fails with it.
    private let baseURLProblem: String?
    /// The base URL's origin: where credential behaviors send credentials by default.
    let baseScope: ClientScope
    /// URLs built for relative paths, so repeated paths skip URL parsing.
    let urlCache = PathURLCache()
    /// The configuration's sensitive header names and those the client's behaviors declare.
    let sensitiveHeaders: SensitiveHeaders
    /// What every request of this client carries (its sensitive names), made once: `nil` when
    /// they are the standard ones.
    private let requestExtras: RequestExtras?

    /// Creates a client.
    /// - Parameters:
    ///   - baseURL: The URL request paths are relative to, e.g. `https://api.example.com/v1`.
    ///     It must be `http` or `https` with a host, and have no query or fragment
    ///     (`https://api.example.com/v1?key=1` would build wrong URLs); otherwise every relative
    ///     request fails with ``NetworkError/invalidRequest(_:)`` saying why.
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
            transport: transport, clock: configuration.clock, timeoutClock: configuration.timeoutClock,
            attemptLimit: configuration.attemptLimit,
            acceptableStatusCodes: configuration.acceptableStatusCodes, retryBudget: configuration.retryBudget,
            baseOrigin: Origin(baseURL))
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURLString = base
        self.baseURLProblem = Self.problem(with: baseURL)
        self.baseScope = ClientScope(origin: Origin(baseURL))
        let sensitive = configuration.sensitiveHeaders.adding(self.behaviors.behaviors.flatMap(\._sensitiveHeaderNames))
        self.sensitiveHeaders = sensitive
        self.requestExtras = RequestExtras.make(sensitiveHeaders: sensitive)
    }

    /// Why a base URL cannot make request URLs, or `nil` when it can. The text names the parts,
    /// never the URL's user, password or query, which may hold secrets.
    static func problem(with baseURL: URL) -> String? {
        guard let scheme = baseURL.scheme?.lowercased(), scheme == "http" || scheme == "https", baseURL.host != nil
        else {
            return "the base URL has no http or https scheme and host"
        }
        if baseURL.query != nil || baseURL.fragment != nil {
            return "the base URL has a query or a fragment; request paths are appended to it, so put query "
                + "items on the requests (Request.query) or in a behavior"
        }
        return nil
    }

    /// Sends a request through the client's behaviors (minus its exclusions) and its own.
    /// - Parameter request: The typed request.
    /// - Returns: The decoded output.
    /// - Throws: ``NetworkError``, and nothing else.
    public func send<Output>(_ request: Request<Output>) async throws(NetworkError) -> Output {
        try await perform(request) { response, _, decoder in try request.decode(response, decoder) }
    }

    /// Sends a request like ``send(_:)`` and returns the decoded value together with the final
    /// response (status, headers, body) and the number of attempts it took.
    ///
    /// ```swift
    /// let page = try await client.response(for: Request<[Movie]>(path: "/movies"))
    /// let next = page.response.headers["Link"]
    /// print(page.value.count, "movies after", page.attempts, "attempt(s)")
    /// ```
    /// - Parameter request: The typed request.
    /// - Returns: The value, the response it was decoded from, and the attempt count.
    /// - Throws: ``NetworkError``, and nothing else.
    public func response<Output>(for request: Request<Output>) async throws(NetworkError) -> Response<Output> {
        try await perform(request) { response, context, decoder in
            Response(value: try request.decode(response, decoder), response: response, attempts: context.attempt)
        }
    }

    /// Runs `request` through the pipeline; `finish` turns the final response into the result.
    @inline(__always)
    private func perform<Output, Result>(
        _ request: Request<Output>,
        _ finish: (HTTPResponse, RequestContext, JSONDecoder) throws -> Result
    ) async throws(NetworkError) -> Result {
        let absolute = URLBuilder.isAbsolute(request.path)
        let httpRequest = try makeHTTPRequest(request, absolute: absolute, bounded: true)
        let plan =
            request.exclusions.isEmpty && request.behaviors.isEmpty
            ? behaviors.plan : behaviors.plan(excluding: request.exclusions, adding: request.behaviors)
        // A relative path is on the base origin by construction; only an absolute URL is parsed.
        let targetsBase = !absolute || Origin(httpRequest.url) == baseScope.origin
        let transfer =
            request.progress != nil || !plan.progressObservers.isEmpty
            ? Self.transfer(taker: nil, request: request, plan: plan) : nil
        let context = RequestContext(
            request: httpRequest, scope: baseScope, targetsBaseOrigin: targetsBase, transfer: transfer, values: request.contextValues)
        let decoder = configuration.decoder
        return try await runner.run(httpRequest, plan: plan, context: context) { response in
            try finish(response, context, decoder)
        }
    }

    /// The transfer handler for one request: `taker` gets its body, and the request's progress
    /// observer and the chain's observing members hear how it goes.
    static func transfer<Output>(
        taker: (any ResponseBodyTaker)?, request: Request<Output>, plan: HookPlan
    ) -> TransferHandler {
        var observers: [@Sendable (TransferProgress, RequestContext?) -> Void] = []
        if let progress = request.progress { observers.append { value, _ in progress(value) } }
        for member in plan.progressObservers {
            observers.append { progress, context in
                if let context { member._transferProgressed(progress, context: context) }
            }
        }
        return TransferHandler(taker: taker, observers: observers)
    }

    /// Builds the pipeline's request: URL, query, body, content type, timeout.
    /// - Parameter request: The typed request.
    /// - Returns: The request before any behavior ran.
    /// - Throws: ``NetworkError/invalidRequest(_:)`` for a bad URL or a body that cannot be encoded.
    public func makeHTTPRequest<Output>(_ request: Request<Output>) throws(NetworkError) -> HTTPRequest {
        try makeHTTPRequest(request, absolute: URLBuilder.isAbsolute(request.path))
    }

    /// ``makeHTTPRequest(_:)`` for a path already known to be absolute or not; `bounded`: about to
    /// be sent, so its total timeout (if any) starts now.
    func makeHTTPRequest<Output>(_ request: Request<Output>, absolute: Bool, bounded: Bool = false) throws(NetworkError)
        -> HTTPRequest
    {
        let url = try URLBuilder.url(
            base: baseURLString, baseProblem: baseURLProblem, path: request.path, absolute: absolute,
            query: request.query, cache: urlCache)
        var headers = request.headers
        let body = try request.body.encoded(with: configuration.encoder)
        if let contentType = body?.1, !headers.contains("Content-Type") {
            headers.add(name: "Content-Type", value: contentType)
        }
        var built = HTTPRequest(
            method: request.method, url: url, headers: headers, body: nil,
            timeout: request.timeout ?? configuration.timeout, maxResponseSize: configuration.maxResponseSize)
        switch body?.0 {
        case .bytes(let data): built.body = data
        case .stream(let stream): built.bodyStream = stream
        case nil: break
        }
        if let requestExtras { built.extras = requestExtras }
        // A request's own behaviors may declare credential headers of their own (rare: one call each).
        if !request.behaviors.isEmpty {
            for behavior in request.behaviors {
            let names = behavior._sensitiveHeaderNames
                if !names.isEmpty { built.sensitiveHeaders = built.sensitiveHeaders.adding(names) }
            }
        }
        // Last: setting the sensitive names makes new extras, which would not carry the deadline.
        if bounded, let total = request.totalTimeout ?? configuration.totalTimeout {
            built.bound(by: total, on: configuration.timeoutClock)
        }
        return built
    }
}
