@testable import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@Suite struct ConcurrencyLimiterTests {
    static let origin = Origin(apiURL)!

    func client(_ mock: MockTransport, _ limiter: ConcurrencyLimiter, timeout: Duration? = nil) -> NetworkClient {
        var configuration = NetworkClient.Configuration(clock: ImmediateClock())
        configuration.timeout = timeout
        configuration.timeoutClock = ManualClock()  // the timeout is read, never waited for
        configuration.retryBudget = nil
        return NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            ConcurrencyLimitBehavior(limiter)
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

    /// Waits until `condition` holds (each check yields to the other tasks; no time passes).
    func until(_ condition: () -> Bool) async {
        for _ in 0..<1_000_000 where !condition() { await Task.yield() }
    }

    @Test func attemptsOverTheLimitWaitInOrderAndGoAsPlacesFree() async {
        let limiter = ConcurrencyLimiter(options: .init(initialLimit: 2, maxLimit: 2), clock: ManualClock())
        let mock = MockTransport()
        let gates = (0..<5).map { _ in LimiterGate() }
        for index in 0..<5 {
            mock.stub(nil, "/v1/\(index)", reply: .handler { _ in await gates[index].wait(); return .status(200) })
        }
        let client = client(mock, limiter)
        var tasks: [Task<Result<Void, NetworkError>, Never>] = []
        for index in 0..<5 {
            tasks.append(Task { await self.send(client, "/\(index)") })
            await until { limiter.snapshot(for: Self.origin).inFlight + limiter.snapshot(for: Self.origin).queued == index + 1 }
        }
        #expect(limiter.snapshot(for: Self.origin) == .init(limit: 2, inFlight: 2, queued: 3, rejected: 0))
        #expect(mock.requests.map(\.url.path) == ["/v1/0", "/v1/1"])
        await gates[1].open()
        await until { mock.requests.count == 3 }
        #expect(mock.requests.map(\.url.path) == ["/v1/0", "/v1/1", "/v1/2"])  // first come, first served
        for gate in gates { await gate.open() }
        for task in tasks { #expect(await task.value.isSuccess) }
        #expect(limiter.snapshot(for: Self.origin).inFlight == 0)
    }

    @Test func aFullQueueFailsAtOnceWithoutSending() async {
        let limiter = ConcurrencyLimiter(options: .init(initialLimit: 1, maxLimit: 1, maxQueue: 1), clock: ManualClock())
        let mock = MockTransport()
        let gate = LimiterGate()
        mock.stub(nil, "/v1/x", reply: .handler { _ in await gate.wait(); return .status(200) })
        let client = client(mock, limiter)
        let first = Task { await self.send(client) }
        await until { limiter.snapshot(for: Self.origin).inFlight == 1 }
        let second = Task { await self.send(client) }
        await until { limiter.snapshot(for: Self.origin).queued == 1 }
        guard case .failure(let error) = await send(client) else { Issue.record("sent"); return }
        #expect(NetworkError.rateLimited ~= error && error.reason == "https://api.test:443")
        await gate.open()
        let (one, two) = (await first.value, await second.value)
        #expect(one.isSuccess && two.isSuccess)
        #expect(mock.requests.count == 2)
        #expect(limiter.snapshot(for: Self.origin).rejected == 1)
    }

    @Test func aWaitLongerThanMaxWaitFailsAndGivesNothingAway() async {
        let clock = ManualClock()
        let limiter = ConcurrencyLimiter(options: .init(initialLimit: 1, maxLimit: 1, maxWait: .seconds(3)), clock: clock)
        let mock = MockTransport()
        let gate = LimiterGate()
        mock.stub(nil, "/v1/x", reply: .handler { _ in await gate.wait(); return .status(200) })
        let client = client(mock, limiter)
        let first = Task { await self.send(client) }
        await until { limiter.snapshot(for: Self.origin).inFlight == 1 }
        let second = Task { await self.send(client) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(3))
        guard case .failure(let error) = await second.value else { Issue.record("sent"); return }
        #expect(NetworkError.rateLimited ~= error)
        await gate.open()
        #expect(await first.value.isSuccess)
        #expect(mock.requests.count == 1)
        #expect(limiter.snapshot(for: Self.origin) == .init(limit: 1, inFlight: 0, queued: 0, rejected: 1))
    }

    @Test func aRequestCancelledWhileWaitingLeavesTheQueue() async {
        let limiter = ConcurrencyLimiter(options: .init(initialLimit: 1, maxLimit: 1), clock: ManualClock())
        let mock = MockTransport()
        let gate = LimiterGate()
        mock.stub(nil, "/v1/x", reply: .handler { _ in await gate.wait(); return .status(200) })
        let client = client(mock, limiter)
        let first = Task { await self.send(client) }
        await until { limiter.snapshot(for: Self.origin).inFlight == 1 }
        let second = Task { await self.send(client) }
        await until { limiter.snapshot(for: Self.origin).queued == 1 }
        second.cancel()
        guard case .failure(let error) = await second.value else { Issue.record("sent"); return }
        #expect(error == .cancelled)
        #expect(limiter.snapshot(for: Self.origin).queued == 0)
        await gate.open()
        #expect(await first.value.isSuccess)
        #expect(await send(client).isSuccess)
        #expect(mock.requests.count == 2)
        #expect(limiter.snapshot(for: Self.origin).inFlight == 0)
    }

    @Test func failuresLowerTheLimitAndAnswersAtFullUseRaiseIt() async {
        let limiter = ConcurrencyLimiter(options: .init(initialLimit: 10, minLimit: 2, maxLimit: 12), clock: ManualClock())
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503))
        let client = client(mock, limiter)
        _ = await send(client)
        // One at a time: the limit falls from twice that use (2 × 0.9), and never below minLimit.
        #expect(limiter.snapshot(for: Self.origin).limit == 2)
        for _ in 0..<50 { _ = await send(client) }
        #expect(limiter.snapshot(for: Self.origin).limit == 2)
        // 4xx the caller caused never lower it.
        mock.reset()
        mock.stub(nil, "/v1/x", reply: .status(404))
        for _ in 0..<20 { _ = await send(client) }
        #expect(limiter.snapshot(for: Self.origin).limit >= 2)

        let options = ConcurrencyLimiter.Options(minLimit: 1, maxLimit: 12)
        // At full use each failure takes a tenth off: 10 × 0.9⁵ = 5.9.
        let failing = ConcurrencyLimiter.Account(Self.origin, limit: 10)
        failing.inFlight = 10
        for _ in 0..<5 { failing.adjust(latency: 1_000, failed: true, at: 0, options: options, floorWindow: options.floorWindowNanoseconds) }
        #expect(Int(failing.limit) == 5)
        // One at a time is at least half of a limit of 2: each answer raises it by 1 / limit.
        let account = ConcurrencyLimiter.Account(Self.origin, limit: 2)
        account.inFlight = 1
        account.adjust(latency: 1_000, failed: false, at: 0, options: options, floorWindow: options.floorWindowNanoseconds)
        #expect(account.limit == 2.5)
        // In use below half: no rise (the limit is not what holds the origin back).
        account.inFlight = 1
        account.limit = 4
        account.adjust(latency: 1_000, failed: false, at: 1, options: options, floorWindow: options.floorWindowNanoseconds)
        #expect(account.limit == 4)
    }

    @Test func anAnswerSlowerThanTwiceTheFloorLowersTheLimit() {
        var options = ConcurrencyLimiter.Options(initialLimit: 10, maxLimit: 100)
        options.floorMemory = .seconds(20)  // windows of 10 s
        let account = ConcurrencyLimiter.Account(Self.origin, limit: 10)
        account.inFlight = 10
        account.adjust(latency: 100_000_000, failed: false, at: 0, options: options, floorWindow: options.floorWindowNanoseconds)  // 100 ms: the floor
        #expect(account.limit == 10.1)
        account.adjust(latency: 190_000_000, failed: false, at: 1, options: options, floorWindow: options.floorWindowNanoseconds)  // within 2×
        #expect(account.limit > 10.1)
        let before = account.limit
        account.adjust(latency: 201_000_000, failed: false, at: 2, options: options, floorWindow: options.floorWindowNanoseconds)  // slower than 2×
        #expect(account.limit == before * 0.9)
        // The floor is forgotten within two windows: a route that became slower is the new normal.
        account.adjust(latency: 300_000_000, failed: false, at: 25_000_000_000, options: options, floorWindow: options.floorWindowNanoseconds)
        let settled = account.limit
        account.adjust(latency: 300_000_000, failed: false, at: 25_000_000_001, options: options, floorWindow: options.floorWindowNanoseconds)
        #expect(account.limit > settled)
        // With the default memory (2 minutes) the floor of 100 ms still holds 25 s later, and 70 s
        // later: a 300 ms answer is slow. Past 2 minutes it is forgotten.
        let remembering = ConcurrencyLimiter.Account(Self.origin, limit: 10)
        let defaults = ConcurrencyLimiter.Options(initialLimit: 10, maxLimit: 100)
        remembering.inFlight = 10
        remembering.adjust(latency: 100_000_000, failed: false, at: 0, options: defaults, floorWindow: defaults.floorWindowNanoseconds)
        for at: Int64 in [25_000_000_000, 70_000_000_000] {
            let before = remembering.limit
            remembering.adjust(latency: 300_000_000, failed: false, at: at, options: defaults, floorWindow: defaults.floorWindowNanoseconds)
            #expect(remembering.limit < before)
        }
        remembering.adjust(latency: 300_000_000, failed: false, at: 125_000_000_000, options: defaults, floorWindow: defaults.floorWindowNanoseconds)
        let relearned = remembering.limit
        remembering.adjust(latency: 300_000_000, failed: false, at: 125_000_000_001, options: defaults, floorWindow: defaults.floorWindowNanoseconds)
        #expect(remembering.limit > relearned)
    }

    /// A limit far above what is in flight was never proved: an origin that slows down or fails
    /// while a client uses 1 place of 20 gets the limit lowered from twice the use, not from 20
    /// (the brownout of `overload-sim`: 50 clients at 20 each let the upstream's queue reach 320).
    @Test func aLimitAboveItsUseIsLoweredFromTwiceTheUse() {
        var options = ConcurrencyLimiter.Options(initialLimit: 20, maxLimit: 100)
        options.floorMemory = .seconds(20)  // windows of 10 s
        let account = ConcurrencyLimiter.Account(Self.origin, limit: 20)
        account.inFlight = 1
        for index in 0..<10 {  // one at a time, 10 ms each: below half the limit, so it stays at 20
            account.adjust(latency: 10_000_000, failed: false, at: Int64(index) * 100_000_000, options: options, floorWindow: options.floorWindowNanoseconds)
        }
        #expect(account.limit == 20)
        account.adjust(latency: 40_000_000, failed: false, at: 1_000_000_000, options: options, floorWindow: options.floorWindowNanoseconds)  // slower than 2×
        #expect(account.limit == 1.8)  // twice the most in flight (1) × 0.9, not 20 × 0.9
        // The use of the window before counts too: 8 in flight then, one now.
        let busy = ConcurrencyLimiter.Account(Self.origin, limit: 20)
        busy.inFlight = 8
        busy.adjust(latency: 10_000_000, failed: false, at: 9_000_000_000, options: options, floorWindow: options.floorWindowNanoseconds)
        busy.inFlight = 1
        busy.adjust(latency: 10_000_000, failed: true, at: 11_000_000_000, options: options, floorWindow: options.floorWindowNanoseconds)
        #expect(busy.limit == 16 * 0.9)
        // A limit in use falls from itself, as before.
        let full = ConcurrencyLimiter.Account(Self.origin, limit: 10)
        full.inFlight = 10
        full.adjust(latency: 10_000_000, failed: true, at: 0, options: options, floorWindow: options.floorWindowNanoseconds)
        #expect(full.limit == 9)
    }

    /// Generated runs of answers (fast, slow, failed, at any use): the limit stays within its
    /// bounds and moves only as the rule says.
    @Test func theLimitStaysInItsBoundsOverGeneratedRuns() {
        var random = SplitMix64(state: 4)
        for _ in 0..<40 {
            let minLimit = Int(random.next() % 5) + 1
            let maxLimit = minLimit + Int(random.next() % 50)
            var options = ConcurrencyLimiter.Options(initialLimit: maxLimit, minLimit: minLimit, maxLimit: maxLimit)
            options.floorMemory = .seconds(20)  // windows of 10 s, as the model's
            let account = ConcurrencyLimiter.Account(Self.origin, limit: Double(options.initialLimit))
            var now: Int64 = 0
            // The most in flight in this 10 s window and the one before, kept apart from the account.
            var peak: (window: Int64, current: Int, previous: Int) = (-1, 0, 0)
            for _ in 0..<500 {
                now += Int64(random.next() % 2_000_000_000)
                account.inFlight = Int(random.next() % UInt64(maxLimit + 1))
                let window = now / 10_000_000_000
                if window != peak.window { peak = (window, 0, window == peak.window + 1 ? peak.current : 0) }
                peak.current = max(peak.current, account.inFlight)
                let failed = random.next() % 4 == 0
                let before = account.limit
                account.adjust(latency: Int64(random.next() % 500_000_000) + 1, failed: failed, at: now, options: options, floorWindow: options.floorWindowNanoseconds)
                #expect(account.limit >= Double(minLimit) && account.limit <= Double(maxLimit))
                let used = Double(2 * max(peak.current, peak.previous))
                if failed { #expect(account.limit == max(Double(minLimit), min(before, used) * 0.9)) }
            }
        }
    }

    @Test func theBehaviorKeepsTheContract() async {
        // The check holds 20 attempts at once until all have arrived, and its failing scenarios lower the
        // limit: never below 20, or the 21st would wait for a place only an answer frees.
        let limiter = ConcurrencyLimiter(options: .init(initialLimit: 20, minLimit: 20, maxLimit: 32))
        let check = BehaviorContractCheck(ConcurrencyLimitBehavior(limiter)) {
            limiter.origins.withLock { $0.all.values.reduce(0) { $0 + $1.inFlight + $1.queue.count + $1.placed.count } }
        }
        let violations = await check.run()
        #expect(violations.isEmpty, "\(violations)")
    }

    /// A limiter whose throttle draws from a seeded generator.
    static func throttled(_ k: Double?, clock: ManualClock, seed: UInt64 = 7) -> ConcurrencyLimiter {
        let draws = Locked(SplitMix64(state: seed))
        return ConcurrencyLimiter(options: .init(initialLimit: 50, maxLimit: 50, throttle: k), clock: clock) {
            draws.withLock { Double($0.next() >> 11) / Double(1 << 53) }
        }
    }

    /// The SRE book's throttling: an origin that refuses everything gets a trickle (about the
    /// harmonic number of the attempts), never nothing; once the 2-minute window has passed it
    /// gets everything again; off, every attempt goes.
    @Test func theThrottleSendsAnOriginThatRefusesEverythingATrickleAndRecovers() async {
        for k in [nil, 2.0] {
            let clock = ManualClock()
            let limiter = Self.throttled(k, clock: clock)
            let mock = MockTransport()
            mock.stub(nil, "/v1/down", reply: .status(503))
            mock.stub(nil, "/v1/up", reply: .status(200))
            let client = client(mock, limiter)
            var refusedLocally = 0
            for _ in 0..<200 {
                if case .failure(let error) = await send(client, "/down"), NetworkError.rateLimited ~= error {
                    refusedLocally += 1
                }
            }
            let sent = mock.requests.count
            #expect(sent + refusedLocally == 200)
            if k == nil {
                #expect(sent == 200 && limiter.snapshot(for: Self.origin).throttleProbability == 0)
                continue
            }
            #expect(sent >= 1 && sent <= 20, "sent \(sent) of 200")
            #expect(limiter.snapshot(for: Self.origin).throttleProbability > 0.9)
            #expect(limiter.snapshot(for: Self.origin).rejected == refusedLocally)
            // Past the 2-minute window the origin is judged afresh: every attempt goes.
            clock.advance(by: .seconds(121))
            #expect(limiter.snapshot(for: Self.origin).throttleProbability == 0)
            mock.reset()
            mock.stub(nil, "/v1/up", reply: .status(200))
            for _ in 0..<100 { #expect(await send(client, "/up").isSuccess) }
            #expect(mock.requests.count == 100)
        }
    }

    /// Generated runs of outcomes at generated times: the window's refusal probability is the
    /// book's formula over the attempts of the buckets of the last 2 minutes, computed naively.
    @Test func theThrottleWindowMatchesTheFormulaOverGeneratedRuns() {
        var random = SplitMix64(state: 11)
        for _ in 0..<30 {
            var window = ThrottleWindow()
            var events: [(bucket: Int64, accepted: Bool)] = []
            var now: Int64 = Int64(random.next() % 50_000_000_000)
            let k = 1 + Double(random.next() % 30) / 10
            for _ in 0..<400 {
                now += Int64(random.next() % (random.next() % 4 == 0 ? 60_000_000_000 : 2_000_000_000))
                let accepted = random.next() % 3 != 0
                window.count(accepted: accepted, at: now)
                events.append((now / 10_000_000_000, accepted))
                let current = now / 10_000_000_000
                let live = events.filter { $0.bucket > current - 12 }
                let requests = Double(live.count)
                let accepts = Double(live.filter(\.accepted).count)
                let expected = max(0, (requests - k * accepts) / (requests + 1))
                let got = window.refusalProbability(k: k, at: now)
                #expect(abs(got - expected) < 1e-12, "at \(now): \(got) against \(expected)")
                if abs(got - expected) >= 1e-12 { return }
            }
        }
    }

    /// A healthy origin is never throttled, and an attempt the caller cancelled counts for
    /// neither side (its 503 never arrives).
    @Test func aHealthyOriginIsNeverThrottled() async {
        let clock = ManualClock()
        let limiter = Self.throttled(2, clock: clock)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = client(mock, limiter)
        for _ in 0..<300 { #expect(await send(client).isSuccess) }
        #expect(mock.requests.count == 300 && limiter.snapshot(for: Self.origin).rejected == 0)

        let gate = LimiterGate()
        mock.stub(nil, "/v1/held", reply: .handler { _ in await gate.wait(); return .status(503) })
        let held = Task { await self.send(client, "/held") }
        await until { limiter.snapshot(for: Self.origin).inFlight == 1 }
        held.cancel()
        guard case .failure(let error) = await held.value else { Issue.record("succeeded"); return }
        #expect(error == .cancelled)
        let totals = limiter.origins.withLock { $0[Self.origin]?.throttleWindow.totals }
        #expect(totals?.requests == 300 && totals?.accepts == 300)
        await gate.open()
    }

    /// The check runs 20 requests at once by default: against a limit of 5 it says so (it used to
    /// wait forever), and with `concurrentRequests: 5` the behavior passes.
    @Test func theContractCheckReportsALimitBelowItsConcurrencyInsteadOfHanging() async {
        func limited() -> (ConcurrencyLimitBehavior, @Sendable () -> Int) {
            let limiter = ConcurrencyLimiter(options: .init(initialLimit: 5, minLimit: 5, maxLimit: 5))
            return (ConcurrencyLimitBehavior(limiter), {
                limiter.origins.withLock { $0.all.values.reduce(0) { $0 + $1.inFlight + $1.queue.count + $1.placed.count } }
            })
        }
        let (behavior, probe) = limited()
        let violations = await BehaviorContractCheck(behavior, probe: probe).run()
        #expect(violations.contains { $0.message.hasPrefix("only 5 of 20 concurrent requests reached the transport") })
        #expect(violations.allSatisfy { $0.scenario == "concurrent requests finishing in reverse order" }, "\(violations)")
        let (fresh, freshProbe) = limited()
        let fitting = await BehaviorContractCheck(fresh, concurrentRequests: 5, probe: freshProbe).run()
        #expect(fitting.isEmpty, "\(fitting)")
    }

    @Test func clampedOptions() {
        let options = ConcurrencyLimiter.Options(
            initialLimit: -5, minLimit: 0, maxLimit: .max, backoffRatio: .nan, latencyTolerance: 0, maxQueue: -1,
            maxWait: .seconds(-1))
        #expect(options.minLimit == 1 && options.initialLimit == 1 && options.maxLimit == 10_000)
        #expect(options.backoffRatio == 0.9 && options.latencyTolerance == 1.1 && options.maxQueue == 0)
        #expect(options.maxWait == .zero)
        #expect(ConcurrencyLimiter.Options(throttle: 0).throttle == 1)
        #expect(ConcurrencyLimiter.Options(throttle: .nan).throttle == nil)
    }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}

/// Holds answers until opened.
private actor LimiterGate {
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
