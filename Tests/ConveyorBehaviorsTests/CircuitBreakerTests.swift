@testable import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@Suite struct CircuitBreakerTests {
    static let origin = Origin(apiURL)!

    func client(
        _ mock: MockTransport, _ breaker: CircuitBreaker, retry: RetryPolicy? = nil, timeoutClock: ManualClock? = nil
    ) -> NetworkClient {
        var configuration = NetworkClient.Configuration(clock: ImmediateClock())
        if let timeoutClock { configuration.timeoutClock = timeoutClock }
        configuration.retryBudget = nil
        return NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            if let retry { RetryBehavior(retry) }
            CircuitBreakerBehavior(breaker)
        }
    }

    func send(_ client: NetworkClient, _ path: String = "/x") async -> Result<Void, NetworkError> {
        do throws(NetworkError) {
            try await client.send(Request<Void>(path: path))
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    @Test func aFailingOriginOpensTheCircuitAndRequestsFailAtOnce() async {
        let clock = ManualClock()
        let breaker = CircuitBreaker(options: .init(failureRatio: 0.5, minimumThroughput: 10, breakDuration: .seconds(5)), clock: clock)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503))
        let client = client(mock, breaker)
        for _ in 0..<10 { _ = await send(client) }
        #expect(breaker.state(of: Self.origin) == .open(remaining: .seconds(5)))
        clock.advance(by: .seconds(2))
        guard case .failure(let error) = await send(client) else { Issue.record("sent"); return }
        #expect(NetworkError.circuitOpen ~= error)
        #expect(error.retryAfter == .seconds(3))
        #expect(error.reason == "https://api.test:443")
        #expect(error.description == "The circuit for https://api.test:443 is open: not sent (next try in 3.0 s)")
        #expect(mock.requests.count == 10)  // the refused request was not sent
    }

    @Test(arguments: [400, 401, 403, 404, 409, 422, 501])
    func errorsTheCallerCausedNeverOpenIt(status: Int) async {
        let breaker = CircuitBreaker(options: .init(failureRatio: 0.1, minimumThroughput: 5), clock: ManualClock())
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(status))
        let client = client(mock, breaker)
        for _ in 0..<50 { _ = await send(client) }
        #expect(breaker.state(of: Self.origin) == .closed)
        #expect(mock.requests.count == 50)
    }

    @Test func belowTheMinimumThroughputNothingOpens() async {
        let breaker = CircuitBreaker(options: .init(failureRatio: 0.5, minimumThroughput: 20), clock: ManualClock())
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .failure(URLError(.cannotConnectToHost)))
        let client = client(mock, breaker)
        for _ in 0..<19 { _ = await send(client) }
        #expect(breaker.state(of: Self.origin) == .closed)
        _ = await send(client)
        #expect(breaker.state(of: Self.origin) == .open(remaining: .seconds(5)))
    }

    @Test func aProbeThatSucceedsClosesItAndOneThatFailsOpensItAgain() async {
        let clock = ManualClock()
        let changes = Locked<[CircuitBreaker.State]>([])
        let breaker = CircuitBreaker(
            options: .init(minimumThroughput: 2, breakDuration: .seconds(5)), clock: clock,
            onChange: { _, state in changes.withLock { $0.append(state) } })
        let mock = MockTransport()
        mock.enqueue(.status(500), .status(500), .status(502), .status(200), .status(200))
        let client = client(mock, breaker)
        _ = await send(client)
        _ = await send(client)
        clock.advance(by: .seconds(5))
        #expect(breaker.state(of: Self.origin) == .halfOpen)
        _ = await send(client)  // the probe fails: open again for a whole break
        #expect(breaker.state(of: Self.origin) == .open(remaining: .seconds(5)))
        clock.advance(by: .seconds(5))
        #expect(await succeeded(client))  // the probe succeeds
        #expect(breaker.state(of: Self.origin) == .closed)
        #expect(await succeeded(client))
        #expect(
            changes.withLock { $0 } == [
                .open(remaining: .seconds(5)), .halfOpen, .open(remaining: .seconds(5)), .halfOpen, .closed,
            ])
    }

    func succeeded(_ client: NetworkClient) async -> Bool {
        if case .success = await send(client) { return true }
        return false
    }

    /// While half-open, only `probes` requests are in flight at once; the rest fail at once.
    @Test(arguments: [1, 3])
    func aHalfOpenCircuitLetsThroughItsProbesOnly(probes: Int) async {
        let clock = ManualClock()
        let breaker = CircuitBreaker(options: .init(minimumThroughput: 1, breakDuration: .seconds(1), probes: probes), clock: clock)
        let mock = MockTransport()
        let gate = BreakerGate()
        mock.stub(nil, "/v1/x", reply: .status(500))
        let client = client(mock, breaker)
        _ = await send(client)
        clock.advance(by: .seconds(1))
        mock.reset()
        mock.stub(nil, "/v1/x", reply: .handler { _ in await gate.wait(); return .status(200) })
        let refused = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    if case .failure(let error) = await self.send(client), NetworkError.circuitOpen ~= error { return true }
                    return false
                }
            }
            // The probes reach the upstream and wait there; every other request is refused.
            var refused = 0
            for _ in 0..<(20 - probes) { if await group.next() == true { refused += 1 } }
            await gate.open()
            for await result in group where result { refused += 1 }
            return refused
        }
        #expect(refused == 20 - probes)
        #expect(mock.requests.count == probes)
        #expect(breaker.state(of: Self.origin) == .closed)
    }

    /// A probe the caller cancels says nothing about the origin: the next request probes.
    /// Every scenario of the contract (failures, retries, cancellation mid-flight and in a backoff
    /// wait, hedged races, 20 concurrent requests) keeps the hooks balanced and leaves the
    /// circuit closed and counting, with a breaker that never opens (the scenarios need their
    /// requests to reach the transport; an open circuit is `aRefusingBehaviorIsReported…`).
    @Test func theBehaviorKeepsTheContract() async {
        let breaker = CircuitBreaker(options: .init(failureRatio: 1, minimumThroughput: 1_000_000))
        let check = BehaviorContractCheck(CircuitBreakerBehavior(breaker)) {
            breaker.circuits.withLock { $0.all.values.reduce(0) { $0 + $1.inFlightProbes } }
        }
        let violations = await check.run()
        #expect(violations.isEmpty, "\(violations)")
        #expect(breaker.state(of: Origin(URL(string: "http://127.0.0.1:9")!)!) == .closed)
    }

    /// The contract check reports a behavior that refuses every request (an isolated circuit)
    /// instead of waiting forever for a request to reach its transport.
    @Test func aRefusingBehaviorIsReportedByTheContractCheckInsteadOfHanging() async {
        let breaker = CircuitBreaker()
        breaker.isolate(Origin(URL(string: "http://127.0.0.1:9")!)!)
        let violations = await BehaviorContractCheck(CircuitBreakerBehavior(breaker)) { 0 }.run()
        #expect(violations.contains { $0.description.contains("did not reach the transport") })
    }

    @Test func aCancelledProbeFreesItsPlace() async {
        let clock = ManualClock()
        let breaker = CircuitBreaker(options: .init(minimumThroughput: 1, breakDuration: .seconds(1)), clock: clock)
        let mock = MockTransport()
        mock.enqueue(.status(503), .hang, .status(200))
        let client = client(mock, breaker)
        _ = await send(client)
        clock.advance(by: .seconds(1))
        let hung = Task { await self.send(client) }
        while mock.requests.count < 2 { await Task.yield() }
        hung.cancel()
        guard case .failure(let error) = await hung.value else { Issue.record("succeeded"); return }
        #expect(error == .cancelled)
        #expect(breaker.state(of: Self.origin) == .halfOpen)
        #expect(await succeeded(client))
        #expect(breaker.state(of: Self.origin) == .closed)
    }

    /// An attempt its timeout ended is a failure of the origin.
    @Test func anAttemptThatTimesOutCountsAsAFailure() async {
        let timeouts = ManualClock()
        // The abandoned attempt counts when its task ends, just after the request did: the test
        // waits for the breaker to say it opened (a watchdog ends a run where it never does).
        let (opened, opening) = AsyncStream<CircuitBreaker.State>.makeStream()
        let breaker = CircuitBreaker(
            options: .init(minimumThroughput: 1), clock: ManualClock(), onChange: { _, state in opening.yield(state) })
        let mock = MockTransport()
        mock.enqueue(.hang)
        let client = client(mock, breaker, timeoutClock: timeouts)
        let request = Task {
            do throws(NetworkError) {
                try await client.send(Request<Void>(path: "/x", timeout: .seconds(10)))
                return "success"
            } catch {
                return error.name
            }
        }
        while mock.requests.isEmpty { await Task.yield() }
        timeouts.advance(by: .seconds(10))
        #expect(await request.value == "timedOut")
        let watchdog = Watchdog(seconds: 60, "the timed-out attempt was never counted")
        defer { watchdog.disarm() }
        var first: CircuitBreaker.State?
        for await state in opened {
            first = state
            break
        }
        #expect(first == .open(remaining: .seconds(5)))
        #expect(breaker.state(of: Self.origin) == .open(remaining: .seconds(5)))
    }

    @Test func retriesStopAtAnOpenCircuit() async {
        let breaker = CircuitBreaker(options: .init(minimumThroughput: 4), clock: ManualClock())
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503))
        let client = client(mock, breaker, retry: .exponentialBackoff(maxAttempts: 3, jitter: .none))
        var names: [String] = []
        for _ in 0..<5 {
            if case .failure(let error) = await send(client) { names.append(error.name) }
        }
        // Request 1's three attempts and request 2's first open it; request 2's retry meets the
        // open circuit, and the rest fail at once.
        #expect(mock.requests.count == 4)
        #expect(names == ["unacceptableStatus", "circuitOpen", "circuitOpen", "circuitOpen", "circuitOpen"])
    }

    @Test func anOperatorIsolatesAndClosesACircuit() async {
        let breaker = CircuitBreaker(clock: ManualClock())
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = client(mock, breaker)
        breaker.isolate(Self.origin)
        #expect(breaker.state(of: Self.origin) == .isolated)
        guard case .failure(let error) = await send(client) else { Issue.record("sent"); return }
        #expect(NetworkError.circuitOpen ~= error && error.retryAfter == .zero)
        #expect(mock.requests.isEmpty)
        breaker.close(Self.origin)
        #expect(await succeeded(client))
    }

    /// Each origin has its own circuit, and the breaker keeps at most `maxOrigins`.
    @Test func circuitsArePerOriginAndBounded() async {
        let breaker = CircuitBreaker(options: .init(minimumThroughput: 1), maxOrigins: 4, clock: ManualClock())
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503))
        let client = client(mock, breaker)
        _ = await send(client)
        #expect(breaker.state(of: Self.origin) != .closed)
        let other = Origin(URL(string: "http://127.0.0.1:9")!)!
        #expect(breaker.state(of: other) == .closed)
        for port in 1...50 { _ = breaker.admit(Origin(URL(string: "http://127.0.0.1:\(port)")!)!) }
        #expect(breaker.circuits.withLock { $0.all.count } <= 4)
        #expect(breaker.state(of: Self.origin) != .closed)  // an open circuit is not forgotten
    }

    /// Generated outcomes and clock steps against a model of the rules as Docs/Resilience.md
    /// states them.
    @Test(arguments: 0..<40 as Range<UInt64>)
    func theCircuitFollowsItsModel(seed: UInt64) {
        var random = SeededGenerator(state: seed &+ 77)
        let clock = ManualClock()
        let minimum = Int(random.next() % 6) + 1
        let ratio = [0.1, 0.5, 1][Int(random.next() % 3)]
        let breaker = CircuitBreaker(
            options: .init(failureRatio: ratio, minimumThroughput: minimum, samplingDuration: .seconds(10), breakDuration: .seconds(5)),
            clock: clock)
        var model = Model()
        var now = 0
        for step in 0..<300 {
            if random.next() % 5 == 0 {
                let seconds = Int(random.next() % 4)
                clock.advance(by: .seconds(seconds))
                now += seconds
                continue
            }
            let admission = breaker.admit(Self.origin).0
            let expected = model.admit(now)
            #expect(admission == expected, "seed \(seed) step \(step)")
            guard case .send(let probe) = admission else { continue }
            let outcome: CircuitBreaker.Outcome = [.success, .failure, .failure, .abandoned][Int(random.next() % 4)]
            breaker.record(Self.origin, outcome, probe: probe)
            model.record(outcome, probe: probe, now: now, ratio: ratio, minimum: minimum)
        }
    }

    /// The rules, written plainly: every outcome kept with its second.
    struct Model {
        var openUntil: Int?
        var halfOpen = false
        var probing = false
        var outcomes: [(second: Int, failed: Bool)] = []

        mutating func admit(_ now: Int) -> CircuitBreaker.Admission {
            if let until = openUntil {
                if now < until { return .refuse(retryAfter: .seconds(until - now)) }
                openUntil = nil
                halfOpen = true
                probing = false
            }
            guard halfOpen else { return .send(probe: false) }
            if probing { return .refuse(retryAfter: .zero) }
            probing = true
            return .send(probe: true)
        }

        mutating func record(_ outcome: CircuitBreaker.Outcome, probe: Bool, now: Int, ratio: Double, minimum: Int) {
            if probe {
                probing = false
                switch outcome {
                case .success: halfOpen = false; outcomes = []
                case .failure: halfOpen = false; openUntil = now + 5
                case .abandoned: break
                }
                return
            }
            guard outcome != .abandoned, openUntil == nil, !halfOpen else { return }
            outcomes.append((now, outcome == .failure))
            guard outcome == .failure else { return }  // only a failure can open it
            let window = outcomes.filter { now - $0.second < 10 }
            let failures = window.filter(\.failed).count
            if window.count >= minimum && Double(failures) >= ratio * Double(window.count) {
                openUntil = now + 5
                outcomes = []
            }
        }
    }
}

