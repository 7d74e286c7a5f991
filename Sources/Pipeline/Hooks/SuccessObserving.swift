/// A behavior told once when a logical request succeeded, after every attempt.
///
/// ```swift
/// struct SuccessCount: SuccessObserving {
///     let count: @Sendable () -> Void
///     func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { count() }
/// }
/// ```
public protocol SuccessObserving: _RequestHookDeclaring {
    /// Called once when the logical request succeeded, last to first.
    /// - Parameters:
    ///   - response: The final response.
    ///   - context: The request's context.
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async
}

extension SuccessObserving {
    /// This protocol's bit.
    @inlinable public static var _successObservingBit: UInt16 { 64 }

    /// Calls ``afterSuccess``.
    @inlinable
    public func _afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        await afterSuccess(response, context: context)
    }
}
