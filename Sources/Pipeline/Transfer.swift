public import Foundation

/// How far one attempt's upload or download has come.
///
/// Reported per attempt: a retried request starts again from zero (a resumed download starts
/// from the bytes already on disk), and ``attempt`` says which attempt it is.
public struct TransferProgress: Sendable, Hashable, CustomStringConvertible {
    /// Which way the bytes go.
    public enum Direction: Sendable, Hashable {
        /// The request body, to the server.
        case upload
        /// The response body, from the server.
        case download
    }

    /// Which way the bytes go.
    public var direction: Direction
    /// Bytes sent or received so far in this attempt (for a resumed download, including the
    /// bytes already on disk).
    public var completedBytes: Int64
    /// The total expected, when known (`Content-Length`, a file's size).
    public var expectedBytes: Int64?
    /// The attempt these bytes belong to, from 1.
    public var attempt: Int

    /// Creates a progress value.
    /// - Parameters:
    ///   - direction: Upload or download.
    ///   - completedBytes: Bytes so far.
    ///   - expectedBytes: The total, when known.
    ///   - attempt: The attempt, from 1.
    public init(direction: Direction, completedBytes: Int64, expectedBytes: Int64?, attempt: Int) {
        self.direction = direction
        self.completedBytes = completedBytes
        self.expectedBytes = expectedBytes
        self.attempt = attempt
    }

    /// `completedBytes / expectedBytes` in `0...1`, or `nil` when the total is unknown.
    public var fractionCompleted: Double? {
        guard let expectedBytes else { return nil }
        guard expectedBytes > 0 else { return 1 }
        return min(1, max(0, Double(completedBytes) / Double(expectedBytes)))
    }

    /// `download 512/1024 bytes (attempt 1)`.
    public var description: String {
        "\(direction == .upload ? "upload" : "download") \(completedBytes)/\(expectedBytes.map(String.init) ?? "?") bytes (attempt \(attempt))"
    }
}

/// A behavior that is told how uploads and downloads progress: a progress bar's model, a
/// progress log. Conform a behavior to it; the client calls
/// ``transferProgressed(_:context:)`` for every request this behavior takes part in.
///
/// ```swift
/// struct ProgressLog: TransferProgressObserving {
///     func transferProgressed(_ progress: TransferProgress, context: RequestContext) {
///         if progress.fractionCompleted == 1 { print("done:", progress) }
///     }
/// }
/// ```
public protocol TransferProgressObserving: _RequestHookDeclaring {
    /// Called as bytes move, on the transport's thread: keep it short and never block.
    /// - Parameters:
    ///   - progress: The attempt's progress so far.
    ///   - context: The request's context.
    func transferProgressed(_ progress: TransferProgress, context: RequestContext)
}

extension TransferProgressObserving {
    /// This protocol's bit.
    @inlinable public static var _transferProgressObservingBit: UInt16 { 256 }

    /// Calls ``transferProgressed(_:context:)``.
    @inlinable
    public func _transferProgressed(_ progress: TransferProgress, context: RequestContext) {
        transferProgressed(progress, context: context)
    }
}

/// What receives a streamed response body: a file being downloaded, a caller's stream.
package protocol ResponseBodyTaker: Sendable {
    /// The response head arrived. Returns whether the body is handed to ``receive(_:)``; when
    /// `false` the transport collects it into the response as usual (an error's body).
    func takesBody(of head: HTTPResponse, attempt: Int) throws(NetworkError) -> Bool
    /// The next bytes of a body this taker took. Suspends while the taker cannot keep up.
    func receive(_ chunk: Data) async throws(NetworkError)
    /// Why a failed attempt of `request` may not be sent again, or `nil` when it may.
    func retryForbiddenReason(for request: HTTPRequest, context: RequestContext) -> String?
    /// Where a taken body's progress starts (bytes already on disk for a resumed download).
    var resumedBytes: Int64 { get }
    /// Whether the attempts are timed by ``idleTimeout`` instead of the request's timeout (an
    /// event stream, which may last for hours while bytes keep coming).
    var timesOutWhenIdle: Bool { get }
    /// How long an attempt may go without a byte before it times out, when
    /// ``timesOutWhenIdle``. `nil` for no limit.
    var idleTimeout: Duration? { get }
    /// The current attempt's idle deadline (made when ``timesOutWhenIdle`` and an
    /// ``idleTimeout`` is set): the taker holds it while no one waits for the next bytes.
    func watchIdle(_ activity: (any IdleActivity)?)
    /// The transport returned: the body of this attempt ended. Throws to make that a failure
    /// (an event stream the server ended must reconnect).
    func bodyEnded() throws(NetworkError)
    /// What follows a failed attempt, decided by the taker before the behaviors' retry
    /// decisions: `nil` to let them decide, as for any request.
    func decision(after failure: NetworkError) async -> TakerDecision?
    /// Whether the bytes may wait to be handed on in batches while they arrive back to back (a
    /// file being downloaded: no one reads them as they come), instead of each as soon as it
    /// arrives (a caller's stream, an event stream).
    var takesBytesInBatches: Bool { get }
}

