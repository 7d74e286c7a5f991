/// A behavior that judges every response whose status was acceptable, and may fail the attempt
/// (a captive portal's 200, a missing signature); the failed attempt then goes through
/// `retryDecision`.
///
/// ```swift
/// struct RequireJSON: ResponseValidating {
///     struct NotJSON: Error {}
///     func validate(_ response: HTTPResponse, context: RequestContext) async throws {
///         guard response.headers["Content-Type"]?.hasPrefix("application/json") == true else { throw NotJSON() }
///     }
/// }
/// ```
public protocol ResponseValidating: _RequestHookDeclaring {
    /// Judges a response whose status was acceptable; throw to fail this attempt. Runs for
    /// every attempt, last to first.
    /// - Parameters:
    ///   - response: The attempt's response.
    ///   - context: The request's context.
    /// - Throws: An error that fails the attempt.
    func validate(_ response: HTTPResponse, context: RequestContext) async throws
}

extension ResponseValidating {
    /// This protocol's bit.
    @inlinable public static var _responseValidatingBit: UInt16 { 16 }

    /// Calls ``validate``.
    @inlinable
    public func _validate(_ response: HTTPResponse, context: RequestContext) async throws {
        try await validate(response, context: context)
    }
}
