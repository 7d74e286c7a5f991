/// A behavior told once when a logical request failed, cancellation included, after every
/// attempt.
///
/// ```swift
/// struct FailureLog: FailureObserving {
///     func afterFailure(_ error: NetworkError, context: RequestContext) async {
///         print("request \(context.requestID) failed: \(error)")
///     }
/// }
/// ```
public protocol FailureObserving: _RequestHookDeclaring {
    /// Called once when the logical request failed (including cancellation), last to first.
    /// - Parameters:
    ///   - error: The error the caller receives.
    ///   - context: The request's context.
    func afterFailure(_ error: NetworkError, context: RequestContext) async
}

extension FailureObserving {
    /// This protocol's bit.
    @inlinable public static var _failureObservingBit: UInt16 { 128 }

    /// Calls ``afterFailure``.
    @inlinable
    public func _afterFailure(_ error: NetworkError, context: RequestContext) async {
        await afterFailure(error, context: context)
    }
}
