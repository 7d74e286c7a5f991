import Conveyor
import ConveyorTesting
import Foundation
import IntegrationsTestSupport
import Testing

/// Deadlines are absolute on AsyncHTTPClient too (`TrickleDeadlineTests` for URLSession): a
/// response trickled over at least twice the timeout never succeeds, alone or through retry,
/// cache and de-duplication with callers arriving all along the trickle.
@Suite struct AsyncHTTPClientTrickleTests {
    @Test(arguments: [false, true])
    func aTrickledResponseNeverOutlivesTheTimeout(withBehaviors: Bool) async throws {
        var random = SplitMix64(state: withBehaviors ? 7 : 8)
        try await LocalServer.withServer { server in
            let client = try ahcClient(server, timeout: .milliseconds(400)) {
                if withBehaviors {
                    RetryBehavior(RetryPolicy(maxAttempts: 2, baseDelay: .zero, jitter: .none))
                    CacheBehavior(storage: MemoryCacheStorage())
                    DeduplicationBehavior()
                }
            }
            for _ in 0..<3 {
                let size = 20 + Int(random.next() % 21)
                let interval = 0.04 + Double(random.next() % 21) / 1_000
                let head = random.next() % 2 == 0
                let inFlight = 4 + Int(random.next() % 6)
                let span = Double(size) * interval
                let outcomes = await withTaskGroup(of: String.self) { group in
                    for index in 0..<inFlight {
                        // Arrivals spread over the trickle; the pause only places an arrival.
                        let arrival = Duration.seconds(span * Double(index) / Double(inFlight))
                        group.addTask {
                            try? await Task.sleep(for: arrival)
                            do throws(NetworkError) {
                                _ = try await client.send(
                                    Request<HTTPResponse>(
                                        path: "/trickle",
                                        query: ["bytes": size, "interval": String(interval), "head": head ? "1" : "0"]))
                                return "success"
                            } catch {
                                if case .notRetryable = error, let after = error.after { return after.name }
                                return error.name
                            }
                        }
                    }
                    return await group.reduce(into: [String]()) { $0.append($1) }
                }
                #expect(outcomes.allSatisfy { $0 == "timedOut" }, "\(size) bytes every \(interval) s, head \(head): \(outcomes)")
            }
        }
    }
}
