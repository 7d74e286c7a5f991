import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// What an event stream gets from each standard behavior, as README's behaviors table says: one
/// stream whose connections meet a 401, a drop, a 503 and a server-ended response, with every
/// standard behavior on the client.
@Suite struct EventStreamBehaviorTests {
    final class Counter: ActivityCounter {
        let moves = Locked<[Int]>([])
        func increment() async { moves.withLock { $0.append(1) } }
        func decrement() async { moves.withLock { $0.append(-1) } }
    }

    final class Tasks: BackgroundTaskRunner {
        let state = Locked<(begun: Int, ended: Int)>((0, 0))
        func beginTask(named name: String, onExpiration: @escaping @Sendable () -> Void) async -> BackgroundTaskID? {
            state.withLock { $0.begun += 1; return BackgroundTaskID(rawValue: $0.begun) }
        }
        func endTask(_ id: BackgroundTaskID) async { state.withLock { $0.ended += 1 } }
    }

    struct Lines: LogSink {
        let lines: Locked<[String]>
        var isEnabled: Bool { true }
        func write(_ entry: LogEntry) { lines.withLock { $0.append("\(entry.message) \(entry.metadata)") } }
    }

    struct Attempts: MetricsSink {
        let statuses: Locked<[Int?]>
        func record(_ metrics: AttemptMetrics) { statuses.withLock { $0.append(metrics.status) } }
    }

    actor Storage: CacheStorage {
        var stores = 0
        var lookups = 0
        func entry(for key: String) -> CachedResponse? {
            lookups += 1
            return nil
        }
        func store(_ entry: CachedResponse, for key: String) { stores += 1 }
        func removeEntry(for key: String) {}
        func removeAll() {}
    }

    @Test func everyStandardBehaviorAppliesToEachConnectionOrToTheWholeStream() async throws {
        let transport = ScriptedEventTransport([
            .init(status: 401),
            .init(chunks: ["id: 1\ndata: secret-one\n\n", "id: 2\ndata: secret-cut"], ending: .fail, headers: ["Set-Cookie": "session=abc; Path=/"]),
            .init(status: 503),
            .init(chunks: ["id: 2\ndata: secret-two\n\n"], ending: .end),
        ])
        let counter = Counter()
        let tasks = Tasks()
        let lines = Locked<[String]>([])
        let attempts = Locked<[Int?]>([])
        let storage = Storage()
        let refreshes = Locked(0)
        let tokens = InMemoryTokenStore(token: "stale") { _ in
            refreshes.withLock { $0 += 1 }
            return "fresh"
        }
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/")!, transport: transport, configuration: .init(clock: ImmediateClock())
        ) {
            HeadersBehavior(["X-App": "feed"])
            AuthTokenBehavior(tokens: tokens, refresher: tokens)
            ActivityCounterBehavior(counter: counter)
            BackgroundTaskBehavior(runner: tasks)
            RetryBehavior(RetryPolicy(maxAttempts: 3, baseDelay: .zero, jitter: .none))
            IdempotencyKeyBehavior(methods: [.get])
            LoggingBehavior(sink: Lines(lines: lines), bodyPreviewLimit: 4096)
            MetricsBehavior(sink: Attempts(statuses: attempts))
            ResponseVerificationBehavior()
            CacheBehavior(storage: storage)
            DeduplicationBehavior()
            CookieBehavior()
        }
        var seen: [String] = []
        for try await event in client.events(Request<Data>(path: "/feed")) { seen.append(event.data) }
        #expect(seen == ["secret-one", "secret-two"])

