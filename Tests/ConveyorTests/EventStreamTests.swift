@testable import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A streaming transport that plays scripted connections: each sends a head and chunks, then
/// ends, fails, or hangs until cancelled. Records every request it got.
final class ScriptedEventTransport: StreamingHTTPTransport, Sendable {
    enum Ending: Sendable { case end, fail, hang }
    struct Connection: Sendable {
        var status = 200
        var contentType = "text/event-stream"
        var chunks: [String] = []
        var ending = Ending.end
        /// Response headers besides `Content-Type`.
        var headers: [String: String] = [:]
    }

    private let script: Locked<[Connection]>
    private let seen = Locked<[HTTPRequest]>([])
    /// Yields the count of requests each time one arrives.
    let connected: AsyncStream<Int>
    private let connectedContinuation: AsyncStream<Int>.Continuation
    /// Played when the script is used up.
    private let fallback: Connection

    init(_ connections: [Connection], then fallback: Connection = Connection(status: 204)) {
        script = Locked(connections)
        self.fallback = fallback
        (connected, connectedContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    var requests: [HTTPRequest] { seen.withLock { $0 } }

    func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        let count = seen.withLock { $0.append(request); return $0.count }
        connectedContinuation.yield(count)
        let connection = script.withLock { $0.isEmpty ? fallback : $0.removeFirst() }
        if connection.status == 0 { throw URLError(.cannotConnectToHost) }
        var headers: HTTPHeaders = ["Content-Type": connection.contentType]
        if connection.status == 204 { headers = [:] }
        for (name, value) in connection.headers { headers[name] = value }
        // Like a server behind ResponseVerificationBehavior: the nonce is echoed on every answer.
        if let nonce = request.headers["X-Request-Nonce"] { headers["X-Request-Nonce"] = nonce }
        let head = HTTPResponse(status: connection.status, headers: headers, request: request)
        guard let transfer, try transfer.takesBody(of: head) else {
            return HTTPResponse(status: connection.status, headers: headers, body: Data(connection.chunks.joined().utf8), request: request)
        }
        for chunk in connection.chunks { try await transfer.receive(Data(chunk.utf8)) }
        switch connection.ending {
        case .end: return head
        case .fail: throw URLError(.networkConnectionLost)
        case .hang:
            await Stall.untilCancelled()
            throw CancellationError()
        }
    }
}

/// Waits until the task is cancelled.
enum Stall {
    static func untilCancelled() async {
        let (stream, continuation) = AsyncStream<Never>.makeStream()
        for await _ in stream {}  // an AsyncStream's iteration ends when its task is cancelled
        continuation.finish()
    }
}

/// Tells a test when a request ended: `ended` yields each ending hook's outcome.
struct EndSignal: SuccessObserving, FailureObserving {
    let ended: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    init() { (ended, continuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded) }
    var name: String { "EndSignal" }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { continuation.yield("success") }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { continuation.yield(error.name) }
}

@Suite struct EventStreamTests {
    func client(
        _ transport: some HTTPTransport, recorder: HookRecorder, clock: ImmediateClock = ImmediateClock(),
        timeoutClock: any Clock<Duration> = ContinuousClock(), signal: EndSignal = EndSignal()
    ) -> NetworkClient {
        NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/")!, transport: transport,
            configuration: .init(clock: clock, timeoutClock: timeoutClock)
        ) {
            // First, so that its ending hook runs last (response-side hooks run last to first):
            // when it signals, every other behavior's ending hook has run.
            signal
            RecordingBehavior("R", recorder: recorder)
        }
    }

    func endings(_ recorder: HookRecorder) -> [String] {
        recorder.events.filter { $0.hook == .beforeSend || $0.hook == .afterSuccess || $0.hook == .afterFailure }
            .map { "\($0.hook)" + ($0.outcome.map { "(\($0))" } ?? "") }
    }

