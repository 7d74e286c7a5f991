public import ConveyorPipeline

/// Sends an access token with every request and, given a refresher, recovers from `401` with
/// **one** refresh shared by every request that hit it.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     AuthTokenBehavior(tokens: keychain, refresher: sessionRefresher)           // Authorization: Bearer …
///     // or: AuthTokenBehavior(tokens: keychain, header: .custom("X-Auth-Token")) // X-Auth-Token: …
/// }
/// // A request that must go without a token (the login call):
/// let login = Request<Session>(method: .post, path: "/login", body: .json(credentials))
///     .excluding(.type(AuthTokenBehavior.self))
/// ```
///
/// How a 401 is handled:
/// - Each attempt reads the token from the ``TokenProvider`` (so a retry sends the fresh token)
///   and remembers, in the request's context, which token it sent.
/// - On a 401, if the provider already holds a different token (another request refreshed
///   meanwhile), the request is retried at once with it. Otherwise it joins the one running
///   refresh or starts it: 100 concurrent 401s cause exactly one refresh.
/// - A request refreshes at most once: a second 401 fails with ``ConveyorPipeline/NetworkError/unauthorized(_:)``.
/// - If the refresh fails, every request that waited for it fails with
///   `NetworkError.behaviorFailed(behavior: "AuthTokenBehavior", hook: .additionalHeaders,
///   underlying: AuthError.refreshFailed(…))`.
public struct AuthTokenBehavior: RequestBehavior {
    /// Which header carries the token, and with which scheme.
    public struct Header: Sendable, Hashable {
        /// The header name.
        public var name: String
        /// The scheme before the token (`Bearer`), or `nil` for the bare token.
        public var scheme: String?

        /// `Authorization: Bearer <token>`.
        public static let bearer = Header(name: "Authorization", scheme: "Bearer")

        /// A custom header, e.g. `.custom("X-Auth-Token")` or `.custom("Authorization", scheme: "Token")`.
        /// - Parameters:
        ///   - name: The header name.
        ///   - scheme: The scheme before the token, or `nil`.
        public static func custom(_ name: String, scheme: String? = nil) -> Header {
            Header(name: name, scheme: scheme)
        }

        func value(for token: String) -> String { scheme.map { $0 + " " + token } ?? token }
    }

    enum SentToken: RequestContextKey { static let defaultValue: String? = nil }
    enum Refreshed: RequestContextKey { static let defaultValue = false }
    enum RefreshFailure: RequestContextKey { static let defaultValue: AuthError? = nil }

    /// Where the token comes from.
    public let tokens: any TokenProvider
    /// Gets a new token after a 401; `nil` disables refreshing (a 401 then fails at once).
    public let refresher: (any TokenRefresher)?
    /// The header that carries the token.
    public let header: Header
    private let coordinator = RefreshCoordinator()

    /// Creates the behavior.
    /// - Parameters:
    ///   - tokens: Where the current token comes from.
    ///   - refresher: Gets a new token after a 401; `nil` for none.
    ///   - header: The header and scheme; `Authorization: Bearer` by default.
    public init(tokens: any TokenProvider, refresher: (any TokenRefresher)? = nil, header: Header = .bearer) {
        self.tokens = tokens
        self.refresher = refresher
        self.header = header
    }

    /// How many refreshes this behavior (and its copies) started: for tests and metrics.
    public var refreshCount: Int { get async { await coordinator.refreshCount } }

    /// Reads the current token and returns it as a header; fails the attempt if a refresh failed.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        if let failure = context[RefreshFailure.self] { throw failure }
        let token = try await tokens.currentToken()
        context[SentToken.self] = token
        guard let token else { return HTTPHeaders() }
        return HTTPHeaders([HTTPHeaders.Field(name: header.name, value: header.value(for: token))])
    }

    /// On a 401: retries with a token someone else refreshed, or with the one shared refresh.
    public func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        guard case .unauthorized = failure, let refresher else { return .doNotRetry }
        guard !context[Refreshed.self] else { return .doNotRetry }  // one refresh per request: no loop
        context[Refreshed.self] = true
        let sent = context[SentToken.self]
        if let current = try? await tokens.currentToken(), current != sent {
            return .retryNow  // refreshed meanwhile by another request
        }
        do {
            _ = try await coordinator.refresh(replacing: sent, using: refresher)
        } catch {
            context[RefreshFailure.self] = .refreshFailed(underlying: error)
        }
        return .retryNow
    }
}
