/// The one seam between Conveyor and the network: sends a request and returns the response.
///
/// `URLSession` conforms with no wrapper (it builds the `URLRequest` once); tests pass
/// `MockTransport` from `ConveyorTesting`. A transport reports any status code as a response
/// (it does not judge 4xx/5xx) and throws only when no response arrived. It must end promptly
/// with an error when its task is cancelled.
///
/// ```swift
/// struct CannedTransport: HTTPTransport {
///     func send(_ request: HTTPRequest) async throws -> HTTPResponse {
///         HTTPResponse(status: 200, body: Data("{}".utf8), request: request)
///     }
/// }
/// ```
public protocol HTTPTransport: Sendable {
    /// Sends one attempt of a request.
    /// - Parameter request: The request, after every behavior has adjusted it.
    /// - Returns: The response, whatever its status.
    /// - Throws: When no response arrived (offline, timed out, cancelled, connection lost…).
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}
