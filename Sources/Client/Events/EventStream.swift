import ConveyorPipeline
public import Foundation

/// How an event stream reads, reconnects and gives up: the options of
/// ``NetworkClient/events(_:options:)``.
///
/// ```swift
/// var options = EventStreamOptions()
/// options.idleTimeout = .seconds(45)          // the server sends a comment every 15 s
/// options.maxConsecutiveFailures = 10
/// let scores = client.events(Request<Data>(path: "/scores/live"), options: options)
/// ```
public struct EventStreamOptions: Sendable {
    /// How long a connection may go without a byte (an event, a comment, anything) before it is
    /// dropped and the stream reconnects; it replaces the request's per-attempt `timeout`. `nil`
    /// for no limit. 120 s by default.
    public var idleTimeout: Duration? = .seconds(120)
    /// The delay before reconnecting when the server sent no `retry:` field. 1 s by default. Like
    /// a server's `retry:`, it is a floor: jitter only lengthens it.
    public var reconnectDelay: Duration = .seconds(1)
    /// The shortest delay before any reconnect, whatever the server's `retry:` asks (a `retry: 0`
    /// and a server that closes at once would otherwise be hundreds of connections a second).
    /// 250 ms by default.
    public var minReconnectDelay: Duration = .milliseconds(250)
    /// The most a server's `retry:` can ask for; longer values are lowered to it. Also the cap
    /// (before jitter) after a connection that delivered an event. 5 minutes by default.
    public var maxRetryDelay: Duration = .seconds(300)
    /// After a connection that failed (refused, or ended before any event), the delay doubles
    /// from the last one up to this cap (before jitter), never below the server's `retry:` or
    /// ``reconnectDelay``. 30 s by default.
    public var maxReconnectDelay: Duration = .seconds(30)
    /// The part of a reconnect delay that is random, in `0...1`: the wait is spread upward, over
    /// 100–120 % of the delay with 0.2, never below it, so clients that lost the same server do
    /// not all come back at once (also at a cap: waits at ``maxReconnectDelay`` spread over
    /// 100–120 % of it). 0 for exact delays. 0.2 by default.
    public var jitter: Double = 0.2
    /// How many connections in a row may fail before the stream ends with the last failure: a
    /// connection fails when it delivered no event (refused, timed out, or ended with nothing but
    /// comments and fields). The stream makes at most this many failed connections in a row
    /// (at least 1). 5 by default.
    public var maxConsecutiveFailures: Int = 5
    /// Whether a request whose method is not idempotent (`POST`, `PATCH`) is sent again after a
    /// drop without an idempotency key. Even then, a stream that delivered events with no `id`
    /// (the server cannot resume it) is never sent again: the new connection would start another
    /// answer, joined to the first. `false` by default: such a stream ends with
    /// ``NetworkError/notRetryable(after:reason:)``, as ``RetryBehavior`` would not retry it.
    public var resendsNonIdempotentRequests = false
    /// The longest line accepted, in bytes; a longer one ends the stream with
    /// ``NetworkError/responseTooLarge(limit:)``. 64 KiB by default.
    public var maxLineLength: Int = 64 * 1024
    /// The largest event accepted (its data and type), in bytes; a larger one ends the stream
    /// with ``NetworkError/responseTooLarge(limit:)``. 1 MiB by default.
    public var maxEventSize: Int = 1024 * 1024
    /// An event data that ends the stream as a success, such as `[DONE]`: it is not delivered,
    /// the connection is closed, and behaviors see `afterSuccess`. `nil` by default.
    public var endMarker: String?

    /// The default options.
    public init() {}

