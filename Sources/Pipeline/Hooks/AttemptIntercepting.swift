/// A behavior that stands between an attempt and the transport: it answers the attempt itself
/// (a cache hit, a stub, a result shared with an identical request in flight), changes the
/// request on its way, or calls `next` and sees, replaces or stores the transport's response.
///
/// ```swift
/// struct Stub: AttemptIntercepting {
///     let answer: HTTPResponse
///     func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
///         -> HTTPResponse
///     {
///         request.url.path == "/health" ? answer : try await next(request)
///     }
/// }
/// ```
///
/// What it returns is judged as if the transport had answered: the size limit, the acceptable
/// statuses, then `validate`, `retryDecision` and exactly one `afterSuccess`/`afterFailure`, as
/// for any response. Calling `next` more than once sends more than once (each call is one
/// transport exchange); not calling it sends nothing.
public protocol AttemptIntercepting: _RequestHookDeclaring {
    /// Runs for every attempt, after `beforeSend` and before the response is judged. Members
    /// nest: the first behavior is outermost, the last calls the transport.
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
}

extension AttemptIntercepting {
    /// This protocol's bit.
    @inlinable public static var _attemptInterceptingBit: UInt16 { 8 }

    /// Calls ``intercept``.
    @inlinable
    public func _intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse {
        try await intercept(request, context: context, next: next)
    }
}
