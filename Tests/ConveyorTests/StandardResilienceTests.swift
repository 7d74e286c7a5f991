import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// The standard resilience preset: the members and order Resilience.md gives, the timeouts, and
/// what the whole does to an outage.
private let apiURL = URL(string: "https://api.test/v1")!

@Suite struct StandardResilienceTests {
    @Test func thePresetIsTheDocumentedChainInItsOrder() {
        let chain = CombinedRequestBehavior.standardResilience()
        #expect(chain.behaviors.map { String(describing: type(of: $0)) } == [
            "RetryBehavior", "RateLimitBehavior", "CircuitBreakerBehavior",
        ])
        let withLimiter = CombinedRequestBehavior.standardResilience(concurrencyLimiter: ConcurrencyLimiter())
        #expect(withLimiter.behaviors.map { String(describing: type(of: $0)) } == [
            "RetryBehavior", "RateLimitBehavior", "ConcurrencyLimitBehavior", "CircuitBreakerBehavior",
        ])
        let configuration = NetworkClient.Configuration.standardResilience
        #expect(configuration.timeout == .seconds(10) && configuration.totalTimeout == .seconds(30))
        #expect(configuration.retryBudget != nil && configuration.attemptLimit == 10)
    }

    /// 300 requests to an upstream that answers 503 to everything: the budget holds retries to a
    /// fifth, the breaker opens and then refuses at once; nothing sends the 3 attempts per request
    /// the policy alone would.
    @Test func anOutageCostsTheUpstreamFewerThanOneAttemptPerRequest() async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503))
        var configuration = NetworkClient.Configuration.standardResilience
        configuration.clock = ImmediateClock()
        configuration.timeoutClock = ManualClock()  // read, never waited for
        configuration.retryBudget = RetryBudget(clock: configuration.clock)
        let breaker = CircuitBreaker(clock: ManualClock())  // stays open: no time passes
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            CombinedRequestBehavior.standardResilience(breaker: breaker)
        }
        var refusedAtOnce = 0
        var answered503 = 0
        for _ in 0..<300 {
            do throws(NetworkError) {
                try await client.send(Request<Void>(path: "/x"))
            } catch {
                if NetworkError.circuitOpen ~= error { refusedAtOnce += 1 }
                if error.status == 503 { answered503 += 1 }
            }
        }
        #expect(answered503 + refusedAtOnce == 300)
        #expect(refusedAtOnce > 250)
        #expect(mock.requests.count <= 40, "\(mock.requests.count) attempts for 300 requests")
        guard case .open = breaker.state(of: Origin(apiURL)!) else {
            Issue.record("the circuit is \(breaker.state(of: Origin(apiURL)!))")
            return
        }
    }

    /// A request may leave out a member of the preset by type, as any client behavior.
    @Test func aRequestLeavesOutAMemberByType() async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503))
        var configuration = NetworkClient.Configuration.standardResilience
        configuration.clock = ImmediateClock()
        configuration.timeoutClock = ManualClock()
        configuration.retryBudget = nil
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            CombinedRequestBehavior.standardResilience(breaker: CircuitBreaker(clock: ManualClock()))
        }
        _ = try? await client.send(Request<Void>(path: "/x"))
        #expect(mock.requests.count == 3)
        mock.reset()
        mock.stub(nil, "/v1/x", reply: .status(503))
        _ = try? await client.send(Request<Void>(path: "/x").excluding(.type(RetryBehavior.self)))
        #expect(mock.requests.count == 1)
    }

    /// The order the preset does not take: the breaker outside a rate limiter that refuses every
    /// request after the first. The refusals are not retried and do not open the circuit.
    @Test func aLimitersRefusalIsNeitherRetriedNorCountedByAnOuterBreaker() async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        var configuration = NetworkClient.Configuration(clock: ImmediateClock(), timeoutClock: ManualClock())
        configuration.retryBudget = nil
        let breaker = CircuitBreaker(clock: ManualClock())
        let limiter = RateLimiter(quota: .init(1, per: .seconds(3_600)), maxWait: .zero, clock: ManualClock())
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            RetryBehavior()
            CircuitBreakerBehavior(breaker)
            RateLimitBehavior(limiter)
        }
        var refused = 0
        for _ in 0..<30 {
            do throws(NetworkError) {
                try await client.send(Request<Void>(path: "/x"))
            } catch {
                if NetworkError.rateLimited ~= error { refused += 1 }
            }
        }
        #expect(refused == 29)
        #expect(mock.requests.count == 1)
        #expect(breaker.state(of: Origin(apiURL)!) == .closed)
    }
}
