import Conveyor
import ConveyorMetrics
import ConveyorTesting
import CoreMetrics
import Foundation
import MetricsTestKit
import Testing

/// `ResilienceMetrics` records what the breaker and the concurrency limiter decide, with the
/// servers' dimensions only.
@Suite struct ResilienceMetricsTests {
    let api = URL(string: "https://api.test:8443")!
    var server: [(String, String)] { [("server.address", "api.test"), ("server.port", "8443")] }

    /// A circuit opened by failures, then isolated and closed by an operator: each state is the
    /// gauge's value in turn, and each transition counted under its state.
    @Test func circuitTransitionsAreAGaugeAndACounter() async throws {
        let metrics = TestMetrics()
        let recorder = ResilienceMetrics(factory: metrics)
        let breaker = CircuitBreaker(
            options: .init(minimumThroughput: 2), clock: ManualClock(), onChange: recorder.circuitChanged)
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .status(503))
        let client = NetworkClient(baseURL: api, transport: mock) { CircuitBreakerBehavior(breaker) }
        for _ in 0..<3 { _ = try? await client.send(Request<Void>(path: "/x")) }
        let origin = Origin(api)!
        breaker.isolate(origin)
        breaker.close(origin)
        #expect(try metrics.expectGauge("conveyor.circuit.state", server).values == [2, 3, 0])
        #expect(try metrics.expectCounter("conveyor.circuit.transitions", server + [("conveyor.circuit.state", "open")])
            .totalValue == 1)
        #expect(try metrics.expectCounter("conveyor.circuit.transitions", server + [("conveyor.circuit.state", "isolated")])
            .totalValue == 1)
        #expect(try metrics.expectCounter("conveyor.circuit.transitions", server + [("conveyor.circuit.state", "closed")])
            .totalValue == 1)
        #expect(mock.requests.count == 2)  // the third request was refused by the open circuit
    }

    /// A failure lowers the limit: the gauge reads the new one.
    @Test func aLimitChangeIsAGauge() async throws {
        let metrics = TestMetrics()
        let recorder = ResilienceMetrics(factory: metrics)
        let limiter = ConcurrencyLimiter(
            options: .init(initialLimit: 10), clock: ManualClock(), onChange: recorder.limitChanged)
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503))
        var configuration = NetworkClient.Configuration()
        configuration.retryBudget = nil
        let client = NetworkClient(baseURL: api, transport: mock, configuration: configuration) {
            ConcurrencyLimitBehavior(limiter)
        }
        _ = try? await client.send(Request<Void>(path: "/x"))
        // One in flight: from twice that use, 2 × 0.9 = 1.8.
        #expect(try metrics.expectGauge("conveyor.concurrency.limit", server).values == [1])
    }

    /// `ResilienceMetricsBehavior` records a retry the budget refused.
    @Test func aRefusedRetryIsCounted() async throws {
        let metrics = TestMetrics()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .status(200))
        var configuration = NetworkClient.Configuration(clock: ImmediateClock())
        configuration.retryBudget = RetryBudget(ratio: 0, minimumPerSecond: 0, clock: ManualClock())
        let client = NetworkClient(baseURL: api, transport: mock, configuration: configuration) {
            ResilienceMetricsBehavior(ResilienceMetrics(factory: metrics))
            RetryBehavior()
        }
        _ = try? await client.send(Request<Void>(path: "/x"))
        #expect(try metrics.expectCounter("conveyor.retry.refused", server).totalValue == 1)
        #expect(mock.requests.count == 1)
    }

    /// The time the rate limiter held a request is a timer; nothing is recorded for a request it
    /// did not hold.
    @Test func pacingIsATimer() async throws {
        let metrics = TestMetrics()
        let clock = ManualClock()
        let mock = MockTransport(baseURL: api)
        mock.stub(nil, "/x", reply: .status(200))
        let client = NetworkClient(baseURL: api, transport: mock) {
            ResilienceMetricsBehavior(ResilienceMetrics(factory: metrics))
            RateLimitBehavior(RateLimiter(quota: .init(1, per: .seconds(10)), clock: clock))
        }
        try await client.send(Request<Void>(path: "/x"))
        #expect(throws: (any Error).self) { try metrics.expectTimer("conveyor.ratelimit.waited", server) }
        let second = Task { try await client.send(Request<Void>(path: "/x")) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(10))
        try await second.value
        #expect(try metrics.expectTimer("conveyor.ratelimit.waited", server).values == [10_000_000_000])
    }

    /// A hedge that wins is counted as sent and as won, and the slow first attempt as cancelled.
    @Test func hedgesAreCounted() async throws {
        let metrics = TestMetrics()
        let clock = ManualClock()
        let mock = MockTransport(baseURL: api, clock: clock)
        mock.enqueue(.delayed(.seconds(60), .status(200)), .delayed(.seconds(1), .status(200)))
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: clock)) {
            ResilienceMetricsBehavior(ResilienceMetrics(factory: metrics))
            HedgingBehavior(delay: .fixed(.seconds(1)))
        }
        let task = Task { try await client.send(Request<Void>(path: "/x")) }
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(1))
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(1))
        try await task.value
        #expect(try metrics.expectCounter("conveyor.hedge.sent", server).totalValue == 1)
        #expect(try metrics.expectCounter("conveyor.hedge.won", server).totalValue == 1)
        #expect(try metrics.expectCounter("conveyor.hedge.cancelled", server).totalValue == 1)
        #expect(throws: (any Error).self) { try metrics.expectCounter("conveyor.hedge.refused", server) }
    }
}
