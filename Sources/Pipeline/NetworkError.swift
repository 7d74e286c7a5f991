public import Foundation

/// Everything that can go wrong with a request, in terms a caller can act on.
///
/// Every public `send` of Conveyor throws only this type. An error is a *kind* (``timedOut``,
/// ``unacceptableStatus``, ``connectionFailed``…) and what that kind keeps (the response, the
/// underlying error, a reason). Each kind is a static member, so `catch`, `switch` and `if case`
/// read the way they would with an enum:
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
/// A kind added in a later version is one more static member: code written today still
/// compiles, because a `switch` over a `NetworkError` always ends with `default:`.
///
/// - A static member used as a pattern matches every error of its kind whatever it keeps:
///   `case .unacceptableStatus` matches every status, `case .decodingFailed` every decoding
///   failure. ``unauthorized``, ``forbidden``, ``notFound`` and ``tooManyRequests`` match an
///   ``unacceptableStatus`` with that status; ``status(_:)`` any other one.
/// - What an error keeps is read from its properties: ``response``, ``status``, ``underlying``,
///   ``reason``, ``behavior``, ``hook``, ``limit``, ``file``, ``after``.
/// - `==` (see ``==(_:_:)``) compares what a test means, so `#expect(throws: NetworkError.offline)`
///   and `error == .cancelled` work.
///
/// Descriptions never contain header values, query strings or bodies, so they are safe to log.
public struct NetworkError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind's name, `"timedOut"` or `"unacceptableStatus"`: a short, stable label with few
    /// values and no secret, for a metrics dimension or a log field.
    public let name: String
    /// The response, for the kinds that keep one (``unacceptableStatus``, ``decodingFailed``,
    /// and ``notRetryable`` when its ``after`` has one).
    public var response: HTTPResponse? { storage.response ?? storage.after?.response }
    /// The error that caused this one: a transport's, a decoder's, a behavior's, a file system's.
    public var underlying: (any Error)? { storage.underlying }
    /// Why the request was invalid (``invalidRequest``) or not retried (``notRetryable``).
    public var reason: String? { storage.reason }
    /// The ``RequestBehavior/name`` of the behavior whose hook threw (``behaviorFailed``).
    public var behavior: String? { storage.behavior }
    /// The hook that threw (``behaviorFailed``).
    public var hook: RequestHook? { storage.hook }
    /// The size limit that was passed (``responseTooLarge``), in bytes.
    public var limit: Int? { storage.limit }
    /// The last path component of the file that failed (``fileFailed``).
    public var file: String? { storage.file }
    /// The failure after which a retry was refused (``notRetryable``).
    public var after: NetworkError? { storage.after }
    /// How long until the refusing mechanism lets requests through again (``circuitOpen``, ``rateLimited``).
    public var retryAfter: Duration? { storage.retryAfter }

    /// The HTTP status, for the kinds that keep a response.
    public var status: Int? { storage.status ?? storage.after?.status }
    /// The response as far as it arrived: the head (status and headers, no body) when the
    /// attempt failed after it, as when a streamed body, a download or an event stream broke off
    /// or was cancelled; otherwise ``response`` (for ``notRetryable``, its ``after``'s). Behaviors
    /// read it for what a head carries whatever happened to the body (`Set-Cookie`, the status a
    /// metric reports). It takes no part in `==`, and ``status`` stays the status of the kinds
    /// that keep a response.
    public var responseHead: HTTPResponse? { storage.head ?? storage.response ?? storage.after?.responseHead }

    /// What a kind keeps; one reference, so an error is one word wide however much it keeps.
    private let storage: Storage

    private final class Storage: Sendable {
        let response: HTTPResponse?
        /// A pattern's status (``status(_:)``) when it has no response.
        let patternStatus: Int?
        let underlying: (any Error)?
        let reason: String?
        let behavior: String?
        let hook: RequestHook?
        let limit: Int?
        let file: String?
        let after: NetworkError?
        /// The head of a response whose body failed (``responseHead``).
        let head: HTTPResponse?
        let retryAfter: Duration?

        init(
            response: HTTPResponse? = nil, patternStatus: Int? = nil, underlying: (any Error)? = nil,
            reason: String? = nil, behavior: String? = nil, hook: RequestHook? = nil, limit: Int? = nil,
            file: String? = nil, after: NetworkError? = nil, head: HTTPResponse? = nil, retryAfter: Duration? = nil
        ) {
            self.retryAfter = retryAfter
            self.response = response
            self.patternStatus = patternStatus
            self.underlying = underlying
            self.reason = reason
            self.behavior = behavior
            self.hook = hook
            self.limit = limit
            self.file = file
            self.after = after
            self.head = head
        }

        var status: Int? { response?.status ?? patternStatus }

        static let empty = Storage()
    }

    private init(_ name: String, _ storage: Storage = .empty) {
        self.name = name
        self.storage = storage
    }

    /// This error, keeping the head of the response whose body failed (``responseHead``).
    package func afterHead(_ head: HTTPResponse) -> NetworkError {
        let s = storage
        var bare = head
        bare.body = Data()
        return NetworkError(
            name,
            Storage(
                response: s.response, patternStatus: s.patternStatus, underlying: s.underlying, reason: s.reason,
                behavior: s.behavior, hook: s.hook, limit: s.limit, file: s.file, after: s.after, head: bare,
                retryAfter: s.retryAfter))
    }

    // MARK: Kinds

    /// The request could not be built or may not be sent (a bad URL, a header with CR/LF/NUL,
    /// a body that failed to encode). Nothing was sent.
    public static let invalidRequest = NetworkError("invalidRequest")
    /// An ``invalidRequest`` error.
    /// - Parameter reason: What is wrong with the request, with no secret in it.
    public static func invalidRequest(_ reason: String) -> NetworkError {
        NetworkError("invalidRequest", Storage(reason: reason))
    }

    /// A behavior's hook threw.
    public static let behaviorFailed = NetworkError("behaviorFailed")
    /// A ``behaviorFailed`` error.
    /// - Parameters:
    ///   - behavior: The behavior's ``RequestBehavior/name``.
    ///   - hook: The hook that threw.
    ///   - underlying: What it threw.
    public static func behaviorFailed(behavior: String, hook: RequestHook, underlying: any Error) -> NetworkError {
        NetworkError("behaviorFailed", Storage(underlying: underlying, behavior: behavior, hook: hook))
    }

    /// The server answered a status outside the acceptable ones; the ``response`` (body
    /// included) is kept.
    public static let unacceptableStatus = NetworkError("unacceptableStatus")
    /// An ``unacceptableStatus`` error.
    /// - Parameter response: The response, body included.
    public static func unacceptableStatus(_ response: HTTPResponse) -> NetworkError {
        NetworkError("unacceptableStatus", Storage(response: response))
    }
    /// A pattern that matches an ``unacceptableStatus`` error with this status, and an error to
    /// compare with one: `catch NetworkError.status(409)`.
    /// - Parameter status: The HTTP status.
    public static func status(_ status: Int) -> NetworkError {
        NetworkError("unacceptableStatus", Storage(patternStatus: status))
    }
    /// An ``unacceptableStatus`` of 401 (when 401 is not an acceptable status).
    public static let unauthorized = status(401)
    /// An ``unacceptableStatus`` of 403.
    public static let forbidden = status(403)
    /// An ``unacceptableStatus`` of 404.
    public static let notFound = status(404)
    /// An ``unacceptableStatus`` of 429.
    public static let tooManyRequests = status(429)

    /// The body could not be decoded into the requested output; the ``response`` (body
    /// included) and the decoder's error are kept.
    public static let decodingFailed = NetworkError("decodingFailed")
    /// A ``decodingFailed`` error.
    /// - Parameters:
    ///   - response: The response, body included.
    ///   - underlying: The decoder's error.
    public static func decodingFailed(_ response: HTTPResponse, underlying: any Error) -> NetworkError {
        NetworkError("decodingFailed", Storage(response: response, underlying: underlying))
    }

    /// The attempt took longer than the request's timeout.
    public static let timedOut = NetworkError("timedOut")

    /// The response body (after content decoding, such as gzip) was larger than the request's
    /// ``HTTPRequest/maxResponseSize``; the transfer was stopped when the limit was passed.
    public static let responseTooLarge = NetworkError("responseTooLarge")
    /// A ``responseTooLarge`` error.
    /// - Parameter limit: The limit that was passed, in bytes.
    public static func responseTooLarge(limit: Int) -> NetworkError {
        NetworkError("responseTooLarge", Storage(limit: limit))
    }

    /// The device has no network connection.
    public static let offline = NetworkError("offline")

    /// The server could not be reached or the connection broke: DNS failure, connection refused,
    /// connection lost. Usually worth retrying.
    public static let connectionFailed = NetworkError("connectionFailed")
    /// A ``connectionFailed`` error.
    /// - Parameter underlying: The transport's error.
    public static func connectionFailed(_ underlying: any Error) -> NetworkError {
        NetworkError("connectionFailed", Storage(underlying: underlying))
    }

    /// The request's task was cancelled.
    public static let cancelled = NetworkError("cancelled")

    /// The server redirected more times than the transport follows
    /// (``URLSessionTransport``'s `maximumRedirects`, URLSession's own limit otherwise). A server
    /// that answers a 3xx the client does not follow is ``unacceptableStatus`` instead.
    public static let tooManyRedirects = NetworkError("tooManyRedirects")

    /// The transport failed in another way (TLS, a malformed response…).
    public static let transportFailed = NetworkError("transportFailed")
    /// A ``transportFailed`` error.
    /// - Parameter underlying: The transport's error.
    public static func transportFailed(_ underlying: any Error) -> NetworkError {
        NetworkError("transportFailed", Storage(underlying: underlying))
    }

    /// A file could not be read or written: an upload's source is missing or unreadable, or a
    /// download's destination is unwritable or its disk is full. Nothing is left at a
    /// download's destination.
    public static let fileFailed = NetworkError("fileFailed")
    /// A ``fileFailed`` error.
    /// - Parameters:
    ///   - file: The file's name (its last path component).
    ///   - underlying: The file system's error.
    public static func fileFailed(file: String, underlying: any Error) -> NetworkError {
        NetworkError("fileFailed", Storage(underlying: underlying, file: file))
    }

    /// An attempt failed and a behavior decided to retry it, but the request's body was a
    /// one-shot stream (``HTTPBodyStream/isReplayable`` is `false`) that the failed attempt had
    /// already read, or a streamed response whose first bytes had already reached the caller.
    /// The request was not sent again; ``after`` is the failure that ended it.
    public static let notRetryable = NetworkError("notRetryable")
    /// A ``notRetryable`` error.
    /// - Parameters:
    ///   - after: The failure that ended the request.
    ///   - reason: Why it was not retried.
    public static func notRetryable(after: NetworkError, reason: String) -> NetworkError {
        NetworkError("notRetryable", Storage(reason: reason, after: after))
    }

    /// A circuit breaker (``CircuitBreakerBehavior``) has stopped requests to the origin after
    /// too many of them failed: the request failed at once, without being sent. ``retryAfter``
    /// says when the circuit next lets a request through; ``reason`` names the origin.
    public static let circuitOpen = NetworkError("circuitOpen")
    /// A ``circuitOpen`` error.
    /// - Parameters:
    ///   - origin: The origin whose circuit is open, as `scheme://host:port`.
    ///   - retryAfter: How long until the circuit lets a request through (zero while it is
    ///     probing, or held open by an operator).
    public static func circuitOpen(origin: String, retryAfter: Duration) -> NetworkError {
        NetworkError("circuitOpen", Storage(reason: origin, retryAfter: retryAfter))
    }

    /// A limiter held the request back and could not let it through in the time it may wait
    /// (its `maxWait`, or the attempt's timeout): a ``RateLimitBehavior`` whose quota is spent,
    /// or a ``ConcurrencyLimitBehavior`` whose queue is full or whose places did not free in
    /// time. The request failed at once, without being sent, so that the origin is not sent more
    /// than it takes. ``retryAfter`` says when the limiter next lets a request through (zero when
    /// it depends on answers still to come); ``reason`` names the origin.
    public static let rateLimited = NetworkError("rateLimited")
    /// A ``rateLimited`` error.
    /// - Parameters:
    ///   - origin: The origin whose quota is spent, as `scheme://host:port`.
    ///   - retryAfter: How long until the limiter lets a request to it through.
    public static func rateLimited(origin: String, retryAfter: Duration) -> NetworkError {
        NetworkError("rateLimited", Storage(reason: origin, retryAfter: retryAfter))
    }

    // MARK: Text

    /// A short English explanation with no secrets in it.
    public var description: String {
        switch name {
        case "invalidRequest": "Invalid request: \(reason ?? "")"
        case "behaviorFailed":
            "Behavior \(behavior ?? "?") failed in \(hook.map { "\($0)" } ?? "?"): \(Self.describe(underlying))"
        case "unacceptableStatus":
            if let response = storage.response {
                switch response.status {
                case 401: "Unauthorized: \(response)"
                case 404: "Not found: \(response)"
                default: "Unacceptable status \(response)"
                }
            } else {
                "Unacceptable status \(status.map(String.init) ?? "")"
            }
        case "decodingFailed":
            "Decoding failed for \(storage.response.map { "\($0)" } ?? "a response"): \(Self.describe(underlying))"
        case "timedOut": "The request timed out"
        case "responseTooLarge": "The response is larger than the limit of \(limit ?? 0) bytes"
        case "offline": "The device is offline"
        case "connectionFailed": "Connection failed: \(Self.describe(underlying))"
        case "cancelled": "The request was cancelled"
        case "tooManyRedirects": "The server redirected too many times"
        case "transportFailed": "Transport failed: \(Self.describe(underlying))"
        case "fileFailed": "File '\(file ?? "")' failed: \(Self.describe(underlying))"
        case "notRetryable": "\(after?.description ?? "") (not retried: \(reason ?? ""))"
        case "circuitOpen":
            "The circuit for \(reason ?? "the origin") is open: not sent (next try in \(Self.seconds(retryAfter)))"
        case "rateLimited":
            "The rate limit for \(reason ?? "the origin") is reached: not sent (next send in \(Self.seconds(retryAfter)))"
        default: name
        }
    }

    /// Same as ``description``.
    public var debugDescription: String { "NetworkError: \(description)" }

    /// `4.25 s`: a wait with at most two decimals.
    private static func seconds(_ duration: Duration?) -> String {
        let value = duration.map { Double($0.components.seconds) + Double($0.components.attoseconds) * 1e-18 } ?? 0
        return "\((max(0, min(value, 1e12)) * 100).rounded() / 100) s"
    }

    private static func describe(_ error: (any Error)?) -> String {
        error.map { describe($0) } ?? "no underlying error"
    }

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

    fileprivate static func path(_ context: DecodingError.Context) -> String {
        context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }
}

