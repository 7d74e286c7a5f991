public import ConveyorPipeline

#if canImport(FoundationNetworking)
    import Foundation
    public import FoundationNetworking
#else
    public import Foundation
#endif

/// `URLSession` is an ``ConveyorPipeline/HTTPTransport`` as it is: pass `URLSession.shared` or your own session.
///
/// It builds the `URLRequest` once per attempt, after every behavior has run. Settings only
/// URLSession knows (cache policy, cellular access, cookies) come from its configuration.
///
/// - Important: A plain session follows redirects by its own rules; on Linux it forwards every
///   header, `Authorization` included, to a redirect target on another origin. ``NetworkClient``'s
///   default transport, ``URLSessionTransport``, strips credentials on cross-origin redirects and
///   caps redirect chains; prefer it unless you need your own session's delegate.
/// The request's timeout is enforced by ``NetworkClient`` on its clock, so sub-second timeouts
/// work on Linux too; the `URLRequest` gets a whole-second backstop one second longer.
extension URLSession: HTTPTransport {
    /// Sends one attempt with `data(for:)`.
    /// - Parameter request: The attempt, after every behavior ran.
    /// - Returns: The response, whatever its status.
    /// - Throws: `URLError` (mapped by the client to ``ConveyorPipeline/NetworkError``), or
    ///   ``ConveyorPipeline/NetworkError/transportFailed(_:)`` when the response is not HTTP.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await ConveyorClientSend.send(request, using: self)
    }
}

enum ConveyorClientSend {
    /// Builds the `URLRequest` once, sends it on `session`, converts the response.
    static func send(_ request: HTTPRequest, using session: URLSession) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        // GET is URLRequest's default; setting it anyway costs a case-insensitive normalization
        // of the method on Linux (thousands of instructions).
        if request.method != .get { urlRequest.httpMethod = request.method.rawValue }
        if !request.headers.isEmpty { urlRequest.allHTTPHeaderFields = headerDictionary(request.headers) }
        if let body = request.body { urlRequest.httpBody = body }
        if let timeout = request.timeout {
            let seconds =
                Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
            urlRequest.timeoutInterval = seconds.rounded(.up) + 1
        }
        let (data, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else {
            throw NetworkError.transportFailed(NotHTTPResponseError())
        }
        // Headers are converted only if something reads them: most responses are decoded
        // without that, and `allHeaderFields` costs thousands of instructions on Linux.
        return HTTPResponse(
            status: http.statusCode, deferredHeaders: { responseHeaders(http) }, body: data, request: request)
    }
}

/// A response's header fields as the pipeline carries them.
func responseHeaders(_ response: HTTPURLResponse) -> HTTPHeaders {
    var headers = HTTPHeaders()
    for (name, value) in response.allHeaderFields {
        if let name = name as? String, let value = value as? String {
            headers.add(name: name, value: value)
        }
    }
    return headers
}

/// The request's headers as one dictionary for `allHTTPHeaderFields` (one assignment instead of
/// one bridged call per header, each of which costs allocations on Linux). A repeated name,
/// in any case, is joined into its first spelling with ", " (RFC 9110), or "; " for cookies
/// (RFC 6265).
func headerDictionary(_ headers: HTTPHeaders) -> [String: String] {
    var fields: [String: String] = [:]
    fields.reserveCapacity(headers.count)
    for field in headers {
        // Requests rarely repeat a name, so look for an earlier spelling only among the few
        // fields already added, without lowercasing every name.
        guard let existing = fields.keys.first(where: { HTTPHeaders.namesEqual($0, field.name) }) else {
            fields[field.name] = field.value
            continue
        }
        let separator = HTTPHeaders.namesEqual(existing, "Cookie") ? "; " : ", "
        fields[existing, default: ""] += separator + field.value
    }
    return fields
}

/// The transport received a response that is not HTTP.
struct NotHTTPResponseError: Error, SafelyDescribable {
    var description: String { "the response is not an HTTP response" }
}
