public import Foundation

/// Everything that can go wrong with a request, in terms a caller can act on.
///
/// Every public `send` of Conveyor throws only this type, so a `switch` covers all cases:
///
/// ```swift
/// do {
///     let movies: [Movie] = try await client.get("/movies")
/// } catch .unauthorized {
///     showLogin()
/// } catch .offline, .timedOut {
///     showRetryBanner()
/// } catch {
///     showError(error)
/// }
/// ```
///
/// Descriptions never contain header values, query strings or bodies, so they are safe to log.
///
/// Errors compare with `==` (see ``==(_:_:)``), so tests can write `#expect(throws:
/// NetworkError.offline)` or `error == .cancelled`.
///
/// New cases may be added in a minor version. A `switch` that lists every case should end with
/// `@unknown default:`; a case added later then lands there, and the compiler warns instead of
/// failing the build.
public enum NetworkError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The request could not be built or may not be sent (a bad URL, a header with CR/LF/NUL,
    /// a body that failed to encode). Nothing was sent.
    case invalidRequest(String)
    /// A behavior's hook threw; `behavior` is its ``RequestBehavior/name``.
    case behaviorFailed(behavior: String, hook: RequestHook, underlying: any Error)
    /// The server answered 401 (and 401 is not an acceptable status).
    case unauthorized(HTTPResponse)
    /// The server answered 404 (and 404 is not an acceptable status).
    case notFound(HTTPResponse)
    /// The server answered another status outside the acceptable ones; the response (body
    /// included) is kept.
    case unacceptableStatus(HTTPResponse)
    /// The body could not be decoded into the requested output; the response (body included) is kept.
    case decodingFailed(HTTPResponse, underlying: any Error)
    /// The attempt took longer than the request's timeout.
    case timedOut
    /// The response body (after content decoding, such as gzip) was larger than the request's
    /// ``HTTPRequest/maxResponseSize``; the transfer was stopped when the limit was passed.
    case responseTooLarge(limit: Int)
    /// The device has no network connection.
    case offline
    /// The server could not be reached or the connection broke: DNS failure, connection refused,
    /// connection lost. Usually worth retrying.
    case connectionFailed(any Error)
    /// The request's task was cancelled.
    case cancelled
    /// The server redirected more times than the transport follows
    /// (``URLSessionTransport``'s `maximumRedirects`, URLSession's own limit otherwise). A server
    /// that answers a 3xx the client does not follow is ``unacceptableStatus(_:)`` instead.
    case tooManyRedirects
    /// The transport failed in another way (TLS, a malformed response…).
    case transportFailed(any Error)
    /// A file could not be read or written: an upload's source is missing or unreadable, or a
    /// download's destination is unwritable or its disk is full. `file` is the file's name
    /// (its last path component). Nothing is left at a download's destination.
    case fileFailed(file: String, underlying: any Error)
    /// An attempt failed with `after` and a behavior decided to retry it, but the request's body
    /// was a one-shot stream (``HTTPBodyStream/isReplayable`` is `false`) that the failed attempt
    /// had already read, or a streamed response whose first bytes had already reached the caller.
    /// The request was not sent again; `after` is the failure that ended it.
    indirect case notRetryable(after: NetworkError, reason: String)

    /// The response, for the cases that keep one.
    public var response: HTTPResponse? {
        switch self {
        case .unauthorized(let response), .notFound(let response), .unacceptableStatus(let response),
            .decodingFailed(let response, _):
            response
        case .notRetryable(let after, _): after.response
        default: nil
        }
    }

    /// The HTTP status, for the cases that keep a response.
    public var status: Int? { response?.status }

    /// A short English explanation with no secrets in it.
    public var description: String {
        switch self {
        case .invalidRequest(let reason): "Invalid request: \(reason)"
        case .behaviorFailed(let behavior, let hook, let underlying):
            "Behavior \(behavior) failed in \(hook): \(Self.describe(underlying))"
        case .unauthorized(let response): "Unauthorized: \(response)"
        case .notFound(let response): "Not found: \(response)"
        case .unacceptableStatus(let response): "Unacceptable status \(response)"
        case .decodingFailed(let response, let underlying):
            "Decoding failed for \(response): \(Self.describe(underlying))"
        case .timedOut: "The request timed out"
        case .responseTooLarge(let limit): "The response is larger than the limit of \(limit) bytes"
        case .offline: "The device is offline"
        case .connectionFailed(let underlying): "Connection failed: \(Self.describe(underlying))"
        case .cancelled: "The request was cancelled"
        case .tooManyRedirects: "The server redirected too many times"
        case .transportFailed(let underlying): "Transport failed: \(Self.describe(underlying))"
        case .fileFailed(let file, let underlying): "File '\(file)' failed: \(Self.describe(underlying))"
        case .notRetryable(let after, let reason): "\(after.description) (not retried: \(reason))"
        }
    }

    /// Same as ``description``.
    public var debugDescription: String { "NetworkError: \(description)" }

    /// Describes an underlying error without printing anything it may carry (URLs with query
    /// strings, header values): its type and, for Foundation errors, domain and code.
    /// A `DecodingError` keeps its kind and coding path only: its message can quote a value from
    /// the body.
    package static func describe(_ error: any Error) -> String {
        switch error {
        case let error as NetworkError: return error.description
        case let error as DecodingError: return describe(decoding: error)
        case is CancellationError: return "CancellationError"
        case let error as URLError: return "URLError(code: \(error.code.rawValue))"
        case let error as any SafelyDescribable: return error.description
        default:
            let ns = error as NSError
            return "\(type(of: error)) (\(ns.domain) \(ns.code))"
        }
    }

    private static func describe(decoding error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .typeMismatch(let type, let context):
            return "type mismatch for \(type) at '\(path(context))'"
        case .valueNotFound(let type, let context):
            return "missing \(type) value at '\(path(context))'"
        case .keyNotFound(let key, let context):
            return "missing key '\(key.stringValue)' at '\(path(context))'"
        case .dataCorrupted(let context):
            return "data corrupted at '\(path(context))'"
        @unknown default:
            return "DecodingError"
        }
    }
}

