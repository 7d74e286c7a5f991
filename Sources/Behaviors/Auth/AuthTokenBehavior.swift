public import ConveyorPipeline
public import Foundation

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
/// - A request refreshes at most once: a second 401 fails with ``NetworkError/unauthorized``.
/// - **If the refresher throws** (an expired or revoked refresh token: the session is over),
///   every request that waited for it fails with ``NetworkError/unauthorized`` and its own
///   401 response, so `catch .unauthorized { showLogin() }` handles it; the refresher's error is
///   ``lastRefreshFailure`` (`AuthError.refreshFailed(underlying:)`). If the refresh takes longer
///   than `refreshTimeout` (30 s by default), the session may still be fine: those requests fail
///   with `NetworkError.behaviorFailed(behavior: "AuthTokenBehavior", hook: .additionalHeaders,
///   underlying: AuthError.refreshTimedOut)`.
/// - A request that waits for the refresh leaves at once when its task is cancelled
///   (`.cancelled`) or its timeout passes (`.timedOut`). The refresh goes on for the other
///   waiters, and is cancelled when none is left.
///
/// ### Credentials stay with their origin
/// The token goes only to requests for the client's base URL's origin (scheme, host and port),
/// and to the origins listed in `allowedOrigins`. A request to an absolute URL elsewhere (a
/// pagination or CDN link from a response) goes without it, and a 401 from there is not
/// refreshed. The header's name is a ``SensitiveHeaders`` entry: redacted
/// everywhere, and stripped by `URLSessionTransport` on a redirect to another origin.
///
/// ### A refresher that sends through the same client
/// The refresh call usually goes to the same API, so a refresher may use the very client this
/// behavior belongs to. Requests sent from inside the refresh skip this behavior: they carry no
/// token from it (set `Authorization` on the request yourself if the refresh endpoint wants the
/// old token) and a 401 to them is not refreshed again, so the refresh cannot wait on itself.
/// The refresh then fails with the refresh request's error, and every waiter with it.
///
/// ```swift
/// let store = InMemoryTokenStore(token: nil)
/// let client = NetworkClient(baseURL: api) {
///     AuthTokenBehavior(tokens: store, refresher: SessionRefresher(client: { client }, store: store))
/// }
/// ```
public struct AuthTokenBehavior: HeaderAdding, RetryDeciding, SensitiveHeaderDeclaring {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String

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

    /// The token an attempt was sent with, and how many refreshes had ended by then.
    struct Sent {
        var token: String?
        var refreshesEnded: UInt64
    }
    enum SentToken: RequestContextKey { static let defaultValue: Sent? = nil }
    /// The run of attempts (its first attempt) in which this request refreshed: once per request,
    /// or once per connection of an event stream (a reconnect starts a new run).
    enum Refreshed: RequestContextKey { static let defaultValue = 0 }
    enum RefreshFailure: RequestContextKey { static let defaultValue: AuthError? = nil }

    /// Where the token comes from.
    package let tokens: any TokenProvider
    /// Gets a new token after a 401; `nil` disables refreshing (a 401 then fails at once).
    package let refresher: (any TokenRefresher)?
    /// The header that carries the token.
    package let header: Header
    /// The header's name: sensitive for every request of this behavior's client.
    public var sensitiveHeaderNames: [String] { [header.name] }
    /// How long one refresh may take before every request waiting for it fails.
    package var refreshTimeout: Duration { coordinator.timeout }
    /// Origins besides the base URL's that the token may go to.
    package let allowedOrigins: Set<Origin>
    private let coordinator: RefreshCoordinator

