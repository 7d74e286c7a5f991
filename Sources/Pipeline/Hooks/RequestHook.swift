/// Names one hook of ``RequestBehavior``; used in errors and by recording behaviors.
public enum RequestHook: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// ``HeaderAdding/additionalHeaders(for:context:)``
    case additionalHeaders
    /// ``RequestModifying/modify(_:context:)``
    case modify
    /// ``SendObserving/beforeSend(_:context:)``
    case beforeSend
    /// ``AttemptIntercepting/intercept(_:context:next:)``
    case intercept
    /// ``ResponseValidating/validate(_:context:)``
    case validate
    /// ``RetryDeciding/retryDecision(after:response:context:)``
    case retryDecision
    /// ``SuccessObserving/afterSuccess(_:context:)``
    case afterSuccess
    /// ``FailureObserving/afterFailure(_:context:)``
    case afterFailure

    /// The hook's name.
    public var description: String { rawValue }
}