extension ResponseBodyTaker {
    package var timesOutWhenIdle: Bool { false }
    package var idleTimeout: Duration? { nil }
    package func watchIdle(_ activity: (any IdleActivity)?) {}
    package func bodyEnded() throws(NetworkError) {}
    package func decision(after failure: NetworkError) async -> TakerDecision? { nil }
    package var takesBytesInBatches: Bool { false }
}

/// What a ``ResponseBodyTaker`` decides after a failed attempt.
package enum TakerDecision: Sendable {
    /// Send the request again after the delay, as a new run of attempts: the behaviors' retry
    /// decisions are not asked, and the engine's attempt cap starts again. `progressed`: the
    /// connection that ended delivered what the caller asked for (an event stream's events), so
    /// the retry budget counts the reconnect without judging it.
    case reconnect(after: Duration, progressed: Bool = false)
    /// End the request with this error.
    case end(NetworkError)
    /// End the request as a success with this response (its body is empty): the taker got all
    /// it wanted and stopped the transfer itself.
    case finish(HTTPResponse)
}

/// One request's streaming and progress: where its response body goes as it arrives, and who
/// is told how the transfer progresses. The engine hands it to a ``StreamingHTTPTransport``'s
/// ``StreamingHTTPTransport/send(_:transfer:)``; it is not part of the request.
///
/// Only streaming transports call it:
///
/// ```swift
/// // In a transport's send(_:transfer:), for one attempt:
/// let taken = try transfer?.takesBody(of: head) ?? false
/// for try await chunk in body {
///     if taken { try await transfer?.receive(chunk) } else { collected.append(chunk) }
/// }
/// ```
///
/// - When ``takesBody(of:)`` returns `true`, hand every chunk to ``receive(_:)`` in order, and
///   return a response with an empty body when the body has ended. ``receive(_:)`` suspends
///   while the receiver cannot keep up: stop reading from the network meanwhile, so memory stays
///   bounded. The request's ``HTTPRequest/maxResponseSize`` applies only to bodies the transport
///   collects itself.
/// - Report upload progress with ``sent(_:of:)`` and, for a body the transport collects, download
///   progress with ``received(_:of:)``.
public final class TransferHandler: Sendable {
    let taker: (any ResponseBodyTaker)?
    private let observers: [@Sendable (TransferProgress, RequestContext?) -> Void]
    /// The context of the request this transfer belongs to, which holds it: weak, so the two do
    /// not keep each other alive.
    private let attached = Locked(Attached())
    /// The taken body's bytes so far in this attempt, and its expected total.
    private let download = Locked<(bytes: Int64, expected: Int64?, taking: Bool)>((0, nil, false))

    private struct Attached: Sendable {
        weak var context: RequestContext?
    }

    /// Whether the engine times this transfer's attempts by ``idleTimeout`` alone (an event
    /// stream): the request's `timeout` is then not the attempt's, and a transport applies
    /// neither it nor a default of its own (FoundationNetworking's 60 s, AsyncHTTPClient's
    /// `defaultTimeout`). The engine enforces the idle timeout on its clock for every transport.
    public let timesOutWhenIdle: Bool
    /// How long an attempt may go without a byte, when ``timesOutWhenIdle``; `nil` for no limit.
    public let idleTimeout: Duration?
    /// Whether a transport may hand the taken body on in batches while its bytes arrive back to
    /// back (a download to a file), instead of waking its receiver for every chunk.
    package let takesBytesInBatches: Bool
    /// The head of the current attempt's response, once it arrived: a failure after it keeps it.
    private let head = Locked<HTTPResponse?>(nil)
    /// The current attempt's idle deadline, pushed back by every byte.
    private let idleActivity = Locked<(any IdleActivity)?>(nil)

    package init(taker: (any ResponseBodyTaker)?, observers: [@Sendable (TransferProgress, RequestContext?) -> Void]) {
        self.taker = taker
        self.observers = observers
        self.timesOutWhenIdle = taker?.timesOutWhenIdle ?? false
        self.idleTimeout = taker?.timesOutWhenIdle == true ? taker?.idleTimeout : nil
        self.takesBytesInBatches = taker?.takesBytesInBatches ?? false
    }

    /// The engine made an attempt's idle deadline: bytes push it back from now on, and the taker
    /// holds it while no one waits for them.
    package func watch(_ activity: (any IdleActivity)?) {
        idleActivity.withLock { $0 = activity }
        taker?.watchIdle(activity)
    }

    private func touch() {
        guard idleTimeout != nil else { return }
        idleActivity.withLock { $0 }?.touch()
    }

    /// An attempt begins: no head has arrived yet.
    package func beginAttempt() {
        guard taker != nil else { return }
        head.withLock { $0 = nil }
    }

