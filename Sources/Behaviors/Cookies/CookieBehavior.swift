public import ConveyorPipeline
public import Foundation

/// Keeps cookies for one client: sends what its ``CookieJar`` holds for each request, and stores
/// what each response's `Set-Cookie` says.
///
/// Conveyor's transports keep no cookies (no process-wide jar: one client's login never rides
/// on another's requests); add this behavior to the clients that want them:
///
/// ```swift
/// let jar = CookieJar()
/// let client = NetworkClient(baseURL: api) {
///     CookieBehavior(jar: jar)
///     CacheBehavior()          // the cookie is part of the cache's identity
/// }
/// ```
///
/// The jar scopes each cookie as RFC 6265 says (domain, path, `Secure`, expiry), and the
/// behavior adds the credential policy every credential behavior follows: cookies go to, and are
/// accepted from, only the client's base URL's origin and the `allowedOrigins` you list. The
/// `Cookie` header is added with the other behaviors' headers, before any `intercept`, so the
/// cache and de-duplication see it, the logs redact it, and a transport drops it on a redirect to
/// another origin. `Set-Cookie` is read from every attempt's response, errors included, and
/// from the head of a response whose body broke off (an event stream's dropped connection); a
/// redirect the transport follows on its own is not seen, so a cookie set by an intermediate hop
/// is not kept.
public struct CookieBehavior: HeaderAdding, AttemptIntercepting {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String
    /// Where the cookies are kept.
    package let jar: CookieJar
    /// Origins besides the base URL's that cookies may go to and come from.
    package let allowedOrigins: Set<Origin>

    /// Creates the behavior.
    /// - Parameters:
    ///   - jar: Where the cookies are kept; a new, empty jar by default.
    ///   - allowedOrigins: Origins besides the client's base URL's that cookies may go to and come from.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions.
    public init(jar: CookieJar = CookieJar(), allowedOrigins: [URL] = [], name: String? = nil) {
        self.name = name ?? String(describing: Self.self)
        self.jar = jar
        self.allowedOrigins = Set(allowedOrigins.compactMap(Origin.init))
    }

    /// The `Cookie` header for the attempt, when the jar holds cookies for it.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        guard context.credentialsAllowed(alsoTo: allowedOrigins), let value = jar.header(for: request.url) else {
            return HTTPHeaders()
        }
        return ["Cookie": value]
    }

    /// Passes the attempt on, and stores the cookies its response sets (whatever its status).
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        let response: HTTPResponse
        do {
            response = try await next(request)
        } catch {
            // A head that arrived before the body broke off (a dropped event stream) sets cookies too.
            if let head = error.responseHead { store(from: head, context: context) }
            throw error
        }
        store(from: response, context: context)
        return response
    }

    private func store(from response: HTTPResponse, context: RequestContext) {
        guard context.credentialsAllowed(alsoTo: allowedOrigins) else { return }
        let values = response.headers.values(for: "Set-Cookie")
        if !values.isEmpty { jar.store(setCookies: values, from: response.request.url) }
    }
}