    /// The delay before reconnect number `failures` in a row (0 after a connection that
    /// delivered an event), from `base` (the server's `retry:` or ``reconnectDelay``, already
    /// lowered to ``maxRetryDelay``): the floor is `base`, never under ``minReconnectDelay``; after
    /// failures it doubles from the floor up to the cap (``maxReconnectDelay``, never below the
    /// floor); then ``jitter`` spreads it upward, `delay × (1 + jitter × random)`, the rule
    /// `RetryBehavior` follows for a `Retry-After` (Reliability.md, "One jitter rule").
    func delay(base: Duration, failures: Int, random: Double) -> Duration {
        let floor = max(minReconnectDelay.clampedForConveyor, base.clampedForConveyor)
        var delay = floor
        if failures > 0 {
            let cap = max(floor, maxReconnectDelay.clampedForConveyor)
            let doubled = floor.secondsValue * pow(2, Double(min(failures - 1, 60)))
            delay = min(cap, max(floor, Duration.clampedSeconds(doubled)))
        }
        return FloorJitter.lengthen(delay, spread: jitter, random: random)
    }
}

extension NetworkClient {
    /// A server-sent event stream (`text/event-stream`) as an `AsyncSequence` of events that
    /// survives dropped connections: it reconnects with `Last-Event-ID`, and every reconnect goes
    /// through the whole behavior chain.
    ///
    /// ```swift
    /// for try await event in client.events(Request<Data>(path: "/scores/live")) {
    ///     print(event.event, event.data)
    /// }
    /// ```
    ///
    /// - The request is sent when you start iterating (once per iterator), with
    ///   `Accept: text/event-stream` and `Cache-Control: no-cache` unless it sets them.
    /// - When the connection drops or the server ends the response, the stream reconnects after
    ///   the server's `retry:` delay (or ``EventStreamOptions/reconnectDelay``), sending the last
    ///   event ID as `Last-Event-ID`; you see one continuous sequence. A connection that fails
    ///   backs off (doubling, with jitter) until ``EventStreamOptions/maxConsecutiveFailures``.
    ///   A quiet connection is dropped after ``EventStreamOptions/idleTimeout``.
    /// - Each connection is an attempt: `additionalHeaders`, `modify`, `validate` run for each
    ///   (a fresh token every time), and a 401 goes through `retryDecision` (an auth behavior's
    ///   refresh) like any request. `beforeSend` runs once, and exactly one ending hook runs
    ///   when the stream ends: `afterSuccess` for a 204 or the ``EventStreamOptions/endMarker``,
    ///   `afterFailure` otherwise (``NetworkError/cancelled`` when you leave the loop, drop the
    ///   iterator or cancel the task).
    /// - The stream ends with an error for another status (after the behaviors' retries), a
    ///   response that is not `text/event-stream` (``NetworkError/decodingFailed(_:underlying:)``
    ///   with ``EventStreamError/notAnEventStream(contentType:)``), an oversized line or event
    ///   (``NetworkError/responseTooLarge(limit:)``), or too many failed reconnects.
    /// - Event data never reaches a log or an error description: ``ServerSentEvent`` describes
    ///   itself by size.
    ///
    /// - Parameters:
    ///   - request: The request; its `Output` is not used. Its body, if any, is sent again on
    ///     every reconnect.
    ///   - options: Reconnection, timeouts and limits.
    /// - Returns: The events; iterate once.
    public func events<Output>(_ request: Request<Output>, options: EventStreamOptions = EventStreamOptions())
        -> ServerSentEvents
    {
        var prepared = request
        if !prepared.headers.contains("Accept") { prepared.headers["Accept"] = "text/event-stream" }
        if !prepared.headers.contains("Cache-Control") { prepared.headers["Cache-Control"] = "no-cache" }
        let client = self
        let sent = prepared
        let acceptable = configuration.acceptableStatusCodes
        return ServerSentEvents { channel in
            let taker = EventsTaker(channel: channel, options: options, acceptable: acceptable)
            let request = sent.adding(LastEventIDBehavior(taker: taker))
            let transfer = Task {
                do throws(NetworkError) {
                    _ = try await client.performTransfer(request, taker: taker) { _ throws(NetworkError) in }
                    channel.finish(nil)
                } catch {
                    channel.finish(error)
                }
            }
            channel.whenClosed { transfer.cancel() }
            taker.whenStopped { transfer.cancel() }
            return (taker, transfer)
        }
    }