    @Test func reconnectsWithLastEventIDAfterDropsAndEndsAt204() async throws {
        let transport = ScriptedEventTransport([
            .init(chunks: ["retry: 250\n", "id: 1\ndata: one\n\nid: 2\nda", "ta: two\n\nid: 3\ndata: cut"], ending: .fail),
            .init(chunks: ["id: 3\r\ndata: three\r\n\r\n"], ending: .end),
            .init(status: 0),
            .init(chunks: [": hello\n", "data: four\n\n"], ending: .end),
        ])
        let recorder = HookRecorder()
        let clock = ImmediateClock()
        var seen: [ServerSentEvent] = []
        for try await event in client(transport, recorder: recorder, clock: clock).events(Request<Data>(path: "/feed")) {
            seen.append(event)
        }
        #expect(seen.map(\.data) == ["one", "two", "three", "four"])
        #expect(seen.map(\.id) == ["1", "2", "3", "3"])
        let sent = transport.requests
        #expect(sent.count == 5)
        #expect(sent.map { $0.headers["Last-Event-ID"] } == [nil, "2", "3", "3", "3"])
        #expect(sent.allSatisfy { $0.headers["Accept"] == "text/event-stream" && $0.headers["Cache-Control"] == "no-cache" })
        // The server's retry: 250 ms after each drop (jittered by 20 %, never under the 250 ms
        // floor), also after the refused connection (the first failure waits the base delay).
        #expect(clock.sleeps.count == 4)
        #expect(clock.sleeps[0] >= .milliseconds(250) && clock.sleeps[0] <= .milliseconds(300))
        #expect(clock.sleeps[1] >= .milliseconds(250) && clock.sleeps[1] <= .milliseconds(300))
        #expect(clock.sleeps[2] >= .milliseconds(250) && clock.sleeps[2] <= .milliseconds(300))
        // One request: beforeSend once, afterSuccess once (the 204), an attempt per connection.
        #expect(recorder.hooks(of: "R").filter { $0 == .beforeSend }.count == 1)
        #expect(recorder.hooks(of: "R").filter { $0 == .afterSuccess }.count == 1)
        #expect(recorder.hooks(of: "R").filter { $0 == .afterFailure }.isEmpty)
        #expect(recorder.events.filter { $0.hook == .modify }.map(\.attempt) == [1, 2, 3, 4, 5])
    }

    @Test func leavingTheLoopEndsTheConnectionAndTheBehaviorsSeeCancelled() async throws {
        let transport = ScriptedEventTransport([.init(chunks: ["data: 1\n\n", "data: 2\n\n"], ending: .hang)])
        let recorder = HookRecorder()
        let signal = EndSignal()
        let events = client(transport, recorder: recorder, signal: signal).events(Request<Data>(path: "/feed"))
        for try await event in events {
            #expect(event.data == "1")
            break
        }
        var ends = signal.ended.makeAsyncIterator()
        #expect(await ends.next() == "cancelled")
        #expect(recorder.hooks(of: "R").filter { $0 == .afterFailure }.count == 1)
        #expect(transport.requests.count == 1)
    }

    @Test func cancellingTheReadingTaskEndsIt() async throws {
        let transport = ScriptedEventTransport([.init(chunks: [], ending: .hang)])
        let signal = EndSignal()
        let events = client(transport, recorder: HookRecorder(), signal: signal).events(Request<Data>(path: "/feed"))
        let reader = Task { () -> Int in
            var count = 0
            do { for try await _ in events { count += 1 } } catch {}
            return count
        }
        var connections = transport.connected.makeAsyncIterator()
        _ = await connections.next()
        reader.cancel()
        #expect(await reader.value == 0)
        var ends = signal.ended.makeAsyncIterator()
        #expect(await ends.next() == "cancelled")
    }

    @Test func aQuietConnectionIsDroppedAfterTheIdleTimeoutAndResumed() async throws {
        let timeouts = ManualClock()
        let transport = ScriptedEventTransport([
            .init(chunks: ["id: 1\ndata: one\n\n"], ending: .hang),
            .init(chunks: ["id: 2\ndata: two\n\n"], ending: .end),
        ])
        let recorder = HookRecorder()
        var options = EventStreamOptions()
        options.idleTimeout = .seconds(30)
        let events = client(transport, recorder: recorder, timeoutClock: timeouts).events(Request<Data>(path: "/feed"), options: options)
        var iterator = events.makeAsyncIterator()
        #expect(try await iterator.next()?.data == "one")
        // Idle counts only while the reader waits for the next event (the guide).
        let taker = iterator.lifetime.taker
        var reading = iterator
        let next = Task { () -> [String?] in [try await reading.next()?.data, try await reading.next()?.data] }
        while !taker.readerIsWaiting { await Task.yield() }
        await timeouts.waitForSleepers(1)
        timeouts.advance(by: .seconds(29))
        #expect(transport.requests.count == 1, "not idle yet")
        timeouts.advance(by: .seconds(2))
        #expect(try await next.value == ["two", nil])
        #expect(transport.requests.map { $0.headers["Last-Event-ID"] } == [nil, "1", "2"])
    }

