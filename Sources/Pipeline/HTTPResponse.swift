public import Foundation

/// A response as the pipeline carries it: status, headers, body and the request that produced it.
///
/// ```swift
/// if response.status == 503, let wait = response.headers["Retry-After"] { … }
/// ```
public struct HTTPResponse: Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status code, for example `200`.
    public var status: Int
    /// The response header fields.
    public var headers: HTTPHeaders
    /// The body bytes (empty when there is none).
    public var body: Data
    /// The request that was sent for this response (after every behavior ran).
    public var request: HTTPRequest

    /// Creates a response.
    /// - Parameters:
    ///   - status: The status code.
    ///   - headers: The header fields.
    ///   - body: The body bytes.
    ///   - request: The request that produced it.
    public init(status: Int, headers: HTTPHeaders = [:], body: Data = Data(), request: HTTPRequest) {
        self.status = status
        self.headers = headers
        self.body = body
        self.request = request
    }

    /// Whether the status is in `200..<300`.
    public var isSuccess: Bool { (200..<300).contains(status) }

    /// `status for METHOD url (N bytes)`; headers and body are left out, so no secret is printed.
    public var description: String { "\(status) for \(request) (\(body.count) bytes)" }
}

extension HTTPResponse: CustomReflectable {
    /// A mirror without secrets: the body by size only, credential headers (`Set-Cookie`)
    /// redacted, the request without its query or body. `dump(response)` is safe to log.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: ["status": status, "headers": headers, "body": "\(body.count) bytes", "request": request],
            displayStyle: .struct)
    }
}