    /// An event stream whose event data is JSON, decoded into `Value`: ``events(_:options:)``
    /// with a typed layer, ending at a marker such as OpenAI's `[DONE]`.
    ///
    /// ```swift
    /// struct Delta: Decodable, Sendable { let text: String }
    /// let completion = Request<Data>(method: .post, path: "/v1/complete", body: .json(prompt))
    /// for try await delta in client.events(completion, decoding: Delta.self, until: "[DONE]") {
    ///     print(delta.text, terminator: "")
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - request: The request; its `Output` is not used.
    ///   - type: What each event's data decodes into.
    ///   - endMarker: An event data that ends the stream as a success (not decoded); `nil` for
    ///     none.
    ///   - decoder: The JSON decoder; the client's by default.
    ///   - options: Reconnection, timeouts and limits (its ``EventStreamOptions/endMarker`` is
    ///     `endMarker`).
    /// - Returns: The decoded values; an event whose data does not decode ends the stream with
    ///   ``NetworkError/decodingFailed(_:underlying:)``.
    public func events<Output, Value: Decodable & Sendable>(
        _ request: Request<Output>, decoding type: Value.Type, until endMarker: String? = nil,
        decoder: JSONDecoder? = nil, options: EventStreamOptions = EventStreamOptions()
    ) -> DecodedEvents<Value> {
        var options = options
        options.endMarker = endMarker
        return DecodedEvents(events: events(request, options: options), decoder: decoder ?? configuration.decoder)
    }
}

/// The events of a server-sent event stream: what ``NetworkClient/events(_:options:)`` returns.
///
/// Each iterator sends the request and reads its own stream; iterate once. Leaving the loop,
/// dropping the iterator or cancelling the reading task ends the connection, and the behaviors
/// see ``NetworkError/cancelled``.
public struct ServerSentEvents: AsyncSequence, Sendable {
    /// Each element is the next event.
    public typealias Element = ServerSentEvent

    /// Starts a stream that delivers into the channel; returns who receives its body, and the
    /// transfer's task.
    let start: @Sendable (BoundedChannel<EventStreamItem>) -> (EventsTaker, Task<Void, Never>)

    /// The iterator: each ``next()`` waits for the next event.
    ///
    /// The bytes are parsed here, in the reading task, while the transfer receives the next ones
    /// in its own: the two run side by side.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let lifetime: EventIteration
        /// The events of the last chunk not handed out yet, last first: each is moved out with
        /// `popLast()`, with no copy.
        private var batch: [ServerSentEvent] = []
        /// The end marker or a limit was reached: the transfer is stopping, and the bytes still
        /// queued are dropped until the channel ends (after the behaviors' ending hook).
        private var stopping = false

        init(lifetime: EventIteration) { self.lifetime = lifetime }

        /// The next event, or `nil` when the stream ended without an error (a 204, or the end
        /// marker).
        /// - Throws: The ``NetworkError`` that ended the stream.
        public mutating func next() async throws -> ServerSentEvent? {
            try await nextEvent(isolation: nil)
        }

        /// The next event, read in the caller's isolation: an event already parsed is handed
        /// out with no hop to another executor (the default `next(isolation:)` would hop for each).
        /// - Parameter actor: The caller's actor, if any.
        /// - Throws: The ``NetworkError`` that ended the stream.
        @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> ServerSentEvent? {
            try await nextEvent(isolation: actor)
        }

        @inline(__always)
        private mutating func nextEvent(isolation actor: isolated (any Actor)?) async throws -> ServerSentEvent? {
            while batch.isEmpty {
                // Ends with nil or with the error the request ended with, once its behaviors ran.
                // Only while the reader waits here does a quiet connection count as idle.
                lifetime.taker.readerWaits(true)
                defer { lifetime.taker.readerWaits(false) }
                guard let item = try await lifetime.channel.next() else { return nil }
                switch item {
                case .bytes(let chunk):
                    guard !stopping else { continue }
                    if lifetime.taker.parse(chunk, into: &batch) {
                        stopping = true
                        lifetime.taker.stop()
                    }
                    batch.reverse()
                case .connectionEnded:
                    lifetime.taker.connectionEnded()
                }
            }
            return batch.popLast()
        }
    }

    /// Sends the request and returns the iterator of its events.
    public func makeAsyncIterator() -> AsyncIterator {
        let channel = BoundedChannel<EventStreamItem>(capacity: 1 << 20)
        let (taker, transfer) = start(channel)
        return AsyncIterator(lifetime: EventIteration(channel: channel, taker: taker, transfer: transfer))
    }
}

