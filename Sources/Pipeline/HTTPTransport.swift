/// The one seam between Conveyor and the network: sends a request and returns the response.
///
/// `URLSession` conforms with no wrapper (it builds the `URLRequest` once); tests pass
/// `MockTransport` from `ConveyorTesting`. A transport reports any status code as a response
/// (it does not judge 4xx/5xx) and throws only when no response arrived.
///
/// ### Cancellation and limits
/// A transport should end promptly, throwing, when its task is cancelled, and say so with
/// ``honorsCancellation``: the client then calls it directly. A transport that does not say so
/// is called in a task of its own that the client abandons (never awaits) when the request is
/// cancelled or times out, so a transport that ignores cancellation cannot hang a request.
/// A transport that reads the body as it arrives should stop once more than
/// ``HTTPRequest/maxResponseSize`` bytes (after content decoding) have arrived and throw
/// ``NetworkError/responseTooLarge(limit:)``; the client checks the size of every body it gets
/// in any case.
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

    /// Whether ``send(_:)`` ends promptly, throwing, when its task is cancelled. `false` by
    /// default: the client then runs each call in a task of its own and abandons it on
    /// cancellation or timeout, which costs a task per attempt. Return `true` only when it holds
    /// for every request.
    var honorsCancellation: Bool { get }
}

extension HTTPTransport {
    /// `false`: a transport is guarded unless it says it honors cancellation.
    public var honorsCancellation: Bool { false }
}

/// A transport that streams: it reads ``HTTPRequest/bodyStream`` in pieces as it sends, and hands
/// the response body to the request's ``TransferHandler`` as it arrives.
///
/// Whether a transport streams is part of its type. The client gives a plain ``HTTPTransport``
/// whole bodies: it reads a body stream into ``HTTPRequest/body`` first and hands the whole
/// response body to the transfer afterwards, so a simple transport needs no streaming code (but
/// holds bodies in memory). A `StreamingHTTPTransport` gets the transfer as an argument: nothing
/// about where the response goes rides on the request, so no transport can ignore it by accident.
public protocol StreamingHTTPTransport: HTTPTransport {
    /// Sends one attempt of a request, streaming both bodies.
    /// - Parameters:
    ///   - request: The request, after every behavior has adjusted it; its ``HTTPRequest/bodyStream``
    ///     is read in pieces as it is sent.
    ///   - transfer: Where the response body goes and who hears of progress, or `nil` when the
    ///     body goes into the response and no one listens (see ``TransferHandler``).
    /// - Returns: The response, whatever its status; its body is empty when `transfer` took it.
    /// - Throws: When no response arrived (offline, timed out, cancelled, connection lost…).
    func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse
}

extension StreamingHTTPTransport {
    /// Sends with no transfer: the body goes into the response.
    /// - Parameter request: The request.
    /// - Returns: The response, whatever its status.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await send(request, transfer: nil)
    }
}
