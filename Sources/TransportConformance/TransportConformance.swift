public import Conveyor

/// A conformance kit for ``Conveyor/HTTPTransport``: runs a transport, yours included, against
/// a loopback HTTP/1.1 server and reports, check by check, whether it behaves as the transport
/// contract says.
///
/// The kit starts its own server on 127.0.0.1 (two free ports, so that a redirect from one to
/// the other crosses origins) for every check and never contacts another address. It calls
/// ``Conveyor/HTTPTransport/send(_:)`` directly, and judges every error the way
/// ``Conveyor/NetworkClient`` does, through ``Conveyor/NetworkError/init(transportError:)``.
/// It returns outcomes instead of asserting, so it works with any test framework:
///
/// ```swift
/// @Test(arguments: TransportConformance.Check.allCases)
/// func myTransportConforms(_ check: TransportConformance.Check) async {
///     let outcome = await TransportConformance.run(check, on: MyTransport())
///     #expect(outcome.isConforming, "\(outcome)")
/// }
/// ```
///
/// A check your transport fails for a reason you cannot fix (a platform bug) can be marked as a
/// ``KnownIssue``: it then still runs, and is reported as conforming while the bug shows, and
/// as ``Outcome/Status/knownIssueFixed(_:)`` (not conforming) once it no longer does, so the mark
/// does not outlive the bug.
///
/// The contract each check enforces is in the `ConformanceKit` guide.
/// The checks add one name, `X-Conformance-Credential`, to ``Conveyor/SensitiveHeaders`` (to
/// prove that a name added at run time is stripped too); outcomes never print a credential.
/// Timing bounds are upper bounds for hang detection, never waits: a conforming transport
/// finishes each check as fast as it can.
public enum TransportConformance {
    /// One property of the transport contract.
    public enum Check: String, CaseIterable, Sendable, CustomStringConvertible {
        /// GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS and a custom token (`PURGE`) arrive as
        /// sent; HEAD returns no body.
        case methods
        /// Request bodies (empty, small, all 256 byte values, 8 MB) arrive intact, framed by the
        /// right `Content-Length` (or chunked), never by both `Content-Length` and
        /// `Transfer-Encoding` (RFC 9112 §6.2); a body without a `Content-Type` arrives without
        /// one (no form type made up); a request whose own `Content-Length` disagrees with its
        /// body is refused or framed by the body, never sent under the wrong length.
        case requestBodies
        /// A repeated request field arrives as two fields or as one joined with `", "`; a
        /// mixed-case name arrives; values are kept byte for byte.
        case requestHeaders
        /// A repeated response field is readable as both values (two fields or joined); lookup
        /// ignores case.
        case responseHeaders
        /// 200, 201, 204, 301 without `Location`, 400, 401, 404, 418, 500 and 503 come back as
        /// responses with their bodies, never as thrown errors.
        case statusCodes
        /// A 16 MB body (`Content-Length`) and a 1 MiB chunked body arrive intact.
        case largeResponse
        /// A 64 MiB body with `maxResponseSize` of 1 MiB fails with
        /// ``Conveyor/NetworkError/responseTooLarge(limit:)`` promptly, and the transfer stops:
        /// the server sees the connection closed.
        case responseSizeLimit
        /// A request with a 1 s timeout to a server that never answers fails with
        /// ``Conveyor/NetworkError/timedOut`` within the timeout plus ``Options/promptness``,
        /// and the connection is closed. Like ``stalledBody`` and ``headerTrickle``, it first
        /// gets one small response from the server, so that a transport that keeps connections
        /// waits on a kept one (on Linux, `URLSession` spins a core while a request waits on a
        /// connection it has just opened).
        case timeout
        /// A request whose task is cancelled once the server has it fails with
        /// ``Conveyor/NetworkError/cancelled`` within ``Options/promptness``, and the
        /// connection is closed within ``Options/promptness``.
        case cancellation
        /// A same-origin 302 keeps every header, credentials included.
        case sameOriginRedirect
        /// A cross-origin 302 and 307 drop every ``Conveyor/SensitiveHeaders`` name
        /// (`Authorization`, `Cookie`, `X-API-Key`, a name added at run time) and a `Host` the
        /// caller set, and keep the others; the other origin's `Set-Cookie` reaches neither the response nor, on a
        /// ``Conveyor/StreamingHTTPTransport``, the head of a download whose body breaks off.
        case crossOriginRedirect
        /// A 303 turns a POST into a GET without a body; 307 and 308 keep the method and body.
        case redirectMethods
        /// A chain of ``Options/maximumRedirects`` redirects succeeds; one more fails with
        /// ``Conveyor/NetworkError/tooManyRedirects``, from the transport and through a
        /// ``Conveyor/NetworkClient`` (`send`, and for a streaming transport `stream` and `download`),
        /// never as the last 3xx.
        case redirectLimit
        /// A connection closed after 100 of 1000 promised body bytes is an error, never a
        /// truncated success.
        case closeMidBody
        /// Bytes that are not HTTP fail with ``Conveyor/NetworkError/transportFailed(_:)`` or
        /// ``Conveyor/NetworkError/connectionFailed(_:)``, with no crash and no hang.
        case garbageResponse
        /// Response headers and then silence, with a 1 s timeout, fail with
        /// ``Conveyor/NetworkError/timedOut``, and the connection is closed.
        case stalledBody
        /// A port nothing listens on fails with ``Conveyor/NetworkError/connectionFailed(_:)``.
        case connectionRefused
        /// A server that reads the request and closes without a byte: a failure every time.
        case closeBeforeResponse
        /// `HTTP/1.1 200 OK` and then a normal close: a failure every time, never a crash
        /// (FoundationNetworking on Linux traps here: swift-corelibs-foundation#5285).
        case halfSentResponse
        /// The status line and half a header field, then a close: a failure every time.
        case closeMidHeaders
        /// Two `Content-Length` fields that disagree (RFC 9112 §6.3): a failure every time, from
        /// the transport or from the framing policy ``Conveyor/NetworkClient`` applies.
        case conflictingContentLength
        /// A chunked body whose chunk size is not hexadecimal: a failure every time.
        case badChunkSize
        /// A header value with a bare CR, and one with a NUL (RFC 9112 §2.2, RFC 9110 §5.5): a
        /// failure, or a value without the byte.
        case controlBytesInHeaders
        /// A header value that is valid UTF-8 beyond ASCII arrives byte for byte.
        case nonASCIIHeader
        /// 1 MiB of response header fields: a response or a transport error, with no hang.
        case hugeHeaderBlock
        /// A 304 to a request without a validator comes back as a 304 with no body (or a
        /// transport error), with no hang.
        case unsolicitedNotModified
        /// The response head one byte every 50 ms, with a 1 s timeout: ``Conveyor/NetworkError/timedOut``
        /// within the timeout plus ``Options/promptness``, and the connection closed.
        case headerTrickle
        /// A download (``Conveyor/NetworkClient/download(_:to:maxSize:)`` on this transport, with
        /// retries) breaks halfway; the server answers the resume's `Range` with a `206` of another
        /// version (a new `ETag`: it ignores `If-Range`). The file must be the new version whole, or
        /// absent with an error: never half of each.
        case resumeWithChangedValidator
        /// As ``resumeWithChangedValidator``, answered by a `206` whose `Content-Range` covers ten
        /// bytes of the rest: the file must be whole or absent, never truncated.
        case resumeWithPartialContent
        /// As ``resumeWithChangedValidator``, answered by a `200` with the whole body: the file must
        /// be that body once, not appended to the partial one.
        case resumeRangeIgnored
        /// A streamed body (``Conveyor/NetworkClient/stream(_:)``) left after its first chunk while the
        /// response is still held: the behaviors' ending hook runs with ``Conveyor/NetworkError/cancelled``
        /// and the server sees the connection closed, each within ``Options/promptness``. A transport
        /// that is not a ``Conveyor/StreamingHTTPTransport`` passes with a note: the client holds its
        /// bodies whole, so there is nothing to leave.
        case earlyStreamExit
        /// 64 MiB down to a file with a `maxResponseSize` of 1 MiB, and 64 MiB up from a one-shot
        /// stream and 1 MiB up from a file, arrive whole: the transport streams both ways. Each
        /// upload is framed by its `Content-Length` (chunked is noted), never by both
        /// `Content-Length` and `Transfer-Encoding`. Run in a child process
        /// (``runInChildProcess(_:executable:arguments:options:)``) on Linux, the process's peak
        /// resident memory may grow by at most 32 MiB for each. A transport that is not a
        /// ``Conveyor/StreamingHTTPTransport`` passes with a note.
        case streamedTransfers
        /// An event stream (``Conveyor/NetworkClient/events(_:options:)``) whose first connection
        /// splits CR from LF across writes and drops in the middle of an event, whose second sends
        /// one event and goes silent (the idle timeout must drop it), and whose third answers 204:
        /// the client must see each event once, in order, reconnect with `Last-Event-ID` 2 and then 3
        /// (a connection the idle timeout of 1 s ends early on a loaded machine may repeat an id, never
        /// skip ahead), and end with `afterSuccess`. A transport that is not a ``Conveyor/StreamingHTTPTransport``
        /// passes with a note: it delivers no byte before the body ends.
        case eventStreamReconnect
        /// An event stream left after its first event while the server stays silent: the ending
        /// hook runs with ``Conveyor/NetworkError/cancelled`` and the connection is closed, each
        /// within ``Options/promptness``. A transport that is not a
        /// ``Conveyor/StreamingHTTPTransport`` passes with a note.
        case eventStreamExit

