/// A behavior that sends credentials in headers it names itself (a custom auth header, an API key
/// header): every request of the client it is on treats those names as sensitive (contract rule
/// 11), stripped on a cross-origin redirect and hidden in every rendering, and nothing outside
/// that client changes.
///
/// ```swift
/// struct SessionBehavior: HeaderAdding, SensitiveHeaderDeclaring {
///     let session: String
///     var sensitiveHeaderNames: [String] { ["X-Session"] }
///     func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
///         ["X-Session": session]
///     }
/// }
/// ```
public protocol SensitiveHeaderDeclaring: RequestBehavior {
    /// The header names whose values this behavior sends as credentials.
    var sensitiveHeaderNames: [String] { get }
}

extension SensitiveHeaderDeclaring {
    /// ``sensitiveHeaderNames``.
    @inlinable public var _sensitiveHeaderNames: [String] { sensitiveHeaderNames }
}
