import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Deadlines are absolute (contract rule 10): a response that arrives a byte at a time never
/// outlives the per-attempt timeout, under any chain of the standard behaviors, with requests
/// that retry and that join a shared call. Every trickle below lasts at least twice the timeout,
/// so a success would mean an attempt outlived its deadline; the server's pace is the only real
/// time involved, and the outcome, not a clock, is what is checked.
@Suite struct TrickleDeadlineTests {
    static let timeout = Duration.milliseconds(200)

    static func chain(_ index: Int) -> [any RequestBehavior] {
        switch index {
        case 0: return []
        case 1: return [RetryBehavior(RetryPolicy(maxAttempts: 2, baseDelay: .zero, jitter: .none))]
        case 2: return [CacheBehavior(storage: MemoryCacheStorage())]
        case 3: return [DeduplicationBehavior()]
        default:
            return [
                RetryBehavior(RetryPolicy(maxAttempts: 2, baseDelay: .zero, jitter: .none)),
                CacheBehavior(storage: MemoryCacheStorage()), DeduplicationBehavior(),
            ]
        }
    }

    @Test(arguments: 0..<5)
    func aTrickledResponseNeverOutlivesTheTimeout(chainIndex: Int) async throws {
        var random = SplitMix64(state: UInt64(chainIndex) &+ 31)
        try await LocalServer.withServer { server in
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(), configuration: .init(timeout: Self.timeout),
                behaviors: { Self.chain(chainIndex) })
            for _ in 0..<4 {
                // 20–40 bytes, 20–30 ms apart: 0.4–1.2 s for the body alone, at least twice the
                // timeout. (Twice as long, at 400 ms, it checked nothing more: on Linux every
                // waiting URLSession connection spins a core, so it cost twice the CPU.)
                let size = 20 + Int(random.next() % 21)
                let interval = 0.02 + Double(random.next() % 11) / 1_000
                let head = random.next() % 2 == 0
                let inFlight = 4 + Int(random.next() % 6)
                let outcomes = await withTaskGroup(of: String.self) { group in
                    // Arrivals spread over the whole trickle, so that a caller can join a shared call
                    // late (the stretch this test once found: a call kept alive by later callers
                    // delivered, after 2.4 s, a response to a caller that had waited 0.3 s). The
                    // pause only places an arrival; nothing waits for an effect.
                    let span = Double(size) * interval
                    for index in 0..<inFlight {
                        let arrival = Duration.seconds(span * Double(index) / Double(inFlight))
                        group.addTask {
                            try? await Task.sleep(for: arrival)
                            do throws(NetworkError) {
                                let response = try await client.send(
                                    Request<HTTPResponse>(
                                        path: "/trickle",
                                        query: ["bytes": size, "interval": String(interval), "head": head ? "1" : "0"]))
                                return "success \(response.body.count) bytes"
                            } catch {
                                if case .notRetryable = error, let after = error.after { return after.name }
                                return error.name
                            }
                        }
                    }
                    return await group.reduce(into: [String]()) { $0.append($1) }
                }
                #expect(
                    outcomes.allSatisfy { $0 == "timedOut" },
                    "chain \(chainIndex), \(size) bytes every \(interval) s, head \(head), \(inFlight) in flight: \(outcomes)")
            }
        }
    }
}