        /// The check's name, for example `crossOriginRedirect`.
        public var description: String { rawValue }
    }

    /// How to run the checks.
    public struct Options: Sendable {
        /// How many redirects the transport under test is configured to follow (10 for
        /// ``Conveyor/URLSessionTransport``'s default).
        public var maximumRedirects: Int
        /// The upper bound for "ends promptly": after a cancellation, past a timeout, and for the
        /// server to see a connection closed. 5 s by default: generous, so a loaded machine does
        /// not fail a conforming transport; it bounds a hang, it is never waited for.
        public var promptness: Duration
        /// The upper bound for a call that should simply work (a download, a stream read to its
        /// end): past it the check fails as a hang. 60 s by default; raise it where the machine is
        /// loaded (a sanitizer, many tests in parallel on few cores), where a request that takes
        /// one second alone can take a minute.
        public var hangLimit: Duration
        /// Checks the transport under test is known to fail, with why.
        public var knownIssues: [Check: KnownIssue]
        /// Whether the check runs in a process of its own, where the process's memory is the
        /// check's: set by ``runChildProcess(on:arguments:)``.
        var measuresMemory = false

        /// Creates options.
        /// - Parameters:
        ///   - maximumRedirects: How many redirects the transport follows.
        ///   - promptness: The upper bound for "ends promptly".
        ///   - hangLimit: The upper bound for a call that should simply work.
        ///   - knownIssues: Checks the transport is known to fail.
        public init(
            maximumRedirects: Int = 10, promptness: Duration = .seconds(5), hangLimit: Duration = .seconds(60),
            knownIssues: [Check: KnownIssue] = [:]
        ) {
            self.maximumRedirects = max(0, maximumRedirects)
            self.promptness = promptness
            self.hangLimit = hangLimit
            self.knownIssues = knownIssues
        }
    }

