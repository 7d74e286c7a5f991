import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `ChaosTransport`: seeded, exact, and composed with the retry budget and the circuit breaker.
@Suite struct ChaosTransportTests {
    let api = URL(string: "https://api.test/")!

    /// What one attempt met, as the caller of the transport sees it.
    enum Outcome: Hashable {
        case fault
        case answer(Int)
        case passed(Int)
    }

    /// A mock that answers 200 to every request.
    static func upstream(clock: any Clock<Duration> = ContinuousClock()) -> MockTransport {
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/", reply: .status(200))
        mock.stub(nil, "/movie", reply: .status(200))
        mock.stub(nil, "/flaky", reply: .status(200))
        return mock
    }

    /// Sends `count` attempts one after another and says what each met.
    static func outcomes(_ chaos: ChaosTransport, count: Int, path: String = "/") async -> [Outcome] {
        var outcomes: [Outcome] = []
        for _ in 0..<count {
            do {
                let response = try await chaos.send(HTTPRequest(url: URL(string: "https://api.test\(path)")!))
                // The mock answers 200; an injected answer here is 503.
                outcomes.append(response.status == 503 ? .answer(503) : .passed(response.status))
            } catch {
                outcomes.append(.fault)
            }
        }
        return outcomes
    }

    /// attempts, delayed, faults, answers, passed through.
    static func numbers(_ counts: ChaosTransport.Counts) -> [Int] {
        [counts.attempts, counts.delayed, counts.faults, counts.answers, counts.passedThrough]
    }

    static func chaos(
        _ wrapped: any HTTPTransport, seed: UInt64, fault: Double = 0.2, answer: Double = 0.1,
        latency: Double = 0, clock: any Clock<Duration> = ImmediateClock()
    ) -> ChaosTransport {
        ChaosTransport(
            wrapping: wrapped, seed: seed, fault: .init(rate: fault), latency: .init(rate: latency, delay: .seconds(2)),
            answer: .init(rate: answer), clock: clock)
    }

    // MARK: - Determinism and rates

    @Test func theSameSeedGivesTheSameChaosAndAnotherSeedOther() async {
        let first = await Self.outcomes(Self.chaos(Self.upstream(), seed: 7), count: 200)
        let again = await Self.outcomes(Self.chaos(Self.upstream(), seed: 7), count: 200)
        let other = await Self.outcomes(Self.chaos(Self.upstream(), seed: 8), count: 200)
        #expect(first == again)
        #expect(first != other)
        #expect(first.contains(.fault) && first.contains(.answer(503)) && first.contains(.passed(200)))
    }

    /// The exact sequence, computed by an independent SplitMix64 (Tests/Support): three numbers an
    /// attempt (latency, fault, answer), each a uniform value of 53 bits compared with the rate.
    @Test func theChaosIsTheSeededGeneratorsAndTheRatesHoldOver2000Attempts() async {
        let seed: UInt64 = 0xC0FFEE
        let (faultRate, answerRate, latencyRate) = (0.3, 0.1, 0.25)
        let mock = Self.upstream()
        let clock = ImmediateClock()
        let chaos = Self.chaos(
            mock, seed: seed, fault: faultRate, answer: answerRate, latency: latencyRate, clock: clock)
        let seen = await Self.outcomes(chaos, count: 2_000)

        var model = SplitMix64(state: seed)
        func uniform() -> Double { Double(model.next() >> 11) * 0x1.0p-53 }
        var expected: [Outcome] = []
        var delays = 0
        for _ in 0..<2_000 {
            let (delay, fault, answer) = (uniform() < latencyRate, uniform() < faultRate, uniform() < answerRate)
            if delay { delays += 1 }
            expected.append(fault ? .fault : answer ? .answer(503) : .passed(200))
        }
        #expect(seen == expected)

        let counts = chaos.counts
        #expect(counts.attempts == 2_000)
        #expect(counts.faults == expected.filter { $0 == .fault }.count)
        #expect(counts.answers == expected.filter { $0 == .answer(503) }.count)
        #expect(counts.delayed == delays)
        #expect(clock.sleeps == Array(repeating: .seconds(2), count: delays))
        // A sanity bound on the generator: within 4 standard deviations of each rate (faults
        // 600 ± 82; answers among the 70 % not faulted, 140 ± 46; delays 500 ± 78).
        #expect(abs(counts.faults - 600) <= 82, "\(counts)")
        #expect(abs(counts.answers - 140) <= 46, "\(counts)")
        #expect(abs(counts.delayed - 500) <= 78, "\(counts)")
    }

