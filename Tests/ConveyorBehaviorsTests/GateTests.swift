@testable import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// The gates (circuit breaker, rate limiter, concurrency limiter) stand at the transport's door,
/// whatever their place in the chain (Docs/Resilience.md, "Where the gates stand").
@Suite struct GateTests {
    static let origin = Origin(apiURL)!

    /// Answers every attempt itself: a stub, or a cache that always hits.
    struct Answers: AttemptIntercepting {
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            HTTPResponse(status: 200, request: request)
        }
    }

    /// Sends each attempt twice and keeps the second answer.
    struct SendsTwice: AttemptIntercepting {
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            _ = try await next(request)
            return try await next(request)
        }
    }

    /// A wrapper written by hand: it declares `intercept` and forwards to the gate it holds.
    struct Wrapped: AttemptIntercepting {
        let inner: CircuitBreakerBehavior
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            try await inner.intercept(request, context: context, next: next)
        }
    }

    func configuration(timeout: Duration? = nil, timeoutClock: ManualClock? = nil) -> NetworkClient.Configuration {
        var configuration = NetworkClient.Configuration(timeout: timeout, clock: ImmediateClock())
        if let timeoutClock { configuration.timeoutClock = timeoutClock }
        configuration.retryBudget = nil
        return configuration
    }

    func send(_ client: NetworkClient, _ request: Request<Void> = Request<Void>(path: "/x")) async -> NetworkError? {
        do throws(NetworkError) {
            try await client.send(request)
            return nil
        } catch {
            return error
        }
    }

    @Test func anAttemptAnInterceptorAnswersIsNeverAdmittedWhereverTheGateStands() async {
        let breaker = CircuitBreaker(clock: ManualClock())
        breaker.isolate(Self.origin)
        let limiter = ConcurrencyLimiter(options: .init(initialLimit: 1, maxQueue: 0), clock: ManualClock())
        let mock = MockTransport()
        // The gates first, the answering member last: the gates still stand next to the transport,
        // which is never reached, so the isolated circuit refuses nothing and nothing is counted.
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration()) {
            CircuitBreakerBehavior(breaker)
            ConcurrencyLimitBehavior(limiter)
            Answers()
        }
        for _ in 0..<3 { #expect(await send(client) == nil) }
        #expect(mock.requests.isEmpty)
        #expect(limiter.snapshot(for: Self.origin).inFlight == 0)
        #expect(limiter.snapshot(for: Self.origin).rejected == 0)
    }

    @Test func everyCallOfAnInterceptorsNextIsAdmittedOnItsOwn() async {
        let limiter = RateLimiter(quota: .init(3, per: .seconds(60)), maxWait: .zero, clock: ManualClock())
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration()) {
            RateLimitBehavior(limiter)
            SendsTwice()
        }
        #expect(await send(client) == nil)  // two exchanges: two turns of three
        let second = await send(client)  // the third turn, then none left
        #expect(second.map { NetworkError.rateLimited ~= $0 } == true)
        #expect(mock.requests.count == 3)
        #expect(limiter.snapshot(for: Self.origin).inFlight == 0)
    }

    @Test func aGateHeldByAWrapperStillGuardsTheTransport() async {
        let breaker = CircuitBreaker(clock: ManualClock())
        breaker.isolate(Self.origin)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration()) {
            Wrapped(inner: CircuitBreakerBehavior(breaker))
        }
        let error = await send(client)
        #expect(error.map { NetworkError.circuitOpen ~= $0 } == true)
        #expect(mock.requests.isEmpty)
        // Inside a chain that is itself wrapped (a one-member chain an interceptor forwards to).
        breaker.close(Self.origin)
        for _ in 0..<30 { _ = await send(client) }
        #expect(breaker.state(of: Self.origin) == .closed)
        #expect(mock.requests.count == 30)
    }

    @Test func aGateThatRefusesReleasesTheGatesBeforeItAsNotCounted() async {
        // The breaker is half-open with one probe; the limiter after it refuses the probe's
        // attempt. The probe must be given back (not counted as a failure), so the next request
        // probes.
        let clock = ManualClock()
        let breaker = CircuitBreaker(options: .init(minimumThroughput: 1, breakDuration: .seconds(5)), clock: clock)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503))
        let limiter = ConcurrencyLimiter(options: .init(initialLimit: 1, minLimit: 1, maxLimit: 1, maxQueue: 0), clock: clock)
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration()) {
            CircuitBreakerBehavior(breaker)
            ConcurrencyLimitBehavior(limiter)
        }
        // One 503 opens the circuit (minimum throughput 1).
        _ = await send(client)
        #expect(breaker.state(of: Self.origin) == .open(remaining: .seconds(5)))
        clock.advance(by: .seconds(5))
        // Take the limiter's only place, so the probe's attempt is refused by the second gate.
        let entry = try? limiter.enter(Self.origin, within: nil)
        let refused = await send(client)
        #expect(refused.map { NetworkError.rateLimited ~= $0 } == true)
        #expect(breaker.state(of: Self.origin) == .halfOpen)
        if case .placed(let started, let account)? = entry { limiter.release(account, started: started, failed: nil) }
        // The probe's place was given back: this request probes, and its 200 closes the circuit.
        mock.stub(nil, "/v1/x", reply: .status(200))
        #expect(await send(client) == nil)
        #expect(breaker.state(of: Self.origin) == .closed)
        #expect(mock.requests.count == 2)
    }

    @Test func aGateOnTheRequestAndAnExclusionByType() async {
        let breaker = CircuitBreaker(clock: ManualClock())
        breaker.isolate(Self.origin)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let plain = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration())
        let attached = Request<Void>(path: "/x", behaviors: [CircuitBreakerBehavior(breaker)])
        #expect(await send(plain, attached).map { NetworkError.circuitOpen ~= $0 } == true)
        let guarded = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration()) {
            CircuitBreakerBehavior(breaker)
        }
        #expect(await send(guarded).map { NetworkError.circuitOpen ~= $0 } == true)
        #expect(await send(guarded, Request<Void>(path: "/x").excluding(.type(CircuitBreakerBehavior.self))) == nil)
        #expect(mock.requests.count == 1)
    }

    @Test func anAttemptItsTimeoutEndsIsReleasedOnceAndCountedAsAFailure() async throws {
        let timeoutClock = ManualClock()
        let limiter = ConcurrencyLimiter(options: .init(initialLimit: 4), clock: ManualClock())
        let breaker = CircuitBreaker(options: .init(minimumThroughput: 2), clock: ManualClock())
        let mock = MockTransport()
        let gate = Gate()
        mock.stub(nil, "/v1/x", reply: .handler { _ in await gate.wait(); return .status(200) })
        let client = NetworkClient(
            baseURL: apiURL, transport: mock, configuration: configuration(timeout: .seconds(1), timeoutClock: timeoutClock)
        ) {
            ConcurrencyLimitBehavior(limiter)
            CircuitBreakerBehavior(breaker)
        }
        let tasks = (0..<2).map { _ in Task { await send(client) } }
        await timeoutClock.waitForSleepers(2)
        timeoutClock.advance(by: .seconds(1))
        for task in tasks { #expect(await task.value.map { NetworkError.timedOut ~= $0 } == true) }
        await gate.open()
        // The abandoned attempts end when the transport returns: each gate is released once.
        var turns = 0
        while limiter.snapshot(for: Self.origin).inFlight > 0 || breaker.state(of: Self.origin) == .closed, turns < 100_000 {
            await Task.yield()
            turns += 1
        }
        #expect(breaker.state(of: Self.origin) != .closed)  // two timeouts: a failing origin
        #expect(limiter.snapshot(for: Self.origin).inFlight == 0)
        #expect(mock.requests.count == 2)
    }

    /// A gate that counts the exchanges it admitted and has not been told the end of.
    struct CountingGate: AttemptIntercepting, AttemptGating {
        final class Count: @unchecked Sendable {
            // @unchecked: `value` is only touched under `lock`.
            let lock = NSLock()
            var value = 0
            func add(_ delta: Int) { lock.withLock { value += delta } }
            var current: Int { lock.withLock { value } }
        }
        let outstanding = Count()
        static var _declaredHooks: UInt16 { HookBits.gates | HookBits.intercept }
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            try await exchange(request, context: context, next: next)
        }
        func admit(_ request: HTTPRequest, context: RequestContext) throws(NetworkError) -> GatePass {
            outstanding.add(1)
            return GatePass()
        }
        func waitForTurn(_ pass: GatePass, context: RequestContext) async throws(NetworkError) -> GatePass { pass }
        func release(_ pass: GatePass, answered response: HTTPResponse, context: RequestContext) { outstanding.add(-1) }
        func release(_ pass: GatePass, failed failure: NetworkError, context: RequestContext) { outstanding.add(-1) }
    }

    /// Every scenario of the contract (failures, retries, cancellation in flight and in a backoff
    /// wait, hedged races with two attempts at the door at once, 20 concurrent requests): every
    /// exchange a gate admitted is released exactly once.
    @Test func everyAdmittedExchangeIsReleasedOnceInEveryScenarioOfTheContract() async {
        let gate = CountingGate()
        let violations = await BehaviorContractCheck(gate) { gate.outstanding.current }.run()
        #expect(violations.isEmpty, "\(violations)")
        #expect(gate.outstanding.current == 0)
    }
}
