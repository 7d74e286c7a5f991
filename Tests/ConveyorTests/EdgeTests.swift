import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A transport that ignores cancellation, and does not claim to honor it.
struct StuckTransport: HTTPTransport {
    let stuck: Stuck
    let returned = Stuck()
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        await stuck.wait()
        Task { await returned.wait() }  // counts that the abandoned call came back
        return HTTPResponse(status: 200, request: request)
    }
}

/// A transport that records the task it ran in.
struct TaskRecordingTransport: HTTPTransport {
    let cooperative: Bool
    let tasks = Locked<[Int]>([])
    var honorsCancellation: Bool { cooperative }
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let task = withUnsafeCurrentTask { $0?.hashValue } ?? 0
        tasks.withLock { $0.append(task) }
        return HTTPResponse(status: 200, request: request)
    }
}

/// A behavior whose chosen hook gets stuck, ignoring cancellation.
struct StuckHookBehavior: HeaderAdding, RequestModifying, ResponseValidating, RetryDeciding {
    let hook: RequestHook
    let stuck: Stuck
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        if hook == .additionalHeaders { await stuck.wait() }
        return [:]
    }
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        if hook == .modify { await stuck.wait() }
    }
    func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        if hook == .validate { await stuck.wait() }
    }
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        if hook == .retryDecision { await stuck.wait() }
        return .doNotRetry
    }
}

/// "success", or the description of the `NetworkError` the body threw.
func outcome(_ body: () async throws -> Void) async -> String {
    do {
        try await body()
        return "success"
    } catch {
        return (error as? NetworkError).map(\.description) ?? "not a NetworkError: \(type(of: error))"
    }
}

/// Contract rule 10: nothing waits forever on the outside world.
@Suite struct DeadlineAndAbandonmentTests {
    let base = URL(string: "http://127.0.0.1:9")!

    @Test func aTimeoutAbandonsATransportThatIgnoresCancellation() async {
        let stuck = Stuck()
        let transport = StuckTransport(stuck: stuck)
        let clock = ManualClock()
        let recorder = HookRecorder()
        let client = NetworkClient(
            baseURL: base, transport: transport, configuration: .init(timeout: .milliseconds(100), clock: clock, timeoutClock: clock)
        ) { RecordingBehavior("spy", recorder: recorder) }
        let task = Task { await outcome { try await client.send(Request<Void>(path: "/x")) } }
        await stuck.entered(1)
        await clock.waitForSleepers(1)
        clock.advance(by: .milliseconds(100))
        // The transport is still stuck, and the caller has its answer.
        #expect(await task.value == NetworkError.timedOut.description)
        #expect(stuck.enteredCount == 1 && transport.returned.enteredCount == 0)
        #expect(recorder.hooks(of: "spy") == [.additionalHeaders, .modify, .beforeSend, .retryDecision, .afterFailure])
        stuck.release()
        await transport.returned.entered(1)
        #expect(recorder.events.count == 5, "no hook after the outcome")
    }

    @Test func cancellationAbandonsATransportThatIgnoresIt() async {
        let stuck = Stuck()
        defer { stuck.release() }
        let recorder = HookRecorder()
        let client = NetworkClient(baseURL: base, transport: StuckTransport(stuck: stuck)) {
            RecordingBehavior("spy", recorder: recorder)
        }
        let task = Task { await outcome { try await client.send(Request<Void>(path: "/x")) } }
        await stuck.entered(1)
        task.cancel()
        #expect(await task.value == NetworkError.cancelled.description)
        #expect(recorder.hooks(of: "spy") == [.additionalHeaders, .modify, .beforeSend, .afterFailure])
    }

    @Test func aTransportThatHonorsCancellationIsCalledInTheCallersTask() async throws {
        for cooperative in [true, false] {
            let transport = TaskRecordingTransport(cooperative: cooperative)
            let client = NetworkClient(baseURL: base, transport: transport)
            let caller = withUnsafeCurrentTask { $0?.hashValue } ?? -1
            try await client.send(Request<Void>(path: "/x"))
            // Called directly when it honors cancellation (no task per request); otherwise in a
            // task of its own that can be abandoned.
            #expect((transport.tasks.withLock { $0 } == [caller]) == cooperative)
        }
    }

