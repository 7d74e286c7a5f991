/// A behavior that adds headers to every attempt (a token, an API key, a user agent).
///
/// ```swift
/// struct APIKeyBehavior: HeaderAdding {
///     let key: String
///     func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
///         ["X-API-Key": key]
///     }
/// }
/// ```
public protocol HeaderAdding: _RequestHookDeclaring {
    /// Headers to add to an attempt. Later behaviors win over earlier ones, and a header the
    /// request sets itself wins over all of them. Runs for every attempt, first to last.
    /// - Parameters:
    ///   - request: The attempt as the caller built it, before any behavior changed it.
    ///   - context: The request's context.
    /// - Returns: The headers to add; empty for none.
    /// - Throws: A ``NetworkError`` passes through as it is; any other error fails the request
    ///   with ``NetworkError/behaviorFailed(behavior:hook:underlying:)``.
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders
}

extension HeaderAdding {
    /// This protocol's bit.
    @inlinable public static var _headerAddingBit: UInt16 { 1 }

    /// Calls ``additionalHeaders``.
    @inlinable
    public func _additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        try await additionalHeaders(for: request, context: context)
    }
}