/// JSON events decoded into `Value`: what ``NetworkClient/events(_:decoding:until:decoder:options:)``
/// returns. Iterate once; leaving the loop ends the connection.
public struct DecodedEvents<Value: Decodable & Sendable>: AsyncSequence, Sendable {
    /// Each element is the next event's decoded data.
    public typealias Element = Value

    let events: ServerSentEvents
    let decoder: JSONDecoder

    /// The iterator: each ``next()`` waits for the next event and decodes it.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var events: ServerSentEvents.AsyncIterator
        let decoder: JSONDecoder

        /// The next value, or `nil` when the stream ended.
        /// - Throws: The ``NetworkError`` that ended the stream, or
        ///   ``NetworkError/decodingFailed(_:underlying:)`` for data that does not decode.
        public mutating func next() async throws -> Value? {
            guard let event = try await events.next() else { return nil }
            do {
                return try decoder.decode(Value.self, from: Data(event.data.utf8))
            } catch {
                events.lifetime.channel.close()
                // An event is delivered only after its response's head was kept.
                guard let head = events.lifetime.taker.currentHead else { throw NetworkError.transportFailed(error) }
                throw NetworkError.decodingFailed(head, underlying: error)
            }
        }
    }

    /// Sends the request and returns the iterator of its values.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(events: events.makeAsyncIterator(), decoder: decoder)
    }
}

/// Held by an iterator (and its copies): when the last one goes, the loop was left, so the
/// connection ends.
final class EventIteration: Sendable {
    let channel: BoundedChannel<EventStreamItem>
    let taker: EventsTaker
    /// The transfer's task (it holds neither this object nor the iterator): tests await its end.
    let transfer: Task<Void, Never>
    init(channel: BoundedChannel<EventStreamItem>, taker: EventsTaker, transfer: Task<Void, Never>) {
        self.channel = channel
        self.taker = taker
        self.transfer = transfer
    }
    deinit { channel.close() }
}

/// What the transfer hands the reading task: a connection's bytes, and where a connection ended.
enum EventStreamItem: ChannelElement {
    case bytes(Data)
    /// The connection whose bytes came before ended; the reader acknowledges it once they are
    /// parsed, so a reconnect sends the last event ID they hold.
    case connectionEnded

    var channelWeight: Int {
        if case .bytes(let data) = self { return data.count }
        return 1
    }
}

/// Sends the last event ID as `Last-Event-ID` on every reconnect.
struct LastEventIDBehavior: RequestModifying {
    let taker: EventsTaker

    var name: String { "LastEventID" }

    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        // An id that is not a valid header value (a control character) cannot be sent: the
        // server then starts over, as for a client that never had an id.
        guard let id = taker.lastEventID, HTTPHeaders.isValidValue(id) else { return }
        request.headers["Last-Event-ID"] = id
    }
}

/// Receives an event stream's bodies for the reading task to parse, and decides what follows a
/// dropped connection.
final class EventsTaker: ResponseBodyTaker {
    private let channel: BoundedChannel<EventStreamItem>
    private let options: EventStreamOptions
    private let acceptable: Set<Int>
    private let state: Locked<State>