    @Test func changingOneRateNeverMovesTheOthers() async {
        let few = Self.chaos(Self.upstream(), seed: 3, fault: 0.2, answer: 0, latency: 0.1)
        let many = Self.chaos(Self.upstream(), seed: 3, fault: 0.2, answer: 0.5, latency: 0.1)
        let a = await Self.outcomes(few, count: 300)
        let b = await Self.outcomes(many, count: 300)
        // The same attempts fault and wait; answers only replace some that passed.
        #expect(a.indices.filter { a[$0] == .fault } == b.indices.filter { b[$0] == .fault })
        #expect(few.counts.delayed == many.counts.delayed)
        #expect(many.counts.answers > 0)
    }

    // MARK: - The upstream sees fewer requests

    @Test func aFaultOrAnAnswerNeverCallsTheWrappedTransport() async {
        let mock = Self.upstream()
        let chaos = Self.chaos(mock, seed: 11, fault: 0.4, answer: 0.3)
        _ = await Self.outcomes(chaos, count: 500)
        let counts = chaos.counts
        #expect(counts.faults > 0 && counts.answers > 0)
        #expect(mock.requests.count == counts.passedThrough)
        #expect(counts.faults + counts.answers + counts.passedThrough == counts.attempts)
    }

    @Test func anInjectedAnswerCarriesItsHeadersAndBody() async throws {
        let chaos = ChaosTransport(
            wrapping: Self.upstream(), seed: 1,
            answer: .init(rate: 1, reply: .text("slow down", status: 429, headers: ["Retry-After": "3"])))
        let response = try await chaos.send(HTTPRequest(url: api))
        #expect(response.status == 429)
        #expect(response.headers["Retry-After"] == "3")
        #expect(String(decoding: response.body, as: UTF8.self) == "slow down")
    }

    @Test func aCustomFaultIsThrownAsGiven() async {
        struct Boom: Error, Equatable {}
        let chaos = ChaosTransport(wrapping: Self.upstream(), seed: 1, fault: .init(rate: 1, error: Boom()))
        await #expect(throws: Boom()) { _ = try await chaos.send(HTTPRequest(url: api)) }
    }

    // MARK: - Latency on an injected clock

    @Test func latencyWaitsOnTheInjectedClockThenPassesThrough() async throws {
        let clock = ManualClock()
        let mock = Self.upstream()
        let chaos = ChaosTransport(
            wrapping: mock, seed: 5, latency: .init(rate: 1, delay: .seconds(30)), clock: clock)
        let request = HTTPRequest(url: api)
        let task = Task { try await chaos.send(request).status }
        await clock.waitForSleepers(1)
        #expect(mock.requests.isEmpty)  // still waiting: nothing sent yet
        #expect(chaos.counts.delayed == 1)
        clock.advance(by: .seconds(30))
        #expect(try await task.value == 200)
        #expect(mock.requests.count == 1)
    }