    @Test func consecutiveFailuresBackOffAndEndTheStream() async throws {
        let transport = ScriptedEventTransport([], then: .init(status: 0))
        let recorder = HookRecorder()
        let clock = ImmediateClock()
        var options = EventStreamOptions()
        options.maxConsecutiveFailures = 4
        options.jitter = 0
        options.maxReconnectDelay = .seconds(5)
        await #expect {
            for try await _ in client(transport, recorder: recorder, clock: clock).events(Request<Data>(path: "/feed"), options: options) {}
        } throws: { ($0 as? NetworkError)?.name == "connectionFailed" }
        // Four failed connections in a row end it (the guide: "after maxConsecutiveFailures
        // failures in a row"); before, the fifth connection was made.
        #expect(transport.requests.count == 4)
        #expect(clock.sleeps == [.seconds(1), .seconds(2), .seconds(4)])
        #expect(endings(recorder).count == 2)
    }

    @Test func aConnectionThatEndsBeforeAnyLineCountsAsFailed() async throws {
        let transport = ScriptedEventTransport([], then: .init(chunks: [], ending: .end))
        let recorder = HookRecorder()
        var options = EventStreamOptions()
        options.maxConsecutiveFailures = 2
        await #expect {
            for try await _ in client(transport, recorder: recorder).events(Request<Data>(path: "/feed"), options: options) {}
        } throws: { ($0 as? NetworkError)?.underlying as? EventStreamError == .serverEndedStream }
        #expect(transport.requests.count == 2)
    }

    @Test func statusesAndContentTypesEndTheStreamWithTypedErrors() async throws {
        let recorder = HookRecorder()
        let missing = ScriptedEventTransport([.init(status: 404, contentType: "application/json", chunks: ["{}"])])
        await #expect(throws: NetworkError.notFound) {
            for try await _ in client(missing, recorder: recorder).events(Request<Data>(path: "/feed")) {}
        }
        let json = ScriptedEventTransport([.init(contentType: "application/json", chunks: ["{\"secret\": 1}"])])
        do {
            for try await _ in client(json, recorder: recorder).events(Request<Data>(path: "/feed")) {}
            Issue.record("a JSON response must end the stream")
        } catch let error as NetworkError {
            #expect(error.name == "decodingFailed")
            #expect(error.underlying as? EventStreamError == .notAnEventStream(contentType: "application/json"))
            #expect(!error.description.contains("secret"))
        }
        #expect(json.requests.count == 1, "not reconnected")
        let stopped = ScriptedEventTransport([.init(status: 204)])
        var count = 0
        for try await _ in client(stopped, recorder: recorder).events(Request<Data>(path: "/feed")) { count += 1 }
        #expect(count == 0)
    }

    @Test func hostileStreamsHitTheCapsInsteadOfGrowing() async throws {
        var options = EventStreamOptions()
        options.maxLineLength = 1000
        options.maxEventSize = 5000
        let endless = ScriptedEventTransport([.init(chunks: Array(repeating: String(repeating: "x", count: 300), count: 10), ending: .hang)])
        await #expect(throws: NetworkError.responseTooLarge(limit: 1000)) {
            for try await _ in client(endless, recorder: HookRecorder()).events(Request<Data>(path: "/f"), options: options) {}
        }
        let huge = ScriptedEventTransport([.init(chunks: Array(repeating: "data: " + String(repeating: "y", count: 900) + "\n", count: 10), ending: .hang)])
        await #expect(throws: NetworkError.responseTooLarge(limit: 5000)) {
            for try await _ in client(huge, recorder: HookRecorder()).events(Request<Data>(path: "/f"), options: options) {}
        }
        #expect(endless.requests.count == 1 && huge.requests.count == 1)
        // A retry: of a thousand digits is lowered to maxRetryDelay (5 minutes), then jittered
        // upward like any floor (at most a fifth more), not trusted.
        let clock = ImmediateClock()
        let patient = ScriptedEventTransport([.init(chunks: ["retry: " + String(repeating: "9", count: 1000) + "\ndata: a\n\n"])])
        for try await _ in client(patient, recorder: HookRecorder(), clock: clock).events(Request<Data>(path: "/f")) {}
        #expect(clock.sleeps.count == 1 && clock.sleeps[0] >= .seconds(300) && clock.sleeps[0] <= .seconds(360))
    }

    /// A long stream outlives its tokens: each reconnect starts a new run of attempts, so a 401
    /// after a reconnect refreshes again (once per connection, still never in a loop), and a 503
    /// after twelve reconnects is still retried by a RetryBehavior with 3 attempts.
    @Test func everyReconnectGetsItsOwnRefreshAndRetries() async throws {
        var script: [ScriptedEventTransport.Connection] = []
        for number in 1...12 { script.append(.init(chunks: ["id: \(number)\ndata: \(number)\n\n"], ending: .fail)) }
        script.insert(.init(status: 401, contentType: "application/json", chunks: ["{}"]), at: 4)
        script.insert(.init(status: 401, contentType: "application/json", chunks: ["{}"]), at: 9)
        script.append(.init(status: 503, contentType: "text/plain", chunks: ["busy"]))
        script.append(.init(chunks: ["id: 13\ndata: 13\n\n"], ending: .end))
        let transport = ScriptedEventTransport(script)
        let refreshes = Locked(0)
        let store = InMemoryTokenStore(token: "t0") { _ in
            let count = refreshes.withLock { $0 += 1; return $0 }
            return "t\(count)"
        }
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/")!, transport: transport, configuration: .init(clock: ImmediateClock())
        ) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
            AuthTokenBehavior(tokens: store, refresher: store)
        }
        var numbers: [String] = []
        for try await event in client.events(Request<Data>(path: "/feed")) { numbers.append(event.data) }
        #expect(numbers == (1...13).map(String.init))
        #expect(refreshes.withLock { $0 } == 2)
        #expect(transport.requests.map { $0.headers["Authorization"] ?? "-" }.suffix(3) == ["Bearer t2", "Bearer t2", "Bearer t2"])
        // Two 401s in one connection's run are still one refresh: no loop.
        let looping = ScriptedEventTransport([], then: .init(status: 401, contentType: "application/json", chunks: ["{}"]))
        let once = NetworkClient(baseURL: URL(string: "http://127.0.0.1:9/")!, transport: looping) {
            AuthTokenBehavior(tokens: store, refresher: store)
        }
        await #expect(throws: NetworkError.unauthorized) {
            for try await _ in once.events(Request<Data>(path: "/feed")) {}
        }
        #expect(looping.requests.count == 2)
    }

    struct Delta: Decodable, Sendable, Equatable { let text: String }

    @Test func typedEventsEndAtTheMarkerAsASuccess() async throws {
        let transport = ScriptedEventTransport([
            .init(chunks: [#"data: {"text":"Hel"}"# + "\n\n", #"data: {"text":"lo"}"# + "\n\ndata: [DONE]\n\n", "data: {\"text\":\"never\"}\n\n"], ending: .hang)
        ])
        let recorder = HookRecorder()
        var texts: [String] = []
        for try await delta in client(transport, recorder: recorder).events(Request<Data>(path: "/complete"), decoding: Delta.self, until: "[DONE]") {
            texts.append(delta.text)
        }
        #expect(texts == ["Hel", "lo"])
        #expect(recorder.hooks(of: "R").filter { $0 == .afterSuccess }.count == 1)
        #expect(recorder.hooks(of: "R").filter { $0 == .afterFailure }.isEmpty)
        #expect(transport.requests.count == 1)
        let broken = ScriptedEventTransport([.init(chunks: ["data: {\"text\": 5, \"password\": \"hunter2\"}\n\n"], ending: .hang)])
        do {
            for try await _ in client(broken, recorder: HookRecorder()).events(Request<Data>(path: "/c"), decoding: Delta.self) {}
            Issue.record("must not decode")
        } catch let error as NetworkError {
            #expect(error.name == "decodingFailed")
            #expect(!"\(error)".contains("hunter2"))
        }
    }

    /// Against the local test server: 300 numbered events over about a hundred connections that
    /// drop at random places (often mid-event), with a token that expires half-way: every event
    /// exactly once, in order, one refresh, one beforeSend, one afterSuccess.
    @Test(arguments: [UInt64(1), 2, 3])
    func survivesAHundredDropsAndOneRefreshAgainstTheServer(seed: UInt64) async throws {
        try await LocalServer.withServer { server in
            let refreshes = Locked(0)
            let store = InMemoryTokenStore(token: "t") { _ in
                refreshes.withLock { $0 += 1 }
                return "t2"
            }
            let recorder = HookRecorder()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral),
                configuration: .init(clock: ImmediateClock())
            ) {
                RecordingBehavior("R", recorder: recorder)
                AuthTokenBehavior(tokens: store, refresher: store)
            }
            let request = Request<Data>(path: "/events", query: ["count": 300, "seed": Int(seed), "token": "t", "rotate_at": 150])
            var numbers: [Int] = []
            for try await event in client.events(request) {
                numbers.append(Int(event.data) ?? -1)
                #expect(event.id == event.data)
            }
            #expect(numbers == Array(1...300), "seed \(seed)")
            #expect(refreshes.withLock { $0 } == 1)
            let attempts = recorder.events.filter { $0.hook == .modify }.count
            #expect(attempts >= 100, "only \(attempts) connections")
            #expect(recorder.hooks(of: "R").filter { $0 == .beforeSend }.count == 1)
            #expect(recorder.hooks(of: "R").filter { $0 == .afterSuccess }.count == 1)
            #expect(recorder.hooks(of: "R").filter { $0 == .afterFailure }.isEmpty)
        }
    }
}