    @Test(arguments: [RequestHook.additionalHeaders, .modify, .validate, .retryDecision])
    func aHookThatIgnoresCancellationIsAbandonedAtTheDeadline(hook: RequestHook) async {
        let stuck = Stuck()
        let clock = ManualClock()
        let recorder = HookRecorder()
        let mock = MockTransport()
        mock.stub(nil, "/x", reply: .status(hook == .retryDecision ? 503 : 200))
        let client = NetworkClient(
            baseURL: base, transport: mock, configuration: .init(timeout: .seconds(1), clock: clock, timeoutClock: clock)
        ) {
            RecordingBehavior("outer", recorder: recorder)
            StuckHookBehavior(hook: hook, stuck: stuck)
            RecordingBehavior("inner", recorder: recorder)
        }
        let task = Task { await outcome { try await client.send(Request<Void>(path: "/x")) } }
        await stuck.entered(1)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(1))
        #expect(await task.value == NetworkError.timedOut.description)
        let outer = recorder.hooks(of: "outer")
        switch hook {
        case .additionalHeaders, .modify:
            // The first attempt was never prepared: nothing was sent, no once-per-request hook.
            #expect(!outer.contains(.beforeSend) && !outer.contains(.afterFailure))
        default:
            #expect(outer.filter { $0 == .beforeSend }.count == 1)
            #expect(outer.last == .afterFailure && recorder.hooks(of: "inner").last == .afterFailure)
        }
        let before = recorder.events.count
        stuck.release()
        for _ in 0..<200 { await Task.yield() }
        #expect(recorder.events.count == before, "an abandoned step called a hook after the outcome")
    }

    @Test func aZeroOrNegativeTimeoutSendsNothing() async {
        for timeout in [Duration.zero, .seconds(-5)] {
            let mock = MockTransport()
            mock.stub(nil, "/x", reply: .status(200))
            let client = NetworkClient(baseURL: base, transport: mock, configuration: .init(timeout: timeout))
            #expect(await outcome { try await client.send(Request<Void>(path: "/x")) } == NetworkError.timedOut.description)
            #expect(mock.requests.isEmpty)
        }
    }
}

/// Durations that would overflow a clock are clamped to 100 years, never trapping.
@Suite struct HugeDurationTests {
    let base = URL(string: "http://127.0.0.1:9")!

    @Test(arguments: [Duration.seconds(Int64.max), .seconds(10_000_000_000_000_000), .seconds(3_155_760_001)])
    func aHugeTimeoutWorksLikeNoTimeout(timeout: Duration) async throws {
        let mock = MockTransport()
        mock.stub(nil, "/x", reply: .text("ok"))
        let client = NetworkClient(baseURL: base, transport: mock, configuration: .init(timeout: timeout))
        #expect(try await client.send(Request<String>(path: "/x")) == "ok")
    }