        // Five connections: the 401, its retry with the fresh token (dropped), the 503, its retry, the 204.
        let sent = transport.requests
        #expect(sent.count == 5)
        // Per connection: headers, the current token, cookies, a fresh nonce, the same key.
        #expect(sent.allSatisfy { $0.headers["X-App"] == "feed" })
        #expect(sent.map { $0.headers["Authorization"] } == ["Bearer stale"] + Array(repeating: "Bearer fresh", count: 4))
        #expect(refreshes.withLock { $0 } == 1)
        #expect(sent.map { $0.headers["Cookie"] } == [nil, nil, "session=abc", "session=abc", "session=abc"])
        let nonces = sent.compactMap { $0.headers["X-Request-Nonce"] }
        #expect(nonces.count == 5 && Set(nonces).count == 5)
        let keys = sent.compactMap { $0.headers["Idempotency-Key"] }
        #expect(keys.count == 5 && Set(keys).count == 1)
        #expect(sent.map { $0.headers["Last-Event-ID"] } == [nil, nil, "1", "1", "2"])
        // Per attempt: metrics for each connection.
        #expect(attempts.withLock { $0 } == [401, 200, 503, 200, 204])
        // Per request: the activity counter and the background task once for the whole stream.
        #expect(counter.moves.withLock { $0 } == [1, -1])
        #expect(tasks.state.withLock { $0.begun == 1 && $0.ended == 1 })
        // The cache neither answers nor keeps a stream; event data never in a log line (the body preview included).
        let (lookups, stores) = (await storage.lookups, await storage.stores)
        #expect(lookups == 0 && stores == 0)
        let logged = lines.withLock { $0 }
        #expect(logged.filter { $0.hasPrefix("→") }.count == 5)  // a line per connection
        #expect(logged.filter { $0.hasPrefix("←") }.count == 1)  // and one for the end
        #expect(!logged.contains { $0.contains("secret") || $0.contains("fresh") || $0.contains("stale") || $0.contains("abc") })
    }

    /// Each connection's answer is checked: a reconnect answered by a page that does not echo the
    /// nonce (a captive portal's) ends the stream with the verification's error.
    @Test func verificationChecksEveryConnection() async throws {
        let transport = ScriptedEventTransport([
            .init(chunks: ["retry: 0\n", "data: one\n\n"], ending: .fail)
        ])
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/")!, transport: NonceDroppingTransport(wrapping: transport, fromRequest: 2)
        ) {
            ResponseVerificationBehavior()
        }
        var seen: [String] = []
        let error = await #expect(throws: NetworkError.self) {
            for try await event in client.events(Request<Data>(path: "/feed")) { seen.append(event.data) }
        }
        #expect(seen == ["one"])
        #expect(error?.name == "behaviorFailed")
        #expect(error?.underlying as? ResponseVerificationError == .nonceMismatch)
        #expect(transport.requests.count == 2)
    }

    /// Passes requests on, and from the `fromRequest`-th on answers without the nonce echo.
    struct NonceDroppingTransport: StreamingHTTPTransport {
        let wrapping: ScriptedEventTransport
        let fromRequest: Int
        func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
            var request = request
            if wrapping.requests.count + 1 >= fromRequest { request.headers.remove(name: "X-Request-Nonce") }
            return try await wrapping.send(request, transfer: transfer)
        }
        func send(_ request: HTTPRequest) async throws -> HTTPResponse { try await send(request, transfer: nil) }
    }

    /// Two readers of the same stream are two connections: de-duplication never shares one.
    @Test func deduplicationGivesEachReaderItsOwnConnection() async throws {
        let transport = ScriptedEventTransport([], then: .init(chunks: ["data: tick\n\n"], ending: .hang))
        let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:9/")!, transport: transport) {
            DeduplicationBehavior()
        }
        let bothRead = Locked(0)
        let (ready, readyContinuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .unbounded)
        let releases = (0..<2).map { _ in AsyncStream<Void>.makeStream(bufferingPolicy: .unbounded) }
        try await withThrowingTaskGroup(of: String?.self) { group in
            for (release, _) in releases {
                group.addTask {
                    var first: String?
                    for try await event in client.events(Request<Data>(path: "/feed")) {
                        first = event.data
                        readyContinuation.yield()
                        for await _ in release { break }  // both readers hold a connection at once
                        break
                    }
                    return first
                }
            }
            var readers = 0
            for await _ in ready {
                readers += 1
                if readers == 2 { break }
            }
            bothRead.withLock { $0 = readers }
            for (_, continuation) in releases { continuation.yield() }
            var firsts: [String?] = []
            for try await first in group { firsts.append(first) }
            #expect(firsts == ["tick", "tick"])
        }
        #expect(bothRead.withLock { $0 } == 2)
        #expect(transport.requests.count == 2)
    }
}