/// An error whose `description` is known to hold no secrets, so ``NetworkError`` may print it.
///
/// Conveyor's own errors conform; conform yours when their descriptions are safe to log.
public protocol SafelyDescribable: CustomStringConvertible {}

extension NetworkError {
    /// Maps any error thrown while sending to a `NetworkError`: `NetworkError` stays as it is,
    /// cancellation becomes ``cancelled``, `URLError`s become ``timedOut``, ``offline``,
    /// ``connectionFailed``, ``tooManyRedirects`` or ``cancelled`` by code, anything else
    /// ``transportFailed``.
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
    public var isCancellation: Bool { name == "cancelled" }
}

extension NetworkError: Equatable {
    /// Whether two errors are the same failure, for tests and `if error == .offline`.
    ///
    /// - Errors of different kinds (``name``) differ.
    /// - A response compares by status, not by headers or body.
    /// - Underlying errors are equal when they have the same type and, if that type is
    ///   `Equatable` (`URLError`, your own), are `==`; `DecodingError`s when they are the same
    ///   case at the same coding path; other errors when their domain and code are equal.
    /// - Every other payload (a reason, a behavior name and hook, a limit, a file, the failure
    ///   after which a retry was refused) compares by value.
    ///
    /// A kind's static member keeps nothing, so `error == .unacceptableStatus` is `false` for an
    /// error that keeps a response: to ask for the kind, match it (`if case .unacceptableStatus =
    /// error`) or compare ``name``.
    public static func == (lhs: NetworkError, rhs: NetworkError) -> Bool {
        lhs.name == rhs.name && lhs.status == rhs.status && lhs.reason == rhs.reason
            && lhs.behavior == rhs.behavior && lhs.hook == rhs.hook && lhs.limit == rhs.limit
            && lhs.file == rhs.file && lhs.storage.after == rhs.storage.after
            && sameError(lhs.underlying, rhs.underlying)
    }