/// An error whose `description` is known to hold no secrets, so ``NetworkError`` may print it.
///
/// Conveyor's own errors conform; conform yours when their descriptions are safe to log.
public protocol SafelyDescribable: CustomStringConvertible {}

extension NetworkError {
    /// Maps any error thrown while sending to a `NetworkError`: `NetworkError` stays as it is,
    /// cancellation becomes ``cancelled``, `URLError`s become ``timedOut``, ``offline``,
    /// ``connectionFailed(_:)`` or ``cancelled`` by code, anything else ``transportFailed(_:)``.
    /// - Parameter error: The error a transport threw.
    public init(transportError error: any Error) {
        switch error {
        case let error as NetworkError: self = error
        case is CancellationError: self = .cancelled
        case let error as URLError:
            switch error.code {
            case .cancelled: self = .cancelled
            case .timedOut: self = .timedOut
            case .httpTooManyRedirects: self = .tooManyRedirects
            case .notConnectedToInternet, .dataNotAllowed, .internationalRoamingOff, .callIsActive:
                self = .offline
            case .cannotFindHost, .cannotConnectToHost, .networkConnectionLost, .dnsLookupFailed,
                .resourceUnavailable:
                self = .connectionFailed(error)
            default: self = .transportFailed(error)
            }
        default: self = .transportFailed(error)
        }
    }

    /// Whether this is ``cancelled``.
    public var isCancellation: Bool {
        if case .cancelled = self { return true }
        return false
    }

    /// The case's name without its payload, `"timedOut"` or `"notFound"`: a short, stable label
    /// with few values and no secret, for a metrics dimension or a span's `error.type`.
    public var caseName: String {
        switch self {
        case .invalidRequest: "invalidRequest"
        case .behaviorFailed: "behaviorFailed"
        case .unauthorized: "unauthorized"
        case .notFound: "notFound"
        case .unacceptableStatus: "unacceptableStatus"
        case .decodingFailed: "decodingFailed"
        case .timedOut: "timedOut"
        case .responseTooLarge: "responseTooLarge"
        case .offline: "offline"
        case .connectionFailed: "connectionFailed"
        case .cancelled: "cancelled"
        case .tooManyRedirects: "tooManyRedirects"
        case .transportFailed: "transportFailed"
        case .fileFailed: "fileFailed"
        case .notRetryable: "notRetryable"
        }
    }
}

extension NetworkError: Equatable {
    /// Whether two errors are the same failure, for tests and `if error == .offline`.
    ///
    /// - Cases with a response (``unauthorized(_:)``, ``notFound(_:)``,
    ///   ``unacceptableStatus(_:)``, ``decodingFailed(_:underlying:)``) compare by status, not by
    ///   headers or body.
    /// - Underlying errors (`any Error`) are equal when they have the same type and, if that type
    ///   is `Equatable` (`URLError`, your own), are `==`.
    /// - Every other payload (a reason, a behavior name and hook, a limit) compares by value.
    public static func == (lhs: NetworkError, rhs: NetworkError) -> Bool {
        switch (lhs, rhs) {
        case (.invalidRequest(let a), .invalidRequest(let b)): a == b
        case (.behaviorFailed(let a, let hookA, let errorA), .behaviorFailed(let b, let hookB, let errorB)):
            a == b && hookA == hookB && sameError(errorA, errorB)
        case (.unauthorized(let a), .unauthorized(let b)), (.notFound(let a), .notFound(let b)),
            (.unacceptableStatus(let a), .unacceptableStatus(let b)):
            a.status == b.status
        case (.decodingFailed(let a, let errorA), .decodingFailed(let b, let errorB)):
            a.status == b.status && sameError(errorA, errorB)
        case (.timedOut, .timedOut), (.offline, .offline), (.cancelled, .cancelled),
            (.tooManyRedirects, .tooManyRedirects):
            true
        case (.responseTooLarge(let a), .responseTooLarge(let b)): a == b
        case (.fileFailed(let a, let errorA), .fileFailed(let b, let errorB)): a == b && sameError(errorA, errorB)
        case (.notRetryable(let a, let reasonA), .notRetryable(let b, let reasonB)): a == b && reasonA == reasonB
        case (.connectionFailed(let a), .connectionFailed(let b)), (.transportFailed(let a), .transportFailed(let b)):
            sameError(a, b)
        default: false
        }
    }
}

/// Same type and, for `Equatable` types, `==`.
private func sameError(_ a: any Error, _ b: any Error) -> Bool {
    guard type(of: a) == type(of: b) else { return false }
    if let a = (a as Any) as? any Equatable { return a.isEqual(to: b) }
    return true
}

extension Equatable {
    /// `self == other` when `other` is a `Self`.
    fileprivate func isEqual(to other: Any) -> Bool { (other as? Self) == self }
}

extension NetworkError: CustomReflectable, LocalizedError {
    /// A mirror of the safe ``description`` only, so `dump(error)` never walks into an
    /// underlying error that may carry a URL, a token or a body.
    public var customMirror: Mirror {
        Mirror(self, children: ["description": description], displayStyle: .enum)
    }

    /// The same text as ``description``, for `localizedDescription`.
    public var errorDescription: String? { description }
}
