/// A behavior that decides whether a failed attempt is sent again, and after how long.
///
/// ```swift
/// struct RetryOnce503: RetryDeciding {
///     func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
///         -> RetryDecision
///     {
///         response?.status == 503 && context.attempt == 1 ? .retry(after: .seconds(1)) : .doNotRetry
///     }
/// }
/// ```
public protocol RetryDeciding: _RequestHookDeclaring {
    /// Decides whether a failed attempt should be retried. Runs for every failed attempt, first
    /// to last, until one answers `.retry`. Never runs after cancellation.
    /// - Parameters:
    ///   - failure: Why the attempt failed.
    ///   - response: The attempt's response, if one arrived.
    ///   - context: The request's context.
    /// - Returns: ``RetryDecision/doNotRetry`` or ``RetryDecision/retry(after:)``.
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
}

extension RetryDeciding {
    /// This protocol's bit.
    @inlinable public static var _retryDecidingBit: UInt16 { 32 }

    /// Calls ``retryDecision``.
    @inlinable
    public func _retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision {
        await retryDecision(after: failure, response: response, context: context)
    }
}
