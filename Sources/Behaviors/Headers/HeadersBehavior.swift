public import ConveyorPipeline

/// Adds static headers to every request: `User-Agent`, `Accept-Language`, an API key.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     HeadersBehavior(["User-Agent": "MyApp/2.1 (iOS 18)", "Accept-Language": "de-CH"])
///     HeadersBehavior(["X-Client": "app"], mode: .overwrite)
/// }
/// ```
///
/// With ``Mode/setIfAbsent`` (the default) the headers come from `additionalHeaders`, so a header
/// the request sets itself wins. With ``Mode/overwrite`` they are set in `modify` and replace
/// whatever the request or earlier behaviors set.
public struct HeadersBehavior: RequestBehavior {
    /// How the headers are applied.
    public enum Mode: Sendable, Hashable {
        /// Add each header unless the request sets it itself.
        case setIfAbsent
        /// Set each header, replacing the request's own and earlier behaviors' values.
        case overwrite
    }

    /// The headers to add.
    public let headers: HTTPHeaders
    /// How they are applied.
    public let mode: Mode

    /// Creates the behavior.
    /// - Parameters:
    ///   - headers: The headers to add to every request.
    ///   - mode: ``Mode/setIfAbsent`` (default) or ``Mode/overwrite``.
    public init(_ headers: HTTPHeaders, mode: Mode = .setIfAbsent) {
        self.headers = headers
        self.mode = mode
    }

    /// Returns ``headers`` in ``Mode/setIfAbsent`` mode.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        mode == .setIfAbsent ? headers : HTTPHeaders()
    }

    /// Sets ``headers`` in ``Mode/overwrite`` mode.
    public func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        guard mode == .overwrite else { return }
        for field in headers { request.headers[field.name] = field.value }
    }
}
