public import Foundation

/// The request that flows through the behavior pipeline: method, URL, headers, body, timeout.
///
/// Behaviors see and change this value type rather than `URLRequest`: building a
/// `URLRequest` header by header is slow on Linux, so the transport builds one exactly once,
/// after every behavior has run.
///
/// ```swift
/// var request = HTTPRequest(method: .get, url: URL(string: "http://127.0.0.1:8080/movies")!)
/// request.headers["Accept"] = "application/json"
/// ```
public struct HTTPRequest: Sendable, Hashable, CustomStringConvertible {
    /// The HTTP method.
    public var method: HTTPMethod
    /// The absolute URL, query included.
    public var url: URL { didSet { urlUnchangedSinceMark = false } }
    /// Set by the engine (``markURL()``) before hooks that may move the request; cleared by any
    /// write to ``url`` and false in a new request: while it holds, the URL is the one marked,
    /// and no comparison of URLs (which costs hundreds of instructions on Linux) is needed.
    package private(set) var urlUnchangedSinceMark = false

    /// Marks the URL as the one the engine scoped credentials for (see ``urlUnchangedSinceMark``).
    package mutating func markURL() { urlUnchangedSinceMark = true }
    /// The header fields.
    public var headers: HTTPHeaders
    /// The one body a request has: none, bytes, or a stream (a file, parts, a sequence).
    private var content: Content

    private enum Content: Sendable, Hashable {
        case none
        case bytes(Data)
        case stream(HTTPBodyStream)
    }

    /// The body bytes, or `nil` when the request has none or a ``bodyStream``. A request has one
    /// body: setting bytes replaces a stream, and setting `nil` removes only bytes.
    public var body: Data? {
        get { if case .bytes(let data) = content { data } else { nil } }
        set {
            if let newValue {
                content = .bytes(newValue)
            } else if case .bytes = content {
                content = .none
            }
        }
    }
    /// How long one attempt may take before it fails with ``NetworkError/timedOut``;
    /// `nil` leaves it to the transport's own default.
    public var timeout: Duration?
    /// The most body bytes (after content decoding, such as gzip) a response may have; a larger
    /// one fails with ``NetworkError/responseTooLarge(limit:)``. `nil` for no limit.
    /// ``NetworkClient`` sets it from its configuration.
    public var maxResponseSize: Int?
    /// A body read in pieces while it is sent (a file, parts, a one-shot sequence), or `nil`
    /// when the request has none or bytes in ``body``. Setting a stream replaces bytes, and
    /// setting `nil` removes only a stream. A transport that does not stream (not a
    /// ``StreamingHTTPTransport``) gets it read into ``body`` first.
    public var bodyStream: HTTPBodyStream? {
        get { if case .stream(let stream) = content { stream } else { nil } }
        set {
            if let newValue {
                content = .stream(newValue)
            } else if case .stream = content {
                content = .none
            }
        }
    }
    /// What the request carries besides its message: its client's sensitive header names, in one
    /// optional reference. `nil` for the standard names (the common case), so a request is no
    /// larger, and no dearer to copy, for having them.
    package var extras: RequestExtras?

    /// The deadline of the whole request, if it has a total timeout (see ``RequestExtras``).
    package var totalDeadline: Deadline? { extras?.totalDeadline }

    /// Bounds the whole request by `total` from now, on `clock` (its attempts, retry decisions and
    /// waits together). Out of line: only a request with a total timeout calls it.
    @inline(never)
    package mutating func bound(by total: Duration, on clock: any Clock<Duration>) {
        extras = RequestExtras(
            sensitiveHeaders: sensitiveHeaders, totalDeadline: Deadline(after: total.clampedForConveyor, on: clock))
    }

    /// The header names whose values are credentials for this request: its client's
    /// (``NetworkClient/Configuration/sensitiveHeaders`` and the names its behaviors declare),
    /// set by ``NetworkClient``. A transport strips them on a cross-origin redirect; renderings of
    /// the request hide their values. Not part of equality.
    public var sensitiveHeaders: SensitiveHeaders {
        get { extras?.sensitiveHeaders ?? .standard }
        set { extras = RequestExtras.make(sensitiveHeaders: newValue) }
    }

    /// Creates a request.
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - url: The absolute URL.
    ///   - headers: The header fields.
    ///   - body: The body bytes.
    ///   - timeout: The per-attempt timeout.
    ///   - maxResponseSize: The most body bytes a response may have; `nil` for no limit.
    public init(
        method: HTTPMethod = .get, url: URL, headers: HTTPHeaders = [:], body: Data? = nil,
        timeout: Duration? = nil, maxResponseSize: Int? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.content = body.map { .bytes($0) } ?? .none
        self.timeout = timeout
        self.maxResponseSize = maxResponseSize
    }

    /// Requests are equal when method, URL, headers, body, body stream, timeout and size limit
    /// are; ``sensitiveHeaders`` are not compared.
    public static func == (lhs: HTTPRequest, rhs: HTTPRequest) -> Bool {
        lhs.method == rhs.method && lhs.url == rhs.url && lhs.headers == rhs.headers && lhs.content == rhs.content
            && lhs.timeout == rhs.timeout && lhs.maxResponseSize == rhs.maxResponseSize
    }