    /// Whether `error` is of the pattern's kind and keeps what the pattern keeps: `case
    /// .timedOut`, `catch .unacceptableStatus` (any status), `catch .unauthorized` (status 401),
    /// `case .connectionFailed(URLError(.cannotFindHost))`. What the pattern leaves out is not
    /// compared.
    /// - Parameters:
    ///   - pattern: A kind's static member, or an error made by one of its functions.
    ///   - error: The error to match.
    public static func ~= (pattern: NetworkError, error: NetworkError) -> Bool {
        let p = pattern.storage
        return pattern.name == error.name
            && (p.status == nil || p.status == error.status)
            && (p.reason == nil || p.reason == error.reason)
            && (p.behavior == nil || p.behavior == error.behavior)
            && (p.hook == nil || p.hook == error.hook)
            && (p.limit == nil || p.limit == error.limit)
            && (p.file == nil || p.file == error.file)
            && (p.after == nil || p.after.map { $0 ~= error.after ?? .init("none") } == true)
            && (p.underlying == nil || sameError(p.underlying, error.underlying))
    }
    /// The same match for an optional error (what `#expect(throws:)` returns): `nil` matches
    /// nothing.
    /// - Parameters:
    ///   - pattern: A kind's static member, or an error made by one of its functions.
    ///   - error: The error to match, if any.
    public static func ~= (pattern: NetworkError, error: NetworkError?) -> Bool {
        error.map { pattern ~= $0 } ?? false
    }