    /// Why a transport is known to fail a check: a platform bug, or a limitation by design.
    ///
    /// ```swift
    /// let options = TransportConformance.Options(knownIssues: [
    ///     .cancellation: .init(reason: "a cancelled task keeps its connection", reference: "swift-corelibs-foundation#3296"),
    /// ])
    /// ```
    ///
    /// A bug that ends the process is marked with the text of its fatal error, and the check run
    /// with ``TransportConformance/runInChildProcess(_:executable:arguments:options:)``: the mark
    /// then matches that trap and nothing else.
    public struct KnownIssue: Sendable, Hashable, CustomStringConvertible {
        /// What goes wrong and why.
        public let reason: String
        /// Where it is tracked: an issue (`owner/repo#123`), a URL, or a documented limitation.
        public let reference: String
        /// For a bug that ends the process: text its fatal error prints, for example
        /// `Transfer completed, but there's no response.`. The check is then a known issue only
        /// when a child process running it ends with a signal and its standard error contains
        /// this text; any other failure fails the check. `nil` for a failure that is reported.
        public let trap: String?
        /// Text the check's failure message contains (for example `the transfer was not
        /// stopped`): the mark then excuses that failure and no other, so a different
        /// regression in the same check still fails it. `nil` excuses any failure of the check.
        public let failure: String?

        /// Creates a known issue.
        /// - Parameters:
        ///   - reason: What goes wrong and why.
        ///   - reference: Where it is tracked.
        ///   - failure: Text the failure message contains; the mark excuses only such a failure.
        ///   - trap: For a bug that ends the process, text its fatal error prints.
        public init(reason: String, reference: String, failure: String? = nil, trap: String? = nil) {
            self.reason = reason
            self.reference = reference
            self.failure = failure
            self.trap = trap
        }