    /// Hashes what ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(method)
        hasher.combine(url)
        hasher.combine(headers)
        hasher.combine(content)
        hasher.combine(timeout)
        hasher.combine(maxResponseSize)
    }

    /// `METHOD url` with the user info and the query left out, since they may carry passwords,
    /// keys or tokens.
    public var description: String { "\(method) \(url.redactingQuery)" }
}

extension URL {
    /// The URL without its user info, query and fragment, for messages that must not reveal
    /// secrets: `https://***@api.test/v1/movies?…`.
    package var redactingQuery: String {
        let string = redactingUserInfo
        guard let cut = string.firstIndex(where: { $0 == "?" || $0 == "#" }) else { return string }
        return String(string[..<cut]) + "?…"
    }

    /// The URL with `user:password@` shown as `***@`; the rest as it is.
    package var redactingUserInfo: String {
        let string = absoluteString
        let bytes = Array(string.utf8)
        // Over bytes: no Foundation range call on text that a redirect's `Location` may have set.
        guard let schemeEnd = bytes[...].endOfFirstSchemeSeparator else { return string }
        let rest = bytes[schemeEnd...]
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) else { return string }
        return String(decoding: bytes[..<schemeEnd] + Array("***".utf8) + bytes[at...], as: UTF8.self)
    }
}

extension ArraySlice where Element == UInt8 {
    /// The index just after the first `://`, or `nil`: a loop over the bytes (Foundation's
    /// `firstRange(of:)` on bytes costs some 15,000 instructions on a short URL, every log line).
    package var endOfFirstSchemeSeparator: Int? {
        var index = startIndex
        while index + 2 < endIndex {
            if self[index] == UInt8(ascii: ":"), self[index + 1] == UInt8(ascii: "/"), self[index + 2] == UInt8(ascii: "/") {
                return index + 3
            }
            index += 1
        }
        return nil
    }
}

extension HTTPRequest: CustomReflectable {
    /// A mirror without secrets: the URL's query is left out, the body shown by size only,
    /// credential headers redacted. `dump(request)` is safe to log.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "method": method.rawValue, "url": url.redactingQuery, "headers": headers.redactedLines(sensitiveHeaders),
                "body": body.map { "\($0.count) bytes" } ?? bodyStream.map(\.description) ?? "none",
                "timeout": timeout as Any,
            ], displayStyle: .struct)
    }
}

extension HTTPRequest {
    /// Whether every header field can be sent (``HTTPHeaders/firstInvalidField()`` finds nothing)
    /// and the framing fields agree with the body (``framingProblem`` is `nil`): one pass over the
    /// fields, the framing check only when a name has the length of `Content-Length` or
    /// `Transfer-Encoding`.
    package var canBeSent: Bool {
        var framing = false
        for field in headers.fields {
            let length = field.name.utf8.count
            if length == 14 || length == 17 { framing = true }
            guard length > 0, HTTPHeaders.isToken(field.name), HTTPHeaders.isValidValue(field.value) else { return false }
        }
        return !framing || framingProblem == nil
    }

    /// Why the request's own framing fields disagree with its body, or `nil` when they do not.
    ///
    /// The transport frames the body (a `Content-Length` from its length, or chunked when the
    /// length is unknown), and transports differ in what they do with a framing field a request
    /// already has: URLSession on Linux sends it as it is, AsyncHTTPClient replaces it. A
    /// `Content-Length` that is not the body's length would make a server read part of the body
    /// as the next request on the connection, or wait for bytes that never come; so the request
    /// may carry one `Content-Length` equal to its body's known length and no
    /// `Transfer-Encoding`. Numbers are named; no value is quoted.
    package var framingProblem: String? {
        var lengthFields = 0
        for field in headers.fields {
            switch field.name.utf8.count {
            case 17 where HTTPHeaders.namesEqual(field.name, "Transfer-Encoding"):
                return "Transfer-Encoding is set by the transport from the body (chunked when its length is unknown): "
                    + "remove it from the request"
            case 14 where HTTPHeaders.namesEqual(field.name, "Content-Length"):
                lengthFields += 1
                if lengthFields > 1 { return "the request has more than one Content-Length field" }
                let length: Int64?
                switch content {
                case .none: length = 0
                case .bytes(let data): length = Int64(data.count)
                case .stream(let stream): length = stream.length
                }
                guard let length else {
                    return "the request has a Content-Length but its body stream's length is unknown: "
                        + "give the stream its length instead"
                }
                let digits = field.value.trimmingCharacters(in: [" ", "\t"])
                guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 &- UInt8(ascii: "0") < 10 }), let stated = Int64(digits)
                else { return "the request's Content-Length is not a length in bytes" }
                if stated != length {
                    return "the request's Content-Length is \(stated) but its body has \(length) bytes: "
                        + "remove the field (the transport sets it) or make it match"
                }
            default: continue
            }
        }
        return nil
    }
}