extension EventStreamTests {
    /// Against the local server as a sticky load balancer: every stream response sets a cookie
    /// and a reconnect without it is refused (409). Each connection drops after its head, so the
    /// cookie is only ever set by a connection that failed: CookieBehavior must keep it anyway.
    @Test func aCookieSetByADroppedConnectionGoesWithTheReconnect() async throws {
        try await LocalServer.withServer { server in
            let jar = CookieJar()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral),
                configuration: .init(clock: ImmediateClock())
            ) {
                CookieBehavior(jar: jar)
            }
            let request = Request<Data>(path: "/events", query: ["count": 40, "seed": 9, "sticky": 1])
            var numbers: [Int] = []
            for try await event in client.events(request) { numbers.append(Int(event.data) ?? -1) }
            #expect(numbers == Array(1...40))
            #expect(jar.header(for: server.baseURL.appendingPathComponent("events")) == "node=a")
        }
    }

    /// A stream whose request body is a one-shot stream cannot reconnect (the body is gone): the
    /// drop ends it with `.notRetryable`, saying why, and nothing is sent again.
    @Test func aOneShotBodyEndsTheStreamAtTheFirstDropWithTheReason() async throws {
        let mock = MockTransport()
        mock.enqueue(.events("retry: 0\n", "data: one\n\n", end: .failure(URLError(.networkConnectionLost))), .status(204))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock)
        let (chunks, feed) = AsyncStream<Data>.makeStream()
        feed.yield(Data("{\"prompt\": \"hi\"}".utf8))
        feed.finish()
        var seen: [String] = []
        let error = await #expect(throws: NetworkError.self) {
            for try await event in client.events(Request<Data>(method: .post, path: "/chat", body: .stream(chunks))) {
                seen.append(event.data)
            }
        }
        #expect(seen == ["one"])
        #expect(error?.name == "notRetryable")
        #expect(error?.after?.name == "connectionFailed")
        #expect(error?.reason?.contains("one-shot") == true)
        #expect(mock.requests.count == 1)
    }

    /// Docs/EventStreams.md's testing example, run (the docs test only compiles it).
    @Test func theGuidesMockTransportExampleRuns() async throws {
        let mock = MockTransport()
        mock.enqueue(
            .events("retry: 0\n", "id: 1\ndata: one\n\n", "id: 2\ndata: tw", end: .failure(URLError(.networkConnectionLost))),
            .events("id: 2\ndata: two\n\n"),
            .status(204))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock)
        var seen: [String] = []
        for try await event in client.events(Request<Data>(path: "/feed")) { seen.append(event.data) }
        #expect(seen == ["one", "two"])
        #expect(mock.requests.map { $0.headers["Last-Event-ID"] } == [nil, "1", "2"])
    }

    /// A logging behavior on the chain sees each connection, never an event's data.
    @Test func eventDataNeverReachesTheLog() async throws {
        let sink = CapturingLogSink()
        let mock = MockTransport()
        mock.enqueue(.events("data: secret-payload-7731\n\n", end: .failure(URLError(.networkConnectionLost))), .status(204))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock) {
            LoggingBehavior(sink: sink, bodyPreviewLimit: 4096)
        }
        var seen: [ServerSentEvent] = []
        for try await event in client.events(Request<Data>(path: "/feed")) { seen.append(event) }
        #expect(seen.map(\.data) == ["secret-payload-7731"])
        #expect(!sink.entries.isEmpty)
        // Every message and metadata value, and every entry's own description.
        let logged = sink.text + sink.entries.map { "\($0)" }.joined()
        #expect(!logged.contains("secret-payload-7731"), "\(logged)")
        #expect(!"\(seen)".contains("secret-payload-7731"))
    }
}

/// Keeps every log line as text.

extension EventStreamTests {
    /// An app reads on the main actor: events come in order there too, and the loop's isolation
    /// is kept (`next(isolation:)`).
    @MainActor @Test func readsOnTheMainActor() async throws {
        let mock = MockTransport()
        mock.enqueue(.events("data: 1\n\n", "data: 2\n\ndata: 3\n\n"), .status(204))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock)
        var seen: [String] = []
        for try await event in client.events(Request<Data>(path: "/feed")) {
            MainActor.assertIsolated()
            seen.append(event.data)
        }
        #expect(seen == ["1", "2", "3"])
    }
}
