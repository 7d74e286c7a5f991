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
/// `afterFailure`) run last to first, so the first behavior is outermost.
/// `retryDecision` asks first to last; the first `.retry` wins.
///
/// ### Attempts and requests
/// `additionalHeaders`, `modify`, `validate` and `retryDecision` run for **every attempt**
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