    private struct State {
        /// Used by the reading task (under the lock, which the transfer takes only between
        /// connections): its last event ID and reconnection time are the transfer's too.
        var parser: ServerSentEventParser
        /// The current attempt's body was taken (an event-stream head arrived).
        var took = false
        var eventsAtHead = 0
        var failures = 0
        var head: HTTPResponse?
        /// The end marker arrived: the stream ends as a success.
        var finished = false
        /// An error reconnecting cannot fix.
        var fatal: NetworkError?
        /// Connection ends sent to the reader, and acknowledged by it.
        var endsSent = 0
        var endsAcknowledged = 0
        var drained: CheckedContinuation<Void, Never>?
        var stopTransfer: (@Sendable () -> Void)?
        var stopRequested = false
        var random = SystemRandomNumberGenerator()
        /// The current attempt's idle deadline, and whether this taker holds it.
        var idle: (any IdleActivity)?
        var holdsIdle = false
        /// The reader is waiting for the next event: only then does a quiet connection count as
        /// idle (time spent waiting for the reader does not).
        var readerWaiting = false
    }

    init(channel: BoundedChannel<EventStreamItem>, options: EventStreamOptions, acceptable: Set<Int>) {
        self.channel = channel
        self.options = options
        self.acceptable = acceptable
        self.state = Locked(
            State(parser: ServerSentEventParser(maxLineLength: options.maxLineLength, maxEventSize: options.maxEventSize)))
    }

    var timesOutWhenIdle: Bool { true }
    var idleTimeout: Duration? { options.idleTimeout }

    func watchIdle(_ activity: (any IdleActivity)?) {
        state.withLock { state in
            state.idle = activity
            state.holdsIdle = false
            if !state.readerWaiting, let activity {
                activity.hold()
                state.holdsIdle = true
            }
        }
    }

    /// The reader starts (`true`) or stops waiting for the next bytes: the idle clock runs only
    /// while it waits.
    func readerWaits(_ waiting: Bool) {
        state.withLock { state in
            state.readerWaiting = waiting
            guard let idle = state.idle, state.holdsIdle == waiting else { return }
            if waiting { idle.release() } else { idle.hold() }
            state.holdsIdle = !waiting
        }
    }

    /// Whether the reader is waiting for the next bytes (for tests).
    var readerIsWaiting: Bool { state.withLock { $0.readerWaiting } }

    /// A reconnect is a retry (contract rule 16): the same idempotency rule as ``RetryBehavior``
    /// (or the explicit opt-in), and never two answers joined into one.
    func retryForbiddenReason(for request: HTTPRequest, context: RequestContext) -> String? {
        if request.method.isIdempotent { return nil }
        guard options.resendsNonIdempotentRequests || IdempotencyKey.allowsResending(request, context: context) else {
            return "an event stream whose method is not idempotent is sent again only with an idempotency key "
                + "(IdempotencyKeyBehavior) or EventStreamOptions.resendsNonIdempotentRequests"
        }
        let (delivered, id) = state.withLock { ($0.parser.eventsDispatched > 0, $0.parser.lastEventID) }
        guard delivered, id == nil else { return nil }
        return "the stream delivered events without an id, so the server cannot resume it: a new connection "
            + "would start another answer, joined to the first"
    }
    var resumedBytes: Int64 { 0 }

    var lastEventID: String? { state.withLock { $0.parser.lastEventID } }
    var currentHead: HTTPResponse? { state.withLock { $0.head } }

    // MARK: The reading task

    /// Parses a chunk into `events`. Returns `true` when the stream must end after them (the end
    /// marker, or a limit): call ``stop()``.
    func parse(_ chunk: Data, into events: inout [ServerSentEvent]) -> Bool {
        state.withLock { state -> Bool in
            var failure: EventStreamError?
            do throws(EventStreamError) {
                try state.parser.parse(chunk, into: &events)
            } catch {
                failure = error
            }
            if let marker = options.endMarker, let end = events.firstIndex(where: { $0.data == marker }) {
                events.removeSubrange(end...)
                state.finished = true
                return true
            }
            guard let failure else { return false }
            let limit: Int
            switch failure {
            case .lineTooLong(let value), .eventTooLarge(let value): limit = value
            default: limit = options.maxEventSize
            }
            state.fatal = NetworkError.responseTooLarge(limit: limit)
            return true
        }
    }