    /// The same match for an error of any type (in a `catch` of a function that throws more
    /// than `NetworkError`): an error of another type matches nothing.
    /// - Parameters:
    ///   - pattern: A kind's static member, or an error made by one of its functions.
    ///   - error: The error to match.
    public static func ~= (pattern: NetworkError, error: any Error) -> Bool {
        (error as? NetworkError).map { pattern ~= $0 } ?? false
    }
}

/// Same type and, for `Equatable` types, `==`; `DecodingError`s by case and coding path; other
/// errors by domain and code.
private func sameError(_ a: (any Error)?, _ b: (any Error)?) -> Bool {
    guard let a, let b else { return a == nil && b == nil }
    guard type(of: a) == type(of: b) else { return false }
    if let a = (a as Any) as? any Equatable { return a.isEqual(to: b) }
    if let a = a as? DecodingError, let b = b as? DecodingError { return sameDecodingError(a, b) }
    let (x, y) = (a as NSError, b as NSError)
    return x.domain == y.domain && x.code == y.code
}

private func sameDecodingError(_ a: DecodingError, _ b: DecodingError) -> Bool {
    switch (a, b) {
    case (.typeMismatch(let x, let c), .typeMismatch(let y, let d)),
        (.valueNotFound(let x, let c), .valueNotFound(let y, let d)):
        return x == y && NetworkError.path(c) == NetworkError.path(d)
    case (.keyNotFound(let x, let c), .keyNotFound(let y, let d)):
        return x.stringValue == y.stringValue && NetworkError.path(c) == NetworkError.path(d)
    case (.dataCorrupted(let c), .dataCorrupted(let d)):
        return NetworkError.path(c) == NetworkError.path(d)
    default:
        return false
    }
}

extension Equatable {
    /// `self == other` when `other` is a `Self`.
    fileprivate func isEqual(to other: Any) -> Bool { (other as? Self) == self }
}

extension NetworkError: CustomReflectable, LocalizedError {
    /// A mirror of the safe ``description`` only, so `dump(error)` never walks into an
    /// underlying error that may carry a URL, a token or a body.
    public var customMirror: Mirror {
        Mirror(self, children: ["description": description], displayStyle: .struct)
    }

    /// The same text as ``description``, for `localizedDescription`.
    public var errorDescription: String? { description }
}