    /// The attempt's failure, keeping the response head when one arrived before it
    /// (``NetworkError/responseHead``): the behaviors see what the server said, whatever
    /// happened to the body.
    package func failure(_ error: NetworkError) -> NetworkError {
        guard taker != nil, let head = head.withLock({ $0 }) else { return error }
        return error.afterHead(head)
    }

    /// The transport returned for an attempt (see ``ResponseBodyTaker/bodyEnded()``).
    package func bodyEnded() throws(NetworkError) { try taker?.bodyEnded() }

    /// The taker's decision after a failed attempt (see ``ResponseBodyTaker/decision(after:)``).
    package func decision(after failure: NetworkError) async -> TakerDecision? { await taker?.decision(after: failure) }

    /// Called once by the context that holds this transfer.
    func attach(_ context: RequestContext) { attached.withLock { $0.context = context } }

    /// Whether the response body goes to ``receive(_:)`` rather than into the response.
    package var takesBodies: Bool { taker != nil }

    /// Whether anyone is told about progress.
    public var observesProgress: Bool { !observers.isEmpty }

    /// Call when an attempt's response head has arrived, before any of its body.
    /// - Parameter head: The status and headers (its body is ignored).
    /// - Returns: Whether to hand the body to ``receive(_:)``; `false` to collect it into the
    ///   response as usual (a status the receiver does not want, such as an error page).
    /// - Throws: A ``NetworkError`` that ends the attempt (a download's file cannot be written, or
    ///   the head breaks the framing rules every transport is held to: ``MalformedResponse``).
    public func takesBody(of head: HTTPResponse) throws(NetworkError) -> Bool {
        try FramingPolicy.check(head.headers)
        guard let taker else { return false }
        self.head.withLock { $0 = head }
        touch()
        let taking = try taker.takesBody(of: head, attempt: attempt)
        let expected = head.headers["Content-Length"].flatMap { Int64($0) }
        let start = taking ? taker.resumedBytes : 0
        download.withLock { $0 = (start, expected.map { $0 + start }, taking) }
        if taking, observesProgress {
            report(TransferProgress(direction: .download, completedBytes: start, expectedBytes: expected.map { $0 + start }, attempt: attempt))
        }
        return taking
    }

    /// Call with each chunk of a body that ``takesBody(of:)`` took, in order. Suspends while the
    /// receiver cannot keep up.
    /// - Parameter chunk: The bytes.
    /// - Throws: A ``NetworkError`` that ends the attempt (the caller stopped reading, the disk
    ///   is full); stop the transfer and rethrow it.
    public func receive(_ chunk: Data) async throws(NetworkError) {
        guard let taker else { return }
        if idleTimeout == nil {
            try await taker.receive(chunk)
        } else {
            // Held while the receiver, not the server, is slow.
            let activity = idleActivity.withLock { $0 }
            activity?.hold()
            defer { activity?.release() }
            try await taker.receive(chunk)
        }
        guard observesProgress else { return }
        let (bytes, expected) = download.withLock { state in
            state.bytes += Int64(chunk.count)
            return (state.bytes, state.expected)
        }
        report(TransferProgress(direction: .download, completedBytes: bytes, expectedBytes: expected, attempt: attempt))
    }

    /// Reports the request body sent so far in this attempt.
    /// - Parameters:
    ///   - bytes: The bytes sent so far.
    ///   - expected: The body's length, when known.
    public func sent(_ bytes: Int64, of expected: Int64?) {
        guard observesProgress else { return }
        report(TransferProgress(direction: .upload, completedBytes: bytes, expectedBytes: expected, attempt: attempt))
    }

    /// Reports a response body the transport collects itself (not one it hands to
    /// ``receive(_:)``, which is counted here).
    /// - Parameters:
    ///   - bytes: The bytes received so far.
    ///   - expected: The body's length, when known.
    public func received(_ bytes: Int64, of expected: Int64?) {
        guard observesProgress else { return }
        report(TransferProgress(direction: .download, completedBytes: bytes, expectedBytes: expected, attempt: attempt))
    }

    /// Why a failed attempt of `request` may not be sent again, or `nil` when it may.
    package func retryForbiddenReason(for request: HTTPRequest, context: RequestContext) -> String? {
        taker?.retryForbiddenReason(for: request, context: context)
    }

    private var context: RequestContext? { attached.withLock { $0.context } }

    private var attempt: Int { context?.attempt ?? 1 }

    private func report(_ progress: TransferProgress) {
        let context = self.context
        for observer in observers { observer(progress, context) }
    }

    /// For a transport that does not stream: hands a whole response to the handler as one chunk.
    /// - Returns: The response, its body emptied when the receiver took it.
    package func deliver(_ response: HTTPResponse) async throws(NetworkError) -> HTTPResponse {
        guard taker != nil else {
            if observesProgress {
                let size = Int64(response.body.count)
                received(size, of: size)
            }
            return response
        }
        guard try takesBody(of: response) else { return response }
        if !response.body.isEmpty { try await receive(response.body) }
        var emptied = response
        emptied.body = Data()
        return emptied
    }
}
