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
    /// The delay before reconnecting when the server sent no `retry:` field. 1 s by default.
    public var reconnectDelay: Duration = .seconds(1)
    /// The most a server's `retry:` can ask for; longer values are lowered to it. 5 minutes by
    /// default.
    public var maxRetryDelay: Duration = .seconds(300)
    /// After a connection that failed (refused, or ended before any line arrived), the delay
    /// doubles from the last one, with ``jitter``, up to this. 30 s by default.
    public var maxReconnectDelay: Duration = .seconds(30)
    /// The part of a backoff delay that is random, in `0...1`: 0.2 waits 80–120 % of it, so
    /// clients that lost the same server do not all come back at once. 0.2 by default.
    public var jitter: Double = 0.2
    /// How many connections in a row may fail (no response, or a response that ended before any
    /// line arrived) before the stream ends with the last failure. 5 by default.
    public var maxConsecutiveFailures: Int = 5
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
    /// delivered something), starting from `base` (the server's `retry:` or ``reconnectDelay``).
    func delay(base: Duration, failures: Int, random: Double) -> Duration {
        guard failures > 0 else { return base.clampedForConveyor }
        let doubled = base.secondsValue * pow(2, Double(min(failures - 1, 60)))
        let capped = min(doubled, maxReconnectDelay.secondsValue)
        let spread = min(1, max(0, jitter))
        return Duration.clampedSeconds(capped * (1 - spread + 2 * spread * random))
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
            return taker
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

    /// Starts a stream that delivers into the channel; returns who receives its body.
    let start: @Sendable (BoundedChannel<ServerSentEvent>) -> EventsTaker

    /// The iterator: each ``next()`` waits for the next event.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let lifetime: EventIteration

        /// The next event, or `nil` when the stream ended without an error (a 204, or the end
        /// marker).
        /// - Throws: The ``NetworkError`` that ended the stream.
        public mutating func next() async throws -> ServerSentEvent? {
            try await lifetime.channel.next()
        }
    }

    /// Sends the request and returns the iterator of its events.
    public func makeAsyncIterator() -> AsyncIterator {
        let channel = BoundedChannel<ServerSentEvent>(capacity: 256 * 1024)
        let taker = start(channel)
        return AsyncIterator(lifetime: EventIteration(channel: channel, taker: taker))
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
    let channel: BoundedChannel<ServerSentEvent>
    let taker: EventsTaker
    init(channel: BoundedChannel<ServerSentEvent>, taker: EventsTaker) {
        self.channel = channel
        self.taker = taker
    }
    deinit { channel.close() }
}

extension ServerSentEvent: ChannelElement {
    var channelWeight: Int { data.utf8.count + event.utf8.count + 48 }
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

/// Receives an event stream's bodies: parses them into the channel, and decides what follows a
/// dropped connection.
final class EventsTaker: ResponseBodyTaker {
    private let channel: BoundedChannel<ServerSentEvent>
    private let options: EventStreamOptions
    private let acceptable: Set<Int>
    private let state: Locked<State>

    private struct State {
        var parser: ServerSentEventParser
        /// Events parsed from the current chunk (kept, so a chunk costs no array).
        var scratch: [ServerSentEvent] = []
        /// The current attempt's body was taken (an event-stream head arrived).
        var took = false
        var linesAtHead = 0
        var failures = 0
        var head: HTTPResponse?
        /// The end marker arrived: the stream ends as a success.
        var finished = false
        /// An error reconnecting cannot fix.
        var fatal: NetworkError?
        var random = SystemRandomNumberGenerator()
    }

    init(channel: BoundedChannel<ServerSentEvent>, options: EventStreamOptions, acceptable: Set<Int>) {
        self.channel = channel
        self.options = options
        self.acceptable = acceptable
        self.state = Locked(
            State(parser: ServerSentEventParser(maxLineLength: options.maxLineLength, maxEventSize: options.maxEventSize)))
    }

    var idleTimeout: Duration? { options.idleTimeout }
    var retryForbiddenReason: String? { nil }
    var resumedBytes: Int64 { 0 }

    var lastEventID: String? { state.withLock { $0.parser.lastEventID } }
    var currentHead: HTTPResponse? { state.withLock { $0.head } }

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
            state.parser.reset()
            state.took = true
            state.linesAtHead = state.parser.linesParsed
            state.head = response
        }
        return true
    }

    func receive(_ chunk: Data) async throws(NetworkError) {
        var (events, failure) = state.withLock { state -> ([ServerSentEvent], EventStreamError?) in
            var events: [ServerSentEvent] = []
            swap(&events, &state.scratch)
            do throws(EventStreamError) {
                try state.parser.parse(chunk, into: &events)
                return (events, nil)
            } catch {
                return (events, error)
            }
        }
        defer {
            events.removeAll(keepingCapacity: true)
            state.withLock { swap(&$0.scratch, &events) }
        }
        for event in events {
            if let marker = options.endMarker, event.data == marker {
                state.withLock { $0.finished = true }
                throw .cancelled  // stops the transfer; `decision(after:)` makes it a success
            }
            try await channel.send(event)
        }
        if let failure {
            let limit: Int
            switch failure {
            case .lineTooLong(let value), .eventTooLarge(let value): limit = value
            default: limit = options.maxEventSize
            }
            let error = NetworkError.responseTooLarge(limit: limit)
            state.withLock { $0.fatal = error }
            throw error
        }
    }

    func bodyEnded() throws(NetworkError) {
        let ended = state.withLock { $0.took && !$0.finished }
        if ended { throw .connectionFailed(EventStreamError.serverEndedStream) }
    }

    func decision(after failure: NetworkError) -> TakerDecision? {
        state.withLock { state -> TakerDecision? in
            let took = state.took
            state.took = false
            if state.finished, let head = state.head { return .finish(head) }
            if let fatal = state.fatal { return .end(fatal) }
            if failure.isCancellation { return nil }
            let connectionLevel: Bool
            switch failure.name {
            case "connectionFailed", "timedOut", "offline", "transportFailed": connectionLevel = true
            default: connectionLevel = false
            }
            guard took || connectionLevel else { return nil }  // a status: the behaviors decide
            if took && state.parser.linesParsed > state.linesAtHead {
                state.failures = 0
            } else {
                state.failures += 1
            }
            if state.failures > options.maxConsecutiveFailures { return .end(failure) }
            let base = min(state.parser.reconnectionTime ?? options.reconnectDelay, options.maxRetryDelay)
            let random = Double(state.random.next() >> 11) / Double(1 << 53)
            return .reconnect(after: options.delay(base: base, failures: state.failures, random: random))
        }
    }
}
