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
    public var headers: HTTPHeaders {
        get { headerStorage.fields }
        set {
            if case .measured(let measured) = headerStorage {
                headerStorage = .measured(Measured(headers: .fields(newValue), timings: measured.timings))
            } else {
                headerStorage = .fields(newValue)
            }
        }
    }
    /// The body bytes (empty when there is none).
    public var body: Data
    /// The request that was sent for this response (after every behavior ran).
    public var request: HTTPRequest
    /// How the exchange went, as the transport measured it; `nil` when the transport does not
    /// measure or a behavior answered. Not part of equality: two responses that differ only in
    /// timings are equal.
    public var timings: TransferTimings? {
        get {
            if case .measured(let measured) = headerStorage { return measured.timings }
            return nil
        }
        set {
            let headers = headerStorage.withoutTimings
            headerStorage = newValue.map { .measured(Measured(headers: headers, timings: $0)) } ?? headers
        }
    }

    private var headerStorage: HeaderStorage

    /// Creates a response.
    /// - Parameters:
    ///   - status: The status code.
    ///   - headers: The header fields.
    ///   - body: The body bytes.
    ///   - request: The request that produced it.
    public init(status: Int, headers: HTTPHeaders = [:], body: Data = Data(), request: HTTPRequest) {
        self.status = status
        self.headerStorage = .fields(headers)
        self.body = body
        self.request = request
    }

    /// Creates a response whose headers are converted from the transport's own representation
    /// the first time anyone reads them (most requests never do).
    /// - Parameters:
    ///   - status: The status code.
    ///   - headers: Converts the transport's headers; called at most once.
    ///   - body: The body bytes.
    ///   - request: The request that produced it.
    package init(
        status: Int, deferredHeaders headers: @escaping @Sendable () -> HTTPHeaders, body: Data, request: HTTPRequest
    ) {
        self.status = status
        self.headerStorage = .deferred(DeferredHeaders(headers))
        self.body = body
        self.request = request
    }

    /// Whether the status is in `200..<300`.
    public var isSuccess: Bool { (200..<300).contains(status) }

    /// `status for METHOD url (N bytes)`; headers and body are left out, so no secret is printed.
    public var description: String { "\(status) for \(request) (\(body.count) bytes)" }

    /// Two responses are equal when status, headers, body and request are (timings are not compared).
    public static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body && lhs.request == rhs.request && lhs.headers == rhs.headers
    }

    /// Hashes status, headers, body and request (not timings), consistent with `==`.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(status)
        hasher.combine(headers)
        hasher.combine(body)
        hasher.combine(request)
    }
}

/// Where a response's headers are: converted already, or still in the transport's form; and, for
/// a response the transport measured, its timings too. Timings live here, out of line, so a
/// response without them is no larger and copies no more than before.
private enum HeaderStorage: Sendable {
    case fields(HTTPHeaders)
    case deferred(DeferredHeaders)
    case measured(Measured)

    var fields: HTTPHeaders {
        switch self {
        case .fields(let fields): fields
        case .deferred(let deferred): deferred.fields
        case .measured(let measured): measured.headers.fields
        }
    }

    var withoutTimings: HeaderStorage {
        if case .measured(let measured) = self { return measured.headers }
        return self
    }
}

/// A measured response's headers (never `.measured` themselves) and timings.
private final class Measured: Sendable {
    let headers: HeaderStorage
    let timings: TransferTimings
    init(headers: HeaderStorage, timings: TransferTimings) {
        self.headers = headers
        self.timings = timings
    }
}

/// Headers converted on first read, exactly once, and shared by every copy of the response.
///
/// Converting `HTTPURLResponse.allHeaderFields` costs thousands of instructions on Linux
/// (BENCHMARKS.md), and most responses are decoded without anyone reading a header.
private final class DeferredHeaders: Sendable {
    private enum State {
        case pending(@Sendable () -> HTTPHeaders)
        case converted(HTTPHeaders)
    }

    private let state: Locked<State>

    init(_ convert: @escaping @Sendable () -> HTTPHeaders) { state = Locked(.pending(convert)) }

    var fields: HTTPHeaders {
        state.withLock { state in
            switch state {
            case .converted(let fields):
                return fields
            case .pending(let convert):
                let fields = convert()
                state = .converted(fields)
                return fields
            }
        }
    }
}

extension HTTPResponse: CustomReflectable {
    /// A mirror without secrets: the body by size only, credential headers (`Set-Cookie`)
    /// redacted, any other header that echoes a credential the request sent shown as `***`, the
    /// request without its query or body. `dump(response)` is safe to log.
    public var customMirror: Mirror {
        let sensitive = request.sensitiveHeaders
        let sent = request.headers.credentialValues(where: sensitive.contains)
        let shown = headers.map { field in
            sensitive.contains(field.name) || sent.contains(where: field.value.contains)
                ? "\(field.name): ***" : "\(field.name): \(field.value)"
        }
        return Mirror(
            self,
            children: ["status": status, "headers": shown, "body": "\(body.count) bytes", "request": request],
            displayStyle: .struct)
    }
}
