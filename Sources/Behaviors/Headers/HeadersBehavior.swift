public import ConveyorPipeline
public import Foundation

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
///
/// ### Credentials stay with their origin
/// A header that is a credential (`X-API-Key` and the other ``SensitiveHeaders``,
/// plus the names passed as `sensitive:`) is added only to requests for the client's base URL's
/// origin, and to the origins listed in `allowedOrigins`; a request to an absolute URL elsewhere
/// (a CDN link from a response) goes without it. The other headers go everywhere.
///
/// ```swift
/// HeadersBehavior(["X-Tenant-Key": key], sensitive: ["X-Tenant-Key"])
/// ```
public struct HeadersBehavior: HeaderAdding, RequestModifying, SensitiveHeaderDeclaring {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String

    /// How the headers are applied.
    public enum Mode: Sendable, Hashable {
        /// Add each header unless the request sets it itself.
        case setIfAbsent
        /// Set each header, replacing the request's own and earlier behaviors' values.
        case overwrite
    }

    /// The headers to add.
    package let headers: HTTPHeaders
    /// How they are applied.
    package let mode: Mode
    /// Origins besides the base URL's that credential headers may go to.
    package let allowedOrigins: Set<Origin>
    /// The headers without the credentials: what a request to another origin gets.
    private let publicHeaders: HTTPHeaders
    /// The names given as `sensitive`: sensitive for every request of this behavior's client.
    public let sensitiveHeaderNames: [String]

    /// Creates the behavior.
    /// - Parameters:
    ///   - headers: The headers to add to every request.
    ///   - mode: ``Mode/setIfAbsent`` (default) or ``Mode/overwrite``.
    ///   - sensitive: More header names that are credentials: kept to the allowed origins here,
    ///     and sensitive for every request of the client this behavior is on
    ///     (``SensitiveHeaderDeclaring``).
    ///   - allowedOrigins: Origins besides the base URL's that credential headers may go to.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default. Give two behaviors of one type different names to leave one out.
    public init(
        _ headers: HTTPHeaders, mode: Mode = .setIfAbsent, sensitive: Set<String> = [], allowedOrigins: [URL] = [], name: String? = nil
    ) {
        self.name = name ?? String(describing: Self.self)
        self.sensitiveHeaderNames = Array(sensitive)
        self.headers = headers
        self.mode = mode
        self.allowedOrigins = Set(allowedOrigins.compactMap(Origin.init))
        let credentials = SensitiveHeaders.standard.adding(sensitive)
        self.publicHeaders = HTTPHeaders(headers.filter { !credentials.contains($0.name) })
    }

    /// The headers this request may carry: all of them on an allowed origin, else the public ones.
    private func headers(for context: RequestContext) -> HTTPHeaders {
        publicHeaders.count == headers.count || context.credentialsAllowed(alsoTo: allowedOrigins)
            ? headers : publicHeaders
    }

    /// Returns the behavior's headers in ``Mode/setIfAbsent`` mode.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        mode == .setIfAbsent ? headers(for: context) : HTTPHeaders()
    }

    /// Sets the behavior's headers in ``Mode/overwrite`` mode.
    public func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        guard mode == .overwrite else { return }
        for field in headers(for: context) { request.headers[field.name] = field.value }
    }
}
