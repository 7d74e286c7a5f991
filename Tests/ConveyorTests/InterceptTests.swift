import Conveyor
import ConveyorTesting
import Foundation
import Testing

/// Answers every attempt itself, with a status; the transport is never reached.
struct Answering: AttemptIntercepting {
    let status: Int
    let body: String
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        HTTPResponse(status: status, body: Data(body.utf8), request: request)
    }
}

/// Records the order in which `intercept` members see the attempt and its response, and tags
/// the request on its way in.
struct Layer: AttemptIntercepting {
    let label: String
    let log: Log
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        log.append("\(label) in")
        var tagged = request
        tagged.headers.add(name: "X-Layers", value: label)
        let response = try await next(tagged)
        log.append("\(label) out \(response.status)")
        return response
    }
}

/// Turns a 304 into the stored 200, as a revalidating cache does.
struct NotModifiedToStored: AttemptIntercepting {
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        let response = try await next(request)
        guard response.status == 304 else { return response }
        return HTTPResponse(status: 200, body: Data("stored".utf8), request: request)
    }
}

/// Throws in `intercept`, something that is not a `NetworkError`, or a `NetworkError`.
struct ThrowingInterceptor: AttemptIntercepting {
    struct Broken: Error {}
    let error: any Error
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        throw error
    }
}

/// Calls `next` twice.
struct Twice: AttemptIntercepting {
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        _ = try await next(request)
        return try await next(request)
    }
}

/// A thread-safe list of lines.
final class Log: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

/// A tiny lock (the test target supports macOS 13, before `Synchronization.Mutex`).
final class Mutex<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

@Suite struct InterceptTests {
    let api = URL(string: "https://api.test")!

    @Test func anAnswerNeverReachesTheTransportAndIsJudgedLikeAResponse() async throws {
        let mock = MockTransport(baseURL: api)  // no reply queued: a transport call would fail
        let recorder = HookRecorder()
        let client = NetworkClient(baseURL: api, transport: mock) {
            RecordingBehavior("spy", recorder: recorder)
            Answering(status: 200, body: "from the behavior")
        }
        #expect(try await client.send(Request<String>(path: "/a")) == "from the behavior")
        #expect(mock.requests.isEmpty)
        #expect(recorder.hooks(of: "spy").contains(.validate))
        #expect(recorder.hooks(of: "spy").last == .afterSuccess)

        let notFound = NetworkClient(baseURL: api, transport: mock) { Answering(status: 404, body: "") }
        await #expect(throws: NetworkError.notFound) {
            try await notFound.send(Request<Void>(path: "/b"))
        }
    }

    @Test func membersNestFirstOutermostWithTheRequestsOwnInside() async throws {
        let log = Log()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock) {
            Layer(label: "client1", log: log)
            Layer(label: "client2", log: log)
        }
        let request = Request<String>(path: "/nest").adding(Layer(label: "own", log: log))
        _ = try await client.send(request)
        #expect(log.all == ["client1 in", "client2 in", "own in", "own out 200", "client2 out 200", "client1 out 200"])
        #expect(mock.requests.first?.headers.values(for: "X-Layers") == ["client1", "client2", "own"])
    }

    @Test func aMemberCanReplaceTheTransportsResponse() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(304))
        let client = NetworkClient(baseURL: api, transport: mock) { NotModifiedToStored() }
        #expect(try await client.send(Request<String>(path: "/c")) == "stored")
    }

    @Test func errorsThatAreNotNetworkErrorsNameTheBehaviorAndTheHook() async throws {
        let client = NetworkClient(baseURL: api, transport: MockTransport(baseURL: api)) {
            ThrowingInterceptor(error: ThrowingInterceptor.Broken())
        }
        do throws(NetworkError) {
            try await client.send(Request<Void>(path: "/d"))
            Issue.record("expected behaviorFailed")
        } catch {
            guard case .behaviorFailed = error, let behavior = error.behavior, let hook = error.hook, let underlying = error.underlying else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(behavior == "ThrowingInterceptor" && hook == .intercept && underlying is ThrowingInterceptor.Broken)
        }
    }

    @Test func aNetworkErrorPassesThroughAndCanBeRetried() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("second time"))
        let attempts = Mutex(0)
        struct OfflineOnce: AttemptIntercepting {
            let attempts: Mutex<Int>
            func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext)
                async throws -> HTTPResponse
            {
                let first = attempts.withLock { count -> Bool in
                    count += 1
                    return count == 1
                }
                if first { throw NetworkError.timedOut }  // transient: RetryBehavior retries it
                return try await next(request)
            }
        }
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 2))
            OfflineOnce(attempts: attempts)
        }
        #expect(try await client.send(Request<String>(path: "/e")) == "second time")
        #expect(attempts.withLock { $0 } == 2)

        let failing = NetworkClient(baseURL: api, transport: mock) { ThrowingInterceptor(error: NetworkError.offline) }
        await #expect(throws: NetworkError.offline) { try await failing.send(Request<Void>(path: "/f")) }
    }

    @Test func eachCallOfNextIsOneExchange() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("one"), .text("two"))
        let client = NetworkClient(baseURL: api, transport: mock) { Twice() }
        #expect(try await client.send(Request<String>(path: "/g")) == "two")
        #expect(mock.requests.count == 2)
    }

    @Test func aCombinedBehaviorInterceptsWithItsMembers() async throws {
        let log = Log()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("ok"))
        let combined = CombinedRequestBehavior {
            Layer(label: "a", log: log)
            Layer(label: "b", log: log)
        }
        let client = NetworkClient(baseURL: api, transport: mock) { combined }
        _ = try await client.send(Request<String>(path: "/h"))
        #expect(log.all == ["a in", "b in", "b out 200", "a out 200"])
    }

    @Test func aTimeoutAbandonsAnInterceptorThatIgnoresItAndTheTransportIsNeverReached() async throws {
        let stuck = AsyncStream<Void>.makeStream()
        struct Stuck: AttemptIntercepting {
            let gate: AsyncStream<Void>
            func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext)
                async throws -> HTTPResponse
            {
                for await _ in gate { break }  // ignores cancellation: waits for the gate
                return try await next(request)
            }
        }
        let timeouts = ManualClock()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("too late"))
        let client = NetworkClient(
            baseURL: api, transport: mock, configuration: .init(timeout: .seconds(5), timeoutClock: timeouts)
        ) { Stuck(gate: stuck.stream) }
        let task = Task { () async throws -> String in try await client.send(Request<String>(path: "/i")) }
        await timeouts.waitForSleepers(1)
        timeouts.advance(by: .seconds(5))
        await #expect(throws: NetworkError.timedOut) { try await task.value }
        stuck.continuation.yield()  // the abandoned interceptor goes on and calls next
        stuck.continuation.finish()
        for _ in 0..<50 { await Task.yield() }
        #expect(mock.requests.isEmpty)
    }
}
