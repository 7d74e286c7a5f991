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

    /// Whether ``send(_:)`` streams: reads ``HTTPRequest/bodyStream`` in pieces, and hands the
    /// response body to ``HTTPRequest/transfer`` as it arrives (see ``TransferHandler``).
    /// `false` by default: the client then reads a body stream into ``HTTPRequest/body`` before
    /// calling the transport, and hands the whole response body to the transfer afterwards, so
    /// a simple transport needs no streaming code (but holds bodies in memory).
    var streamsBodies: Bool { get }
}

extension HTTPTransport {
    /// `false`: a transport is guarded unless it says it honors cancellation.
    public var honorsCancellation: Bool { false }

    /// `false`: the client buffers streamed bodies for a transport that does not say it streams.
    public var streamsBodies: Bool { false }
}