    @Test func aCancelledWaitEndsTheAttempt() async {
        let clock = ManualClock()
        let mock = Self.upstream()
        let chaos = ChaosTransport(wrapping: mock, seed: 5, latency: .init(rate: 1, delay: .seconds(30)), clock: clock)
        let request = HTTPRequest(url: api)
        let task = Task { try await chaos.send(request) }
        await clock.waitForSleepers(1)
        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.value }
        #expect(mock.requests.isEmpty)
    }

    // MARK: - Scope and the switch

    @Test func onlyRequestsInScopeMeetChaos() async {
        let mock = Self.upstream()
        let chaos = ChaosTransport(
            wrapping: mock, seed: 9, fault: .init(rate: 1), scope: { $0.url.path == "/flaky" })
        let calm = await Self.outcomes(chaos, count: 20, path: "/")
        let flaky = await Self.outcomes(chaos, count: 20, path: "/flaky")
        #expect(calm == Array(repeating: .passed(200), count: 20))
        #expect(flaky == Array(repeating: .fault, count: 20))
        #expect(Self.numbers(chaos.counts) == [40, 0, 20, 0, 20])
        #expect(mock.requests.map(\.url.path) == Array(repeating: "/", count: 20))
    }

    @Test func theSwitchTurnsChaosOffAndOnWithoutUsingTheGenerator() async {
        let chaos = Self.chaos(Self.upstream(), seed: 21, fault: 0.5, answer: 0.2)
        let before = await Self.outcomes(chaos, count: 50)
        chaos.isEnabled = false
        let off = await Self.outcomes(chaos, count: 50)
        chaos.isEnabled = true
        let after = await Self.outcomes(chaos, count: 50)
        let fresh = await Self.outcomes(Self.chaos(Self.upstream(), seed: 21, fault: 0.5, answer: 0.2), count: 100)
        #expect(off == Array(repeating: .passed(200), count: 50))
        #expect(before + after == fresh)  // off took no numbers
        #expect(chaos.isEnabled)
    }

    @Test func theSwitchIsSafeToFlipWhileRequestsRun() async {
        let mock = Self.upstream()
        let chaos = Self.chaos(mock, seed: 4, fault: 0.5, answer: 0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<200 {
                group.addTask { _ = try? await chaos.send(HTTPRequest(url: URL(string: "https://api.test/")!)) }
            }
            group.addTask { for index in 0..<200 { chaos.isEnabled = index % 2 == 0 } }
        }
        let counts = chaos.counts
        #expect(counts.attempts == 200)
        #expect(counts.faults + counts.passedThrough == 200)
        #expect(mock.requests.count == counts.passedThrough)
    }

    // MARK: - Bad input

    @Test func ratesAreClamped() async {
        for (given, kept) in [(Double.nan, 0.0), (-1, 0), (2, 1), (.infinity, 1), (-.infinity, 0), (0.25, 0.25)] {
            #expect(ChaosTransport.Fault(rate: given).rate == kept, "\(given)")
            #expect(ChaosTransport.Latency(rate: given, delay: .seconds(1)).rate == kept, "\(given)")
            #expect(ChaosTransport.Answer(rate: given).rate == kept, "\(given)")
        }
        #expect(ChaosTransport.Latency(rate: 1, delay: .seconds(-5)).delay == .zero)
        let always = await Self.outcomes(Self.chaos(Self.upstream(), seed: 2, fault: 2, answer: 0), count: 30)
        let never = await Self.outcomes(Self.chaos(Self.upstream(), seed: 2, fault: .nan, answer: -1), count: 30)
        #expect(always == Array(repeating: .fault, count: 30))
        #expect(never == Array(repeating: .passed(200), count: 30))
    }

    // MARK: - Streaming

    /// A transport that does not stream: the chaos transport must read its body stream and hand its
    /// body to a transfer, as the client would.
    struct PlainTransport: HTTPTransport {
        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            HTTPResponse(
                status: 200, headers: ["Content-Length": "11"], body: Data("plain bytes".utf8), request: request)
        }
    }

    @Test func downloadsGoThroughAnAnswerAStreamingTransportAndAPlainOne() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        // An injected answer's body goes to the file.
        let answered = ChaosTransport(
            wrapping: Self.upstream(), seed: 1, answer: .init(rate: 1, reply: .text("from chaos")))
        let first = folder.appendingPathComponent("answer.bin")
        _ = try await NetworkClient(baseURL: api, transport: answered).download(Request<Data>(path: "/"), to: first)
        #expect(try Data(contentsOf: first) == Data("from chaos".utf8))

        // A streaming wrapped transport gets the transfer: chunks arrive as they come.
        let mock = MockTransport()
        mock.enqueue(.chunks([Data("stream".utf8), Data("ed".utf8)]))
        let streamed = ChaosTransport(wrapping: mock, seed: 1, fault: .init(rate: 0))
        let second = folder.appendingPathComponent("streamed.bin")
        _ = try await NetworkClient(baseURL: api, transport: streamed).download(Request<Data>(path: "/"), to: second)
        #expect(try Data(contentsOf: second) == Data("streamed".utf8))

        // A plain wrapped transport gets a whole body, handed to the file afterwards.
        let plain = ChaosTransport(wrapping: PlainTransport(), seed: 1)
        let third = folder.appendingPathComponent("plain.bin")
        _ = try await NetworkClient(baseURL: api, transport: plain).download(Request<Data>(path: "/"), to: third)
        #expect(try Data(contentsOf: third) == Data("plain bytes".utf8))
        #expect(plain.counts.passedThrough == 1)
    }

    /// The transfer passes through to a streaming transport: an event arrives while the
    /// connection is still open (a buffering wrapper would wait for an end that never comes).
    @Test func anEventStreamGetsItsEventsWhileTheConnectionIsOpen() async throws {
        let mock = MockTransport()
        mock.enqueue(.events("id: 1\ndata: hello\n\n", end: .hang))
        let chaos = ChaosTransport(wrapping: mock, seed: 1, fault: .init(rate: 0), answer: .init(rate: 0))
        let client = NetworkClient(baseURL: api, transport: chaos)
        let first = await withinTimeLimit(seconds: hangBound) { () -> String? in
            do {
                for try await event in client.events(Request<Data>(path: "/feed")) { return event.data }
            } catch {}
            return nil
        }
        #expect(first == "hello")
        #expect(Self.numbers(chaos.counts) == [1, 0, 0, 0, 1])
    }

    @Test func aBodyStreamReachesAPlainTransportAsABody() async throws {
        struct Echo: HTTPTransport {
            func send(_ request: HTTPRequest) async throws -> HTTPResponse {
                HTTPResponse(status: 200, body: request.body ?? Data("none".utf8), request: request)
            }
        }
        let chaos = ChaosTransport(wrapping: Echo(), seed: 1)
        var request = HTTPRequest(method: .post, url: api)
        request.bodyStream = try HTTPBodyStream(parts: [.data(Data("uploaded".utf8))])
        let response = try await chaos.send(request)
        #expect(String(decoding: response.body, as: UTF8.self) == "uploaded")
    }

    @Test func itWrapsTheURLSessionTransportOverLoopback() async throws {
        try await LocalServer.withServer { server in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let session = URLSessionTransport(configuration: .ephemeral)

            let calm = ChaosTransport(wrapping: session, seed: 1, fault: .init(rate: 0))
            #expect(calm.honorsCancellation)
            let file = folder.appendingPathComponent("calm.bin")
            let saved = try await NetworkClient(baseURL: server.baseURL, transport: calm).download(
                Request<Data>(path: "/stream", query: ["bytes": 300_000]), to: file)
            #expect(saved.response.status == 200)
            #expect(try Data(contentsOf: file).count == 300_000)
            #expect(Self.numbers(calm.counts) == [1, 0, 0, 0, 1])

            let broken = ChaosTransport(wrapping: session, seed: 1, fault: .init(rate: 1))
            let lost = folder.appendingPathComponent("lost.bin")
            await #expect {
                _ = try await NetworkClient(baseURL: server.baseURL, transport: broken).download(
                    Request<Data>(path: "/stream", query: ["bytes": 300_000]), to: lost)
            } throws: { error in
                NetworkError.connectionFailed(URLError(.networkConnectionLost)) ~= error
            }
            #expect(!FileManager.default.fileExists(atPath: lost.path))
            #expect(Self.numbers(broken.counts) == [1, 0, 1, 0, 0])
        }
    }

    /// Testing.md: "a fault or an answer comes before the request body is read, so a one-shot
    /// upload can still be retried".
    @Test func aOneShotUploadFaultedBeforeItsBodyWasReadIsRetried() async throws {
        final class First: @unchecked Sendable {
            // @unchecked: `taken` is only touched under `lock`.
            private let lock = NSLock()
            private var taken = false
            func take() -> Bool {
                lock.withLock {
                    defer { taken = true }
                    return !taken
                }
            }
        }
        let first = First()
        let mock = MockTransport()
        mock.stub(.put, "/upload", reply: .status(200))
        let chaos = ChaosTransport(wrapping: mock, seed: 1, fault: .init(rate: 1), scope: { _ in first.take() })
        let client = NetworkClient(baseURL: api, transport: chaos, configuration: .init(clock: ImmediateClock())) {
            RetryBehavior(RetryPolicy(maxAttempts: 2, jitter: .none))
        }
        let once = AsyncStream<Data> { continuation in
            continuation.yield(Data("one shot".utf8))
            continuation.finish()
        }
        let upload = Request<Void>(method: .put, path: "/upload", body: .stream(once, length: 8))
        try await client.send(upload)
        #expect(Self.numbers(chaos.counts) == [2, 0, 1, 0, 1])
        #expect(mock.requests.map(\.bodyText) == ["one shot"])
    }

    /// The example of Testing.md, "A misbehaving upstream", as written there.
    @Test func aFlakyUpstreamCostsItAtMostAFifthMoreAttempts() async throws {
        let upstream = MockTransport()
        upstream.stub(.get, "/movies", reply: .rawJSON("[]"))
        let chaos = ChaosTransport(
            wrapping: upstream, seed: 42,
            fault: .init(rate: 0.3),
            latency: .init(rate: 0.2, delay: .seconds(2)),
            answer: .init(rate: 0.1, reply: .status(503)),
            clock: ImmediateClock())
        let retryClock = ImmediateClock()
        let client = NetworkClient(
            baseURL: URL(string: "https://api.test")!, transport: chaos, configuration: .init(clock: retryClock)
        ) {
            RetryBehavior(RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(10), jitter: .none))
        }

        var loaded = 0
        for _ in 0..<100 {
            do {
                let _: [String] = try await client.get("/movies")
                loaded += 1
            } catch {
                // A 503 or a lost connection, when the retries ran out or the budget refused one.
                #expect(NetworkError.status(503) ~= error || NetworkError.connectionFailed ~= error, "\(error)")
            }
        }

        #expect(loaded == chaos.counts.passedThrough)
        #expect(upstream.requests.count == chaos.counts.passedThrough)
        #expect(chaos.counts.attempts <= 100 + 20)
        // What the example does not say: chaos really happened, and the budget was what held it.
        #expect(chaos.counts.faults > 0 && chaos.counts.answers > 0 && chaos.counts.delayed > 0)
        #expect(chaos.counts.attempts > 100)
        #expect(retryClock.now.offset <= .seconds(3))  // "take 3 s of it at most"
    }

    // MARK: - Composed with the retry budget and the circuit breaker

    /// Records what each attempt that reached the chaos transport met, in order.
    final class Spy: HTTPTransport, @unchecked Sendable {
        // @unchecked: `failed` is only touched under `lock`.
        let inner: ChaosTransport
        private let lock = NSLock()
        private var failed: [Bool] = []
        init(_ inner: ChaosTransport) { self.inner = inner }
        var outcomes: [Bool] { lock.withLock { failed } }
        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            do {
                let response = try await inner.send(request)
                lock.withLock { failed.append(false) }
                return response
            } catch {
                lock.withLock { failed.append(true) }
                throw error
            }
        }
    }

    /// 300 requests, one after another, through `RetryBehavior` (3 attempts) with the default
    /// retry budget and a `CircuitBreakerBehavior`, to an upstream that always answers 200 behind
    /// a 50 % fault rate. The breaker's clock never moves (its window holds every attempt and a
    /// break never ends); the retry waits are 1 ms on an `ImmediateClock` (the whole run stays
    /// inside the budget's 10 s window).
    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6, 7, 8])
    func aFlakyUpstreamMeetsTheBudgetAndTheBreakerAsTheirRulesSay(seed: UInt64) async throws {
        let mock = Self.upstream()
        let chaos = ChaosTransport(wrapping: mock, seed: seed, fault: .init(rate: 0.5))
        let spy = Spy(chaos)
        let breakerClock = ManualClock()
        let options = CircuitBreaker.Options(failureRatio: 0.6, minimumThroughput: 20)
        let breaker = CircuitBreaker(options: options, clock: breakerClock)
        let clock = ImmediateClock()
        let configuration = NetworkClient.Configuration(clock: clock)
        let client = NetworkClient(baseURL: api, transport: spy, configuration: configuration) {
            RetryBehavior(RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(1), multiplier: 1, jitter: .none))
            CircuitBreakerBehavior(breaker)
        }
        let requests = 300
        var succeeded = 0
        var injected = 0
        var refused = 0
        var firstRefused: Int?
        for index in 0..<requests {
            do throws(NetworkError) {
                try await client.send(Request<Void>(path: "/"))
                succeeded += 1
                #expect(firstRefused == nil, "a request succeeded after the circuit opened (it never closes here)")
            } catch {
                if NetworkError.circuitOpen ~= error {
                    refused += 1
                    firstRefused = firstRefused ?? index
                } else if NetworkError.connectionFailed(URLError(.networkConnectionLost)) ~= error {
                    injected += 1
                } else {
                    Issue.record("request \(index) ended with \(error), neither the injected fault nor circuitOpen")
                }
            }
        }
        #expect(clock.now.offset < .seconds(10))

        // Every request ends as success, the injected fault, or circuitOpen; every success is
        // an attempt the upstream answered, and the upstream saw only what chaos let through.
        #expect(succeeded + injected + refused == requests)
        let counts = chaos.counts
        #expect(succeeded == counts.passedThrough)
        #expect(mock.requests.count == counts.passedThrough)
        #expect(counts.faults + counts.passedThrough == counts.attempts)
        #expect(spy.outcomes.count == counts.attempts)

        // The breaker, by its rule over a window that never slides: it opens at the first failed
        // attempt after which at least 20 attempts have ended and at least 60 % of them failed;
        // after that no attempt reaches the transport.
        var ended = 0
        var failures = 0
        var opensAfter: Int?
        for failed in spy.outcomes where opensAfter == nil {
            ended += 1
            if failed { failures += 1 }
            if failed, ended >= 20, Double(failures) >= 0.6 * Double(ended) { opensAfter = ended }
        }
        let origin = try #require(Origin(api))
        if let opensAfter {
            #expect(spy.outcomes.count == opensAfter, "attempts reached the transport after the circuit opened")
            #expect(
                breaker.state(of: origin) == .open(remaining: options.breakDuration), "the breaker's clock never moved")
            #expect(refused > 0)
        } else {
            #expect(breaker.state(of: origin) == .closed)
            #expect(refused == 0)
        }

        // The budget, by its rule: the retries it allowed are at most the larger of a fifth of the
        // requests and the floor (1 a second × 10 s), and each attempt past a request's first
        // is one of them.
        let budget = try #require(configuration.retryBudget)
        let snapshot = budget.snapshot(for: origin)
        #expect(snapshot.requests == requests)
        #expect(snapshot.retries <= max(requests / 5, 10))
        let firstAttempts = requests - refused + (firstRefused == nil ? 0 : 1)  // a refusal can be a retry
        #expect(counts.attempts <= firstAttempts + snapshot.retries)
        #expect(counts.attempts >= requests - refused)
        // A request the budget refused a retry ended with the injected fault, not a new error.
        #expect(injected >= snapshot.refused)
        if firstRefused == nil {
            // The circuit stayed closed: every retry the budget allowed reached the transport, and
            // half the first attempts failing want far more retries than a fifth: some were refused.
            #expect(counts.attempts == requests + snapshot.retries)
            #expect(snapshot.refused > 0, "\(snapshot)")
        }
    }
}