/// Opens once; waiters before and after pass.
private actor BreakerGate {
    var isOpen = false
    var waiters: [CheckedContinuation<Void, Never>] = []
    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }
}

/// The failure judgment reads the statuses a policy has now: one set after the policy was made
/// (below the lowest status it had, so a precomputed bound left stale would miss it) counts.
@Suite struct RetryPolicyJudgmentTests {
    @Test func statusesSetAfterCreationAreJudgedAsGiven() {
        var policy = RetryPolicy()
        #expect(!policy.isUpstreamFailure(nil, status: 302))
        #expect(policy.isUpstreamFailure(nil, status: 503))
        policy.retryableStatuses = [302, 418]
        #expect(policy.isUpstreamFailure(nil, status: 302))
        #expect(policy.isUpstreamFailure(nil, status: 418))
        #expect(!policy.isUpstreamFailure(nil, status: 503))
        #expect(!policy.isUpstreamFailure(nil, status: 200))
        policy.retryableStatuses = []
        for status in [100, 200, 302, 418, 503, 599] { #expect(!policy.isUpstreamFailure(nil, status: status)) }
        // Generated sets against the set itself.
        var random = SplitMix64(state: 11)
        for _ in 0..<200 {
            policy.retryableStatuses = Set((0..<Int(random.next() % 6)).map { _ in 100 + Int(random.next() % 500) })
            let status = 100 + Int(random.next() % 500)
            #expect(policy.isUpstreamFailure(nil, status: status) == policy.retryableStatuses.contains(status))
        }
    }

    @Test func howAnExchangeEndedIsOneJudgment() {
        let policy = RetryPolicy()
        #expect(policy.upstreamFailed(.timedOut) { false } == true)
        #expect(policy.upstreamFailed(.cancelled) { false } == nil)  // the caller left
        #expect(policy.upstreamFailed(.cancelled) { true } == true)  // its deadline ended it
        #expect(policy.upstreamFailed(.rateLimited(origin: "o", retryAfter: .zero)) { true } == nil)
    }
}
