/// A behavior told once per logical request that it is about to be sent: start a spinner, a
/// background task, a timer. Exactly one `afterSuccess` or `afterFailure` follows for a behavior
/// that also declares ``SuccessObserving`` and ``FailureObserving``.
///
/// ```swift
/// struct StartLog: SendObserving {
///     func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
///         print("sending", request.method, request.url.path)
///     }
/// }
/// ```
public protocol SendObserving: _RequestHookDeclaring {
    /// Called once per logical request, after the first attempt is prepared and before it is
    /// sent, first to last.
    /// - Parameters:
    ///   - request: The first attempt, as it will be sent.
    ///   - context: The request's context.
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async
}

extension SendObserving {
    /// This protocol's bit.
    @inlinable public static var _sendObservingBit: UInt16 { 4 }

    /// Calls ``beforeSend``.
    @inlinable
    public func _beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        await beforeSend(request, context: context)
    }
}
