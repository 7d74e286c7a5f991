/// Names one hook of ``RequestBehavior``; used in errors and by recording behaviors.
public enum RequestHook: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// ``RequestBehavior/additionalHeaders(for:context:)``
    case additionalHeaders
    /// ``RequestBehavior/modify(_:context:)``
    case modify
    /// ``RequestBehavior/beforeSend(_:context:)``
    case beforeSend
    /// ``RequestBehavior/intercept(_:context:next:)``
    case intercept
    /// ``RequestBehavior/validate(_:context:)``
    case validate
    /// ``RequestBehavior/retryDecision(after:response:context:)``
    case retryDecision
    /// ``RequestBehavior/afterSuccess(_:context:)``
    case afterSuccess
    /// ``RequestBehavior/afterFailure(_:context:)``
    case afterFailure

    /// The hook's name.
    public var description: String { rawValue }
}
