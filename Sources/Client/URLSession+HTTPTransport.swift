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
        urlRequest.httpMethod = request.method.rawValue
        if !request.headers.isEmpty {
            // One assignment instead of one bridged call per header (each costs allocations on
            // Linux). Repeated names are joined with ", " (RFC 9110), repeated cookies with "; "
            // (RFC 6265).
            var fields: [String: String] = [:]
            fields.reserveCapacity(request.headers.count)
            var names: [String: String] = [:]  // lowercased name -> first spelling
            for field in request.headers {
                let key = field.name.lowercased()
                let name = names[key] ?? field.name
                names[key] = name
                let separator = key == "cookie" ? "; " : ", "
                fields[name] = fields[name].map { "\($0)\(separator)\(field.value)" } ?? field.value
            }
            urlRequest.allHTTPHeaderFields = fields
        }
        urlRequest.httpBody = request.body
        if let timeout = request.timeout {
            let seconds =
                Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
            urlRequest.timeoutInterval = seconds.rounded(.up) + 1
        }
        let (data, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else {
            throw NetworkError.transportFailed(NotHTTPResponseError())
        }
        var headers = HTTPHeaders()
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String {
                headers.add(name: name, value: value)
            }
        }
        return HTTPResponse(status: http.statusCode, headers: headers, body: data, request: request)
    }
}

/// The transport received a response that is not HTTP.
struct NotHTTPResponseError: Error, SafelyDescribable {
    var description: String { "the response is not an HTTP response" }
}
