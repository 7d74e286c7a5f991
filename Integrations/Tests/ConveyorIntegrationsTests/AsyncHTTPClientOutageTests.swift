import Conveyor
import ConveyorAsyncHTTPClient
import Foundation
import IntegrationsTestSupport
import Testing

/// The outage of Resilience.md over AsyncHTTPClient, as `OutageLoopbackTests` runs it over
/// URLSession: 100 requests to a local endpoint that answers 503 to everything, 3 attempts each
/// by the policy; the server counts what reached it.
@Suite struct AsyncHTTPClientOutageTests {
    struct Seen: Decodable { var traceparent: [[String]] }

    func attempts(budget: Bool, breaker: Bool) async throws -> Int {
        try await LocalServer.withServer { server in
            var configuration = NetworkClient.Configuration()
            if !budget { configuration.retryBudget = nil }
            let policy = RetryPolicy.exponentialBackoff(
                maxAttempts: 3, baseDelay: .milliseconds(5), maxDelay: .milliseconds(20))
            let client = NetworkClient(
                baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient),
                configuration: configuration
            ) {
                RetryBehavior(policy)
                if breaker {
                    CircuitBreakerBehavior(CircuitBreaker(options: .init(breakDuration: .seconds(600))), policy: policy)
                }
            }
            let key = UUID().uuidString
            var answered503 = 0
            for _ in 0..<100 {
                do throws(NetworkError) {
                    try await client.send(Request<Void>(path: "/flaky/\(key)", query: ["failures": "1000000"]))
                } catch {
                    if error.status == 503 { answered503 += 1 }
                }
            }
            #expect(breaker || answered503 == 100)
            let seen: Seen = try await ahcClient(server).get("/flaky/\(key)/seen")
            return seen.traceparent.count
        }
    }

    @Test func theBudgetHoldsAnOutageOverAsyncHTTPClient() async throws {
        let without = try await attempts(budget: false, breaker: false)
        #expect(without == 300, "the policy alone sends its 3 attempts per request")
        // A fifth of the requests, or the floor of ten per 10 s window if larger (up to 20 more
        // when a stall of the machine stretches the run over two more windows).
        let budgeted = try await attempts(budget: true, breaker: false)
        #expect(budgeted >= 100 && budgeted <= 140, "\(budgeted) attempts for 100 requests")
        let broken = try await attempts(budget: true, breaker: true)
        #expect(broken >= 20 && broken <= 40, "\(broken) attempts for 100 requests")
    }
}