    /// Creates the behavior.
    /// - Parameters:
    ///   - tokens: Where the current token comes from.
    ///   - refresher: Gets a new token after a 401; `nil` for none.
    ///   - header: The header and scheme; `Authorization: Bearer` by default.
    ///   - refreshTimeout: How long one refresh may take; 30 s by default. A refresh that takes
    ///     longer is abandoned and its waiters fail with ``AuthError/refreshTimedOut``.
    ///   - clock: The clock the refresh timeout is measured on; tests inject a manual one.
    ///   - allowedOrigins: Origins besides the client's base URL's that the token may go to.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default. Give two behaviors of one type different names to leave one out.
    public init(
        tokens: any TokenProvider, refresher: (any TokenRefresher)? = nil, header: Header = .bearer,
        refreshTimeout: Duration = .seconds(30), clock: any Clock<Duration> = ContinuousClock(),
        allowedOrigins: [URL] = [], name: String? = nil
    ) {
        self.name = name ?? String(describing: Self.self)
        self.allowedOrigins = Set(allowedOrigins.compactMap(Origin.init))
        self.tokens = tokens
        self.refresher = refresher
        self.header = header
        self.coordinator = RefreshCoordinator(timeout: refreshTimeout, clock: clock)
    }

    /// How many refreshes this behavior (and its copies) started. A test seam of this package
    /// (its tests and the demo count refreshes), not API.
    package var refreshCount: Int { get async { coordinator.refreshCount } }

    /// Why the last refresh failed (`AuthError.refreshFailed(underlying:)` with the refresher's
    /// error, or `.refreshTimedOut`), or `nil` when the last one succeeded or none ran. Read it
    /// where a request failed with ``NetworkError/unauthorized`` to tell an expired session
    /// from a plain 401:
    ///
    /// ```swift
    /// } catch .unauthorized {
    ///     if case .refreshFailed? = await auth.lastRefreshFailure { showLogin() }
    /// }
    /// ```
    public var lastRefreshFailure: AuthError? { get async { coordinator.lastFailure } }

    /// Reads the current token and returns it as a header; fails the attempt if a refresh failed.
    /// Adds nothing to requests sent from inside this behavior's own refresh.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        if coordinator.isRefreshingInCurrentTask { return HTTPHeaders() }
        guard context.credentialsAllowed(alsoTo: allowedOrigins) else { return HTTPHeaders() }  // another origin
        if let failure = context[RefreshFailure.self] { throw failure }
        let ended = coordinator.refreshesEnded  // before the token: a refresh that ends between the two reads counts as later
        let token = try await tokens.currentToken()
        context[SentToken.self] = Sent(token: token, refreshesEnded: ended)
        guard let token else { return HTTPHeaders() }
        return HTTPHeaders([HTTPHeaders.Field(name: header.name, value: header.value(for: token))])
    }

    /// On a 401: retries with a token someone else refreshed, or with the one shared refresh.
    public func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        guard case .unauthorized = failure, let refresher else { return .doNotRetry }
        let run = context.runStart
        guard context[Refreshed.self] != run else { return .doNotRetry }  // one refresh per request: no loop
        // A request the refresher itself sent: refreshing again would wait on this very refresh.
        if coordinator.isRefreshingInCurrentTask { return .doNotRetry }
        // No token went to this origin, so a refreshed one would not either.
        guard context.credentialsAllowed(alsoTo: allowedOrigins) else { return .doNotRetry }
        context[Refreshed.self] = run
        let sent = context[SentToken.self]
        if let current = try? await tokens.currentToken(), current != sent?.token {
            context.noteRetryWithNewCredential()
            return .retryNow  // refreshed meanwhile by another request
        }
        if let sent, let failure = coordinator.failure(replacing: sent.token, endedAfter: sent.refreshesEnded) {
            // A refresh of this very token failed after this attempt was sent: the attempt got its
            // 401 while that refresh ran, and ends as the refresh's waiters did, without another.
            guard case .refreshTimedOut = failure else { return .doNotRetry }
            context[RefreshFailure.self] = failure
            context.noteRetryWithNewCredential()
            return .retryNow
        }
        do {
            _ = try await coordinator.refresh(replacing: sent?.token, using: refresher)
            coordinator.lastFailure = nil
        } catch is CancellationError {
            return .doNotRetry  // this request was cancelled or its step abandoned: it ends as such
        } catch AuthError.refreshTimedOut {
            coordinator.lastFailure = .refreshTimedOut
            context[RefreshFailure.self] = .refreshTimedOut
        } catch {
            // The refresher threw: the session is over. The request ends with its own 401.
            coordinator.lastFailure = (error as? AuthError) ?? .refreshFailed(underlying: error)
            return .doNotRetry
        }
        context.noteRetryWithNewCredential()
        return .retryNow
    }
}
