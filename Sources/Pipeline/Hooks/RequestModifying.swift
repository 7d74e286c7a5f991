/// A behavior that changes every attempt in place, after the headers are merged (sign it, move
/// a parameter, set a timeout).
///
/// ```swift
/// struct ShortTimeout: RequestModifying {
///     func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
///         request.timeout = .seconds(5)
///     }
/// }
/// ```
public protocol RequestModifying: _RequestHookDeclaring {
    /// Changes an attempt in place, after headers are merged. Runs for every attempt, first to last.
    /// - Parameters:
    ///   - request: The attempt to change; a change here wins over the request's own headers.
    ///   - context: The request's context.
    /// - Throws: A ``NetworkError`` passes through as it is; any other error fails the request
    ///   with ``NetworkError/behaviorFailed(behavior:hook:underlying:)``.
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws
}

extension RequestModifying {
    /// This protocol's bit.
    @inlinable public static var _requestModifyingBit: UInt16 { 2 }

    /// Calls ``modify``.
    @inlinable
    public func _modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        try await modify(&request, context: context)
    }
}