    /// Stops the transfer (the end marker or a limit was reached); it ends with the outcome
    /// ``decision(after:)`` gives.
    func stop() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            state.stopRequested = true
            return state.stopTransfer
        }
        action?()
    }

    /// What ``stop()`` runs; runs it at once if it was already asked for.
    func whenStopped(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            state.stopTransfer = action
            return state.stopRequested
        }
        if now { action() }
    }

    /// The reader reached the end of a connection's bytes.
    func connectionEnded() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.parser.reset()
            state.endsAcknowledged += 1
            return state.endsAcknowledged == state.endsSent ? state.drained.take() : nil
        }
        waiter?.resume()
    }

    // MARK: The transfer

    func takesBody(of head: HTTPResponse, attempt: Int) throws(NetworkError) -> Bool {
        guard head.status != 204, acceptable.contains(head.status) else { return false }
        var response = head
        response.body = Data()
        let type = head.headers["Content-Type"].map { $0.split(separator: ";", maxSplits: 1).first.map(String.init) ?? "" }
        let mediaType = type?.trimmingCharacters(in: .whitespaces).lowercased()
        guard mediaType == "text/event-stream" else {
            let error = NetworkError.decodingFailed(response, underlying: EventStreamError.notAnEventStream(contentType: mediaType))
            state.withLock { $0.fatal = error }
            throw error
        }
        state.withLock { state in
            state.took = true
            state.eventsAtHead = state.parser.eventsDispatched
            state.head = response
        }
        return true
    }

    func receive(_ chunk: Data) async throws(NetworkError) {
        try await channel.send(.bytes(chunk))
    }

    func bodyEnded() throws(NetworkError) {
        let ended = state.withLock { $0.took && !$0.finished }
        if ended { throw .connectionFailed(EventStreamError.serverEndedStream) }
    }

    /// Waits until the reader has parsed every byte of the connection that ended (so the last
    /// event ID is current). Returns `false` when the reader left.
    private func drain() async -> Bool {
        do throws(NetworkError) {
            try await channel.send(.connectionEnded)
        } catch {
            return false
        }
        state.withLock { $0.endsSent += 1 }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.endsAcknowledged >= state.endsSent || Task.isCancelled { return true }
                    state.drained = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.drained.take() }?.resume()
        }
        return !Task.isCancelled
    }

    func decision(after failure: NetworkError) async -> TakerDecision? {
        let took = state.withLock { state -> Bool in
            defer { state.took = false }
            return state.took
        }
        // The reader stops the transfer itself (the end marker, a limit, leaving): then there is
        // nothing to wait for. Otherwise the connection's bytes are parsed before deciding.
        if took, !failure.isCancellation, await !drain() {
            if !state.withLock({ $0.finished || $0.fatal != nil }) { return nil }  // the reader left
        }
        return state.withLock { state -> TakerDecision? in
            if state.finished, let head = state.head { return .finish(head) }
            if let fatal = state.fatal { return .end(fatal) }
            if failure.isCancellation { return nil }
            let connectionLevel: Bool
            switch failure {
            case .connectionFailed, .timedOut, .offline, .transportFailed: connectionLevel = true
            default: connectionLevel = false
            }
            guard took || connectionLevel else { return nil }  // a status: the behaviors decide
            // Only an event is a sign of life: a server that sends `retry: 0` or a comment and
            // closes is failing, however many lines it sends.
            if took && state.parser.eventsDispatched > state.eventsAtHead {
                state.failures = 0
            } else {
                state.failures += 1
            }
            if state.failures >= max(1, options.maxConsecutiveFailures) {
                // One ending on every transport: a connection the server closed or refused is
                // `.connectionFailed` (FoundationNetworking reports an empty reply as
                // `URLError(.badServerResponse)`, which arrives as `.transportFailed`).
                if case .transportFailed = failure, let underlying = failure.underlying {
                    return .end(.connectionFailed(underlying))
                }
                return .end(failure)
            }
            let base = min(state.parser.reconnectionTime ?? options.reconnectDelay, options.maxRetryDelay)
            let random = Double(state.random.next() >> 11) / Double(1 << 53)
            return .reconnect(
                after: options.delay(base: base, failures: state.failures, random: random), progressed: state.failures == 0)
        }
    }
}