    @Test func aHugeTimeoutReachesURLSessionClamped() async throws {
        try await LocalServer.withServer { server in
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral),
                configuration: .init(timeout: .seconds(Int64.max)))
            let text = try await client.send(Request<String>(path: "/text"))
            #expect(text == "héllo wörld")
        }
    }

    @Test func aHugeRetryAfterWaitsAtMostTheMaximum() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(503, headers: ["Retry-After": "9223372036854775807"]), .status(200))
        let clock = ImmediateClock()
        let client = NetworkClient(baseURL: base, transport: mock, configuration: .init(clock: clock)) {
            RetryBehavior(RetryPolicy(jitter: .none, maxRetryAfter: .seconds(Int64.max)))
        }
        try await client.send(Request<Void>(path: "/x"))
        #expect(clock.sleeps == [Duration.conveyorMaximum])
    }

    @Test func backoffArithmeticNeverTraps() {
        let policies = [
            RetryPolicy(baseDelay: .seconds(Int64.max), multiplier: 1e300, maxDelay: .seconds(Int64.max), jitter: .none),
            RetryPolicy(baseDelay: .seconds(1), multiplier: .infinity, maxDelay: .seconds(Int64.max), jitter: .none),
            RetryPolicy(baseDelay: .seconds(1), multiplier: .nan, maxDelay: .seconds(Int64.max), jitter: .none),
            RetryPolicy(jitter: Jitter { _ in .seconds(Int64.max) }),
            RetryPolicy(jitter: Jitter { _ in .seconds(-7) }),
        ]
        for policy in policies {
            for retry in [1, 2, 10, 64, 1000, Int.max] {
                let delay = policy.delay(beforeRetry: retry)
                #expect(delay >= .zero && delay <= Duration.conveyorMaximum)
            }
        }
        for value in ["9223372036854775807", "99999999999999999999999999999", "1e300"] {
            if let delay = RetryAfter.delay(from: value, now: Date()) { #expect(delay <= Duration.conveyorMaximum) }
        }
    }

    /// A clock that says when someone starts sleeping on it, then sleeps on the real clock.
    struct AnnouncingClock: Clock {
        let inner = ContinuousClock()
        let sleeping = Stuck()
        var now: ContinuousClock.Instant { inner.now }
        var minimumResolution: Duration { inner.minimumResolution }
        func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws {
            Task { await sleeping.wait() }
            try await inner.sleep(until: deadline, tolerance: tolerance)
        }
    }

    struct RetryForever: RetryDeciding {
        func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
            -> RetryDecision
        {
            .retry(after: .seconds(Int64.max))
        }
    }

    @Test func aHugeRetryDelayOnTheRealClockWaitsUntilCancelled() async {
        let mock = MockTransport()
        mock.stub(nil, "/x", reply: .status(503))
        let clock = AnnouncingClock()
        let client = NetworkClient(baseURL: base, transport: mock, configuration: .init(clock: clock)) { RetryForever() }
        let task = Task { await outcome { try await client.send(Request<Void>(path: "/x")) } }
        await clock.sleeping.entered(1)  // a 100-year backoff wait has started, and did not trap
        task.cancel()
        #expect(await task.value == NetworkError.cancelled.description)
        clock.sleeping.release()
    }
}

/// A base URL that cannot make request URLs fails every relative request clearly.
@Suite struct BaseURLTests {
    @Test(arguments: [
        "https://api.example.com/v1?api_key=SECRET-1", "https://api.example.com/v1#SECRET-2",
        "https://user:SECRET-3@api.example.com/v1?x=1", "ftp://api.example.com/v1", "api.example.com/v1",
    ])
    func aBaseURLThatCannotMakeRequestURLsIsRejected(base: String) throws {
        let client = NetworkClient(baseURL: try #require(URL(string: base)), transport: MockTransport())
        do throws(NetworkError) {
            _ = try client.makeHTTPRequest(Request<Void>(path: "/movies"))
            Issue.record("\(base) was accepted")
        } catch {
            guard case .invalidRequest = error, let reason = error.reason else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(reason.contains("base URL"))
            #expect(!error.description.contains("SECRET"))
        }
    }

    @Test func aPlainBaseURLStillWorks() throws {
        let client = NetworkClient(baseURL: try #require(URL(string: "https://api.example.com/v1/")), transport: MockTransport())
        let url = try client.makeHTTPRequest(Request<Void>(path: "/movies", query: ["page": 2])).url
        #expect(url.absoluteString == "https://api.example.com/v1/movies?page=2")
    }
}

/// The client checks every body's size, whatever the transport.
@Suite struct ResponseSizeTests {
    @Test func aBodyOverTheLimitFailsWithAnyTransport() async throws {
        let mock = MockTransport()
        mock.enqueue(.text("0123456789"), .text("0123456789X"))
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9")!, transport: mock, configuration: .init(maxResponseSize: 10))
        #expect(try await client.send(Request<String>(path: "/x")) == "0123456789")
        #expect(
            await outcome { _ = try await client.send(Request<String>(path: "/x")) }
                == NetworkError.responseTooLarge(limit: 10).description)
    }
}
