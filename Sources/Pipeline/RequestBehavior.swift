/// A small value that takes part in every request a client sends: it adds headers, adjusts the
/// request, judges the response, asks for retries and observes the outcome.
///
/// Every hook has a no-op default, so a behavior implements only what it needs. A chain learns
/// which hooks a behavior type leaves at the default and stops calling them, so an unused hook
/// costs nothing.
///
/// ### Order
/// A request's chain is the client's behaviors followed by the request's own. Request-side hooks
/// (`additionalHeaders`, `modify`,
/// `beforeSend`) run first to last; response-side hooks
/// (`validate`, `afterSuccess`,
/// `afterFailure`) run last to first, so the first behavior is outermost. `intercept` nests the
/// same way: the first behavior's is outermost, the last one's calls the transport.
/// `retryDecision` asks first to last; the first `.retry` wins.
///
/// ### Attempts and requests
/// `additionalHeaders`, `modify`, `intercept`, `validate` and `retryDecision` run for **every attempt**
/// (a retried request gets a fresh token). `beforeSend` runs **once per logical request**, after
/// the first attempt is prepared, and then exactly one of `afterSuccess` / `afterFailure` runs,
/// after all attempts and backoff waits — also on cancellation or when another behavior throws.
/// `context.attempt` tells which attempt is running.
///
/// ### State
/// One behavior value serves many concurrent requests: keep per-request state in the
/// ``RequestContext``, never in stored properties. Global state (a token store, a counter)
/// belongs behind an injected protocol so the behavior can be tested alone.
///
/// ### Implement a behavior
/// ```swift
/// struct APIKeyBehavior: RequestBehavior {
///     let key: String
///     func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
///         ["X-API-Key": key]
///     }
/// }
/// ```
/// Sends a request through the rest of the chain's ``RequestBehavior/intercept(_:context:next:)``
/// members and the transport: the `next` a behavior's `intercept` is given.
public typealias InterceptNext = @Sendable (HTTPRequest) async throws(NetworkError) -> HTTPResponse

public protocol RequestBehavior: Sendable {
    /// The name used in errors and logs and by ``RequestBehavior`` opt-out by name.
    /// Defaults to the type's name.
    var name: String { get }

    /// Headers to add to an attempt. Later behaviors win over earlier ones, and a header the
    /// request sets itself wins over all of them. Runs for every attempt.
    /// - Parameters:
    ///   - request: The attempt as the caller built it, before any behavior changed it.
    ///   - context: The request's context.
    /// - Returns: The headers to add; empty for none.
    /// - Throws: Any error fails the request with ``NetworkError/behaviorFailed(behavior:hook:underlying:)``.
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders

    /// Changes an attempt in place, after headers are merged. Runs for every attempt, first to last.
    /// - Parameters:
    ///   - request: The attempt to change; a change here wins over the request's own headers.
    ///   - context: The request's context.
    /// - Throws: Any error fails the request with ``NetworkError/behaviorFailed(behavior:hook:underlying:)``.
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws

    /// Called once per logical request, after the first attempt is prepared and before it is sent.
    /// Exactly one `afterSuccess` or `afterFailure` follows.
    /// - Parameters:
    ///   - request: The first attempt, as it will be sent.
    ///   - context: The request's context.
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async

    /// Stands between an attempt and the transport: answer it yourself (a cache hit, a stub, a
    /// result shared with an identical request in flight), change the request on its way, or call
    /// `next` and see, replace or store the transport's response. Runs for every attempt, after
    /// `beforeSend` and before the response is judged. Members nest: the first behavior is
    /// outermost, the last calls the transport.
    ///
    /// What it returns is judged as if the transport had answered: the size limit, the acceptable
    /// statuses, then `validate`, `retryDecision` and exactly one `afterSuccess`/`afterFailure`,
    /// as for any response. Calling `next` more than once sends more than once (each call is one
    /// transport exchange); not calling it sends nothing.
    ///
    /// ```swift
    /// func intercept(_ request: HTTPRequest, context: RequestContext, next: InterceptNext) async throws -> HTTPResponse {
    ///     if let hit = cache[request.url] { return hit }
    ///     let response = try await next(request)
    ///     cache[request.url] = response
    ///     return response
    /// }
    /// ```
    /// - Parameters:
    ///   - request: The attempt, prepared by every `additionalHeaders` and `modify`.
    ///   - context: The request's context.
    ///   - next: Sends a request through the rest of the chain and the transport; it returns the
    ///     transport's response whatever its status, or throws the ``NetworkError`` the transport's
    ///     failure maps to. It may be called from another task (to share one call between requests).
    /// - Returns: The attempt's response.
    /// - Throws: A ``NetworkError`` (one `next` threw, say) passes through as it is; any other error
    ///   fails the attempt with ``NetworkError/behaviorFailed(behavior:hook:underlying:)``.
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse

    /// Judges a response whose status was acceptable; throw to fail this attempt (it then goes
    /// through `retryDecision`). Runs for every attempt, last to first.
    /// - Parameters:
    ///   - response: The attempt's response.
    ///   - context: The request's context.
    /// - Throws: An error that fails the attempt.
    func validate(_ response: HTTPResponse, context: RequestContext) async throws

    /// Decides whether a failed attempt should be retried. Runs for every failed attempt,
    /// first to last, until one answers `.retry`. Never runs after cancellation.
    /// - Parameters:
    ///   - failure: Why the attempt failed.
    ///   - response: The attempt's response, if one arrived.
    ///   - context: The request's context.
    /// - Returns: ``RetryDecision/doNotRetry`` or ``RetryDecision/retry(after:)``.
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision

    /// Called once when the logical request succeeded, last to first.
    /// - Parameters:
    ///   - response: The final response.
    ///   - context: The request's context.
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async

    /// Called once when the logical request failed (including cancellation), last to first.
    /// - Parameters:
    ///   - error: The error the caller receives.
    ///   - context: The request's context.
    func afterFailure(_ error: NetworkError, context: RequestContext) async
}

extension RequestBehavior {
    /// The type's name.
    public var name: String { String(describing: Self.self) }
    /// No headers.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        DefaultHooks.record(Self.self, .additionalHeaders)
        return HTTPHeaders()
    }
    /// Does nothing.
    public func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        DefaultHooks.record(Self.self, .modify)
    }
    /// Does nothing.
    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        DefaultHooks.record(Self.self, .beforeSend)
    }
    /// Calls `next`: the attempt goes to the transport.
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext)
        async throws -> HTTPResponse
    {
        DefaultHooks.record(Self.self, .intercept)
        return try await next(request)
    }
    /// Accepts every response.
    public func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        DefaultHooks.record(Self.self, .validate)
    }
    /// Never asks for a retry.
    public func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        DefaultHooks.record(Self.self, .retryDecision)
        return .doNotRetry
    }
    /// Does nothing.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        DefaultHooks.record(Self.self, .afterSuccess)
    }
    /// Does nothing.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        DefaultHooks.record(Self.self, .afterFailure)
    }
}
