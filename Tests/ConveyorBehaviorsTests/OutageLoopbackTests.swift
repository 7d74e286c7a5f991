import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The outage of the overload simulation against a real server on 127.0.0.1 over URLSession: an
/// upstream that answers 503 to everything (`/flaky/<key>` with more failures than requests),
/// 100 requests, 3 attempts each by the policy. The server counts what reached it.
@Suite struct OutageLoopbackTests {
    struct Seen: Decodable { var traceparent: [[String]] }

    /// Sends 100 requests with `behaviors` and returns the attempts the server received.
    func attempts(budget: Bool, breaker: Bool) async throws -> Int {
        try await LocalServer.withServer { server in
            var configuration = NetworkClient.Configuration()
            if !budget { configuration.retryBudget = nil }
            let policy = RetryPolicy.exponentialBackoff(maxAttempts: 3, baseDelay: .milliseconds(5), maxDelay: .milliseconds(20))
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral), configuration: configuration
            ) {
                RetryBehavior(policy)
                if breaker { CircuitBreakerBehavior(CircuitBreaker(options: .init(breakDuration: .seconds(600))), policy: policy) }
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
            // Every request ends with the server's 503 or, once the circuit is open, at once.
            #expect(breaker || answered503 == 100)
            let plain = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral))
            let seen: Seen = try await plain.get("/flaky/\(key)/seen")
            return seen.traceparent.count
        }
    }

    @Test func theBudgetHoldsAnOutageOverRealHTTP() async throws {
        let without = try await attempts(budget: false, breaker: false)
        #expect(without == 300, "the policy alone sends its 3 attempts per request")
        // A fifth of the requests, or the floor of ten per 10 s window (one a second) if larger: 20
        // retries when the run fits in a window (it takes well under a second), up to 20 more
        // when a stall of the machine stretches it over two more windows.
        let budgeted = try await attempts(budget: true, breaker: false)
        #expect(budgeted >= 100 && budgeted <= 140, "\(budgeted) attempts for 100 requests")
        // The breaker opens after 20 attempts at least half failing, then refuses at once.
        let broken = try await attempts(budget: true, breaker: true)
        #expect(broken >= 20 && broken <= 40, "\(broken) attempts for 100 requests")
    }
}
