import AsyncHTTPClient
import Conveyor
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// One hop of an attempt through AsyncHTTPClient's delegate API: it decides at the response head
/// what happens to the body (collected up to the request's limit, handed to the transfer, or
/// drained before a redirect), and hands the caller's `async` code the body parts the transfer
/// takes and the hop's ending. It runs no task: the event loop calls it, and the caller waits on
/// it for one ending and for the parts a transfer takes.
///
/// A transfer's parts are read ahead: AsyncHTTPClient reads on at once while less than
/// ``readAhead`` bytes wait for the transfer, and is held back (a promise it waits on) once that
/// much waits, until the transfer has taken all but ``resumeBelow``. The caller takes every part
/// that waits at once. (One part in flight at a time, each handed back across threads, left a
/// 1 GiB download latency-bound at under one core: 24,000 event-loop wake-ups a GiB.)
final class Exchange: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    /// How a hop ended, when it did not fail.
    enum Ending: Sendable {
        /// The response to deliver (its body empty when the transfer took it).
        case response(Conveyor.HTTPResponse)
        /// A redirect to follow, as the redirect policy made it.
        case redirect(Conveyor.HTTPRequest)
    }

    private enum Event: Sendable {
        /// A part of a body the transfer takes.
        case chunk(Data)
        case end(Result<Ending, any Error>)
    }

    private enum Mode: Sendable {
        case waitingForHead
        case collect(limit: Int?, expected: Int64?)
        case take
        case drain(next: Conveyor.HTTPRequest)
    }

    /// A response head as the exchange keeps it (a struct, not a tuple: a tuple's metadata is
    /// looked up at run time, about 700 instructions a hop).
    private struct Head: Sendable {
        var status: Int
        var headers: Conveyor.HTTPHeaders
    }

    private struct State: Sendable {
        var mode = Mode.waitingForHead
        var head: Head?
        var collected = Data()
        var drained = 0
        var sentBytes: Int64 = 0
        var visited = 0
        var events: [Event] = []
        var waiter: CheckedContinuation<[Event], Never>?
        /// Bytes of parts handed to the caller that the transfer has not taken yet.
        var waitingBytes = 0
        /// What AsyncHTTPClient waits on before it reads on, while ``readAhead`` bytes wait.
        var heldBack: EventLoopPromise<Void>?
        /// Why the transfer stopped taking parts: every later part is refused with it.
        var refusal: (any Error)?
        /// How the hop failed, once it did: the caller takes no further part.
        var failure: (any Error)?
        var ended = false
        /// When a byte of the hop was last sent or received, or the transfer last took a part.
        var lastActivity = NIODeadline.now()
        /// The idle timer, while armed.
        var idleTimer: Scheduled<Void>?

        /// Drops the parts that wait for the transfer; returns the promise AsyncHTTPClient waits
        /// on, if it was held back (for the caller to fail, outside the lock).
        mutating func dropWaitingParts() -> EventLoopPromise<Void>? {
            events.removeAll { if case .chunk = $0 { true } else { false } }
            waitingBytes = 0
            defer { heldBack = nil }
            return heldBack
        }
    }

    /// How many bytes of a transfer's parts may wait for it before AsyncHTTPClient is held back.
    static let readAhead = 4 << 20
    /// How few bytes may still wait when a held-back AsyncHTTPClient reads on.
    static let resumeBelow = 1 << 20

    /// A redirect's own body is drained up to this much so its connection can be reused; past it
    /// the connection is given up.
    static let drainLimit = 64 * 1024

    private struct DrainLimitReached: Error {}

    /// The hop as sent.
    let sent: Conveyor.HTTPRequest
    /// The attempt the pipeline asked for (the response's request; its size limit).
    let asked: Conveyor.HTTPRequest
    let policy: RedirectPolicy
    let redirectsSoFar: Int
    let transfer: TransferHandler?
    /// How long the hop may go with nothing sent or received, when its request sets no timeout.
    let idleTimeout: TimeAmount?
    private let uploadLength: Int64?
    private let state = NIOLockedValueBox(State())

    init(
        sent: Conveyor.HTTPRequest, asked: Conveyor.HTTPRequest, policy: RedirectPolicy, redirectsSoFar: Int,
        transfer: TransferHandler?, idleTimeout: TimeAmount?
    ) {
        self.idleTimeout = idleTimeout
        self.sent = sent
        self.asked = asked
        self.policy = policy
        self.redirectsSoFar = redirectsSoFar
        self.transfer = transfer
        uploadLength = sent.bodyStream.map { $0.length } ?? sent.body.map { Int64($0.count) }
    }

    // MARK: - The caller's side

    /// Ends the hop when AsyncHTTPClient's task fails, for the failures it does not tell its
    /// delegate of (``didReceiveError(task:_:)`` hears of the others).
    ///
    /// AsyncHTTPClient tells the delegate of every failure of a request it runs (a deadline, a
    /// cancellation, a lost connection, an error this delegate returned) except two: a request
    /// made after the client shut down (the task fails at once and the delegate is never
    /// called), and a request body whose end could not be written after the whole response had
    /// come. So the transport watches the task only for those (a body, or a delegate
    /// AsyncHTTPClient let go of): the watch is a callback added from off the event loop, a hop
    /// onto it (about 3,900 instructions and 3 mallocs a request).
    func watch(_ task: HTTPClient.Task<Void>) {
        task.futureResult.whenFailure { [self] error in failed(error) }
    }

    /// Ends the hop after AsyncHTTPClient's task failed with `error`.
    private func failed(_ error: any Error) {
        // A redirect decided at its head is followed whatever happens to the rest of its hop
        // (a body past the drain limit, a request body AsyncHTTPClient stopped sending), but
        // not after a cancellation or the deadline.
        let ended = error is CancellationError || error as? HTTPClientError == .cancelled
            || error as? HTTPClientError == .deadlineExceeded
        if !ended, case .drain(let next) = state.withLockedValue({ $0.mode }) {
            end(.success(.redirect(next)))
        } else {
            end(.failure(error))
        }
    }

    /// Arms the idle timer, when the hop has an idle timeout: the hop fails with a timeout once
    /// nothing was sent or received for that long while no part waited for the transfer (the
    /// meaning of `URLSession`'s `timeoutIntervalForRequest`). One timer per hop, armed here and
    /// re-armed on the event loop only when it fires early; activity only stamps the time.
    func armIdleTimer(on task: HTTPClient.Task<Void>) {
        guard let idleTimeout else { return }
        schedule(idleCheck: task, at: .now() + idleTimeout)
    }

    private func schedule(idleCheck task: HTTPClient.Task<Void>, at deadline: NIODeadline) {
        let timer = task.eventLoop.scheduleTask(deadline: deadline) { [self] in checkIdle(task) }
        let ended = state.withLockedValue { state -> Bool in
            if !state.ended { state.idleTimer = timer }
            return state.ended
        }
        if ended { timer.cancel() }
    }

    private func checkIdle(_ task: HTTPClient.Task<Void>) {
        guard let idleTimeout else { return }
        let due = state.withLockedValue { state -> NIODeadline? in
            if state.ended { return nil }
            state.idleTimer = nil
            // A part that waits for the transfer: the hop is not idle.
            return state.waitingBytes > 0 ? .now() + idleTimeout : state.lastActivity + idleTimeout
        }
        guard let due else { return }
        if due <= .now() {
            task.fail(reason: HTTPClientError.readTimeout)
        } else {
            schedule(idleCheck: task, at: due)
        }
    }

    /// Stamps the time of the hop's latest activity.
    private func touch() {
        state.withLockedValue { $0.lastActivity = .now() }
    }

    /// Hands each part the transfer takes to it, in order, then returns how the hop ended.
    func run() async throws -> Ending {
        while true {
            for event in await next() {
                switch event {
                case .chunk(let data):
                    do {
                        try await transfer?.receive(data)
                    } catch {
                        refuse(error)
                        throw error
                    }
                    let (resumed, failure) = state.withLockedValue {
                        state -> (EventLoopPromise<Void>?, (any Error)?) in
                        if let failure = state.failure { return (nil, failure) }
                        state.waitingBytes -= data.count
                        state.lastActivity = .now()
                        guard state.waitingBytes <= Self.resumeBelow else { return (nil, nil) }
                        defer { state.heldBack = nil }
                        return (state.heldBack, nil)
                    }
                    // The hop failed (cancelled, timed out) while parts of a batch were left.
                    if let failure { throw failure }
                    resumed?.succeed(())
                case .end(let result):
                    return try result.get()
                }
            }
        }
    }

    /// The transfer stopped taking parts with `error`: AsyncHTTPClient, held back or not, is
    /// told at its next part, and the parts that wait are dropped.
    private func refuse(_ error: any Error) {
        let heldBack = state.withLockedValue { state -> EventLoopPromise<Void>? in
            state.refusal = error
            return state.dropWaitingParts()
        }
        heldBack?.fail(error)
    }

    /// Ends the hop with `result` unless it ended already. A failure drops the parts that wait
    /// (the caller sees the ending at once, not after them) and fails AsyncHTTPClient's wait.
    func end(_ result: Result<Ending, any Error>) {
        let (first, timer, heldBack) = state.withLockedValue {
            state -> (Bool, Scheduled<Void>?, EventLoopPromise<Void>?) in
            guard !state.ended else { return (false, nil, nil) }
            state.ended = true
            let timer = state.idleTimer
            state.idleTimer = nil
            guard case .failure(let error) = result else { return (true, timer, nil) }
            state.failure = error
            return (true, timer, state.dropWaitingParts())
        }
        timer?.cancel()
        if case .failure(let error) = result { heldBack?.fail(error) }
        if first { post(.end(result)) }
    }

    /// Hands `event` to the waiting caller, or queues it. With `unlessEnded`, an event that comes
    /// after the ending is refused (checked with the queueing, so a part is either read before the
    /// ending or refused): returns whether it was taken.
    @discardableResult
    private func post(_ event: Event, unlessEnded: Bool = false) -> Bool {
        let (taken, waiter) = state.withLockedValue { state -> (Bool, CheckedContinuation<[Event], Never>?) in
            if unlessEnded, state.ended { return (false, nil) }
            if let waiter = state.waiter {
                state.waiter = nil
                return (true, waiter)
            }
            state.events.append(event)
            return (true, nil)
        }
        waiter?.resume(returning: [event])
        return taken
    }

    /// Every event that waits, in order (at least one).
    private func next() async -> [Event] {
        await withCheckedContinuation { continuation in
            let events = state.withLockedValue { state -> [Event]? in
                if state.events.isEmpty {
                    state.waiter = continuation
                    return nil
                }
                defer { state.events = [] }
                return state.events
            }
            if let events { continuation.resume(returning: events) }
        }
    }

    // MARK: - AsyncHTTPClient's side (on the event loop)

    func didSendRequestHead(task: HTTPClient.Task<Void>, _ head: HTTPRequestHead) {
        if idleTimeout != nil { touch() }
    }

    func didSendRequestPart(task: HTTPClient.Task<Void>, _ part: IOData) {
        let bytes = state.withLockedValue { state in
            if idleTimeout != nil { state.lastActivity = .now() }
            state.sentBytes += Int64(part.readableBytes)
            return state.sentBytes
        }
        guard let transfer, transfer.observesProgress else { return }
        transfer.sent(bytes, of: uploadLength)
    }

    func didVisitURL(task: HTTPClient.Task<Void>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
        state.withLockedValue { $0.visited += 1 }
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        do {
            try accept(head)
            return task.eventLoop.makeSucceededVoidFuture()
        } catch {
            return task.eventLoop.makeFailedFuture(error)
        }
    }

    /// Decides what happens to the body: the redirect policy first, then the transfer, then the
    /// size limit against a declared length.
    private func accept(_ head: HTTPResponseHead) throws {
        // More than one visited URL: AsyncHTTPClient followed a redirect itself.
        guard state.withLockedValue({ $0.visited }) <= 1 else { throw AsyncHTTPClientTransport.followedRedirectsError }
        let status = Int(head.status.code)
        var fields: [Conveyor.HTTPHeaders.Field] = []
        fields.reserveCapacity(head.headers.count)
        // `Location` and `Content-Length` are picked out on the way (the first of each), not
        // looked up again.
        var location: String?
        var contentLength: String?
        for (name, value) in head.headers {
            fields.append(.init(name: name, value: value))
            switch name.utf8.count {
            case 8 where location == nil && Self.named(name, "location"): location = value
            case 14 where contentLength == nil && Self.named(name, "content-length"):
                contentLength = value
            default: break
            }
        }
        var headers = Conveyor.HTTPHeaders(fields)
        let mode: Mode
        switch policy.step(status: status, location: location, after: sent, redirectsSoFar: redirectsSoFar) {
        case .tooManyRedirects:
            throw NetworkError.tooManyRedirects
        case .follow(let next):
            mode = .drain(next: next)
        case .deliver:
            // A redirect target on another origin may not set cookies for the one asked: not in
            // the response, nor in the head a transfer takes (the behaviors see it when the body
            // breaks off).
            if redirectsSoFar > 0 { headers = policy.delivering(headers, from: sent.url, askedFor: asked.url) }
            let response = Conveyor.HTTPResponse(status: status, headers: headers, body: Data(), request: asked)
            if try transfer?.takesBody(of: response) == true {
                mode = .take
            } else {
                let limit = asked.maxResponseSize
                let expected = contentLength.flatMap { Int64($0) }
                if let limit, let expected, expected > Int64(limit) { throw NetworkError.responseTooLarge(limit: limit) }
                mode = .collect(limit: limit, expected: expected)
            }
        }
        state.withLockedValue { state in
            state.head = Head(status: status, headers: headers)
            state.mode = mode
            if idleTimeout != nil { state.lastActivity = .now() }
        }
    }

    /// Whether `name` is `lowercase` in any case (ASCII), lengths already known equal.
    private static func named(_ name: String, _ lowercase: StaticString) -> Bool {
        var expected = lowercase.utf8Start
        for byte in name.utf8 {
            let folded = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            guard folded == expected.pointee else { return false }
            expected += 1
        }
        return true
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        enum Next {
            case readOn
            case fail(any Error)
            case report(Int64, Int64?)
            case hand(Data)
            case handAndWait(Data, EventLoopPromise<Void>)
        }
        let next = state.withLockedValue { state -> Next in
            if idleTimeout != nil { state.lastActivity = .now() }
            switch state.mode {
            case .collect(let limit, let expected):
                if let limit, state.collected.count + buffer.readableBytes > limit {
                    return .fail(NetworkError.responseTooLarge(limit: limit))
                }
                buffer.withUnsafeReadableBytes { state.collected.append(contentsOf: $0) }
                return .report(Int64(state.collected.count), expected)
            case .take:
                if let refusal = state.refusal { return .fail(refusal) }
                state.waitingBytes += buffer.readableBytes
                let data = Data(buffer.readableBytesView)
                guard state.waitingBytes >= Self.readAhead else { return .hand(data) }
                let promise = task.eventLoop.makePromise(of: Void.self)
                state.heldBack = promise
                return .handAndWait(data, promise)
            case .drain:
                state.drained += buffer.readableBytes
                return state.drained > Self.drainLimit ? .fail(DrainLimitReached()) : .readOn
            case .waitingForHead:
                return .readOn
            }
        }
        switch next {
        case .readOn:
            return task.eventLoop.makeSucceededVoidFuture()
        case .fail(let error):
            return task.eventLoop.makeFailedFuture(error)
        case .report(let bytes, let expected):
            transfer?.received(bytes, of: expected)
            return task.eventLoop.makeSucceededVoidFuture()
        case .hand(let chunk):
            guard post(.chunk(chunk), unlessEnded: true) else { return task.eventLoop.makeFailedFuture(CancellationError()) }
            return task.eventLoop.makeSucceededVoidFuture()
        case .handAndWait(let chunk, let promise):
            if !post(.chunk(chunk), unlessEnded: true) {
                state.withLockedValue { $0.heldBack = nil }
                promise.fail(CancellationError())
            }
            return promise.futureResult
        }
    }

    /// AsyncHTTPClient's task failed (it fails the task right after): the hop ends with the error.
    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        failed(error)
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        let ending = state.withLockedValue { state -> Ending? in
            guard let head = state.head else { return nil }
            switch state.mode {
            case .drain(let next):
                return .redirect(next)
            case .take:
                return .response(Conveyor.HTTPResponse(status: head.status, headers: head.headers, body: Data(), request: asked))
            case .collect:
                let body = state.collected
                state.collected = Data()
                return .response(Conveyor.HTTPResponse(status: head.status, headers: head.headers, body: body, request: asked))
            case .waitingForHead:
                return nil
            }
        }
        if let ending {
            end(.success(ending))
        } else {
            end(.failure(NetworkError.transportFailed(NotHTTP())))
        }
    }

    /// The request ended without a response head.
    struct NotHTTP: Error, CustomStringConvertible {
        var description: String { "the request ended without a response" }
    }
}