        /// `reason (reference)`.
        public var description: String { "\(reason) (\(reference))" }
    }

    /// What one check found.
    public struct Outcome: Sendable, CustomStringConvertible {
        /// How a check ended.
        public enum Status: Sendable, Hashable {
            /// The transport behaved as the contract says.
            case passed
            /// It did not; the message says what was sent, what came back, and what should have.
            case failed(String)
            /// The check failed as a known issue says it would; `observed` is the failure.
            case knownIssue(KnownIssue, observed: String)
            /// The check is marked as a known issue but passed: remove the mark.
            case knownIssueFixed(KnownIssue)
            /// The check could not run here (no POSIX sockets, or the loopback server could not
            /// start); the message says why.
            case skipped(String)
        }

        /// The check.
        public let check: Check
        /// How it ended.
        public let status: Status
        /// What the kit saw where the contract allows more than one behavior (a repeated field
        /// as two fields or joined), or `nil`.
        public let detail: String?

        /// Whether the transport conforms: ``Status/passed`` or ``Status/knownIssue(_:observed:)``.
        public var isConforming: Bool {
            switch status {
            case .passed, .knownIssue: true
            case .failed, .knownIssueFixed, .skipped: false
            }
        }

        /// One line: the check, how it ended, and why. Never a credential.
        public var description: String {
            let text: String
            switch status {
            case .passed: text = "passed"
            case .failed(let message): text = "failed: \(message)"
            case .knownIssue(let issue, let observed):
                text = "known issue, \(issue): \(observed)"
            case .knownIssueFixed(let issue):
                text = "passed although marked as a known issue (\(issue)): remove the mark"
            case .skipped(let reason): text = "skipped: \(reason)"
            }
            return "\(check): \(text)" + (detail.map { " [\($0)]" } ?? "")
        }
    }

    /// Runs one check against a transport.
    ///
    /// ```swift
    /// let outcome = await TransportConformance.run(.crossOriginRedirect, on: URLSessionTransport())
    /// print(outcome)   // crossOriginRedirect: passed
    /// ```
    /// - Parameters:
    ///   - check: The check.
    ///   - transport: The transport under test, configured as your app uses it.
    ///   - options: Redirect limit, time bound and known issues.
    /// - Returns: What the check found; it never throws, traps or hangs past its bounds.
    public static func run(_ check: Check, on transport: some HTTPTransport, options: Options = .init()) async
        -> Outcome
    {
        let found = await ConformanceCheck.run(check, on: transport, options: options)
        return outcome(of: check, found, trapped: nil, options: options)
    }

    /// The outcome once the check's known issue, if any, is applied. `trapped` is the standard
    /// error of a child process that ended with a signal.
    static func outcome(of check: Check, _ found: ConformanceCheck.Found, trapped: String?, options: Options)
        -> Outcome
    {
        let issue = options.knownIssues[check]
        switch (found.status, issue) {
        case (.failed(let message), let issue?):
            if let expected = issue.failure, !message.contains(expected) {
                return Outcome(
                    check: check,
                    status: .failed(message + " (the known issue excuses a failure that says \"\(expected)\"; this is not it)"),
                    detail: found.detail)
            }
            guard let trap = issue.trap else {
                return Outcome(check: check, status: .knownIssue(issue, observed: message), detail: found.detail)
            }
            guard let trapped, trapped.contains(trap) else {
                return Outcome(
                    check: check,
                    status: .failed(message + " (the known issue is a trap that prints \"\(trap)\"; this is not it)"),
                    detail: found.detail)
            }
            return Outcome(check: check, status: .knownIssue(issue, observed: message), detail: found.detail)
        case (.passed, let issue?):
            return Outcome(check: check, status: .knownIssueFixed(issue), detail: found.detail)
        default:
            return Outcome(check: check, status: found.status, detail: found.detail)
        }
    }

    /// Runs every check, one after the other, in the order of `Check.allCases`.
    ///
    /// ```swift
    /// let failures = await TransportConformance.runAll(on: MyTransport()).filter { !$0.isConforming }
    /// ```
    /// - Parameters:
    ///   - transport: The transport under test.
    ///   - options: Redirect limit, time bound and known issues.
    /// - Returns: One outcome per check.
    public static func runAll(on transport: some HTTPTransport, options: Options = .init()) async -> [Outcome] {
        var outcomes: [Outcome] = []
        for check in Check.allCases { outcomes.append(await run(check, on: transport, options: options)) }
        return outcomes
    }
}
