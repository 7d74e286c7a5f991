import Conveyor
import ConveyorTestSupport
import Foundation
import Testing

/// Many responses over their size limit at once end promptly with `.responseTooLarge`. The chaos
/// soak found that eight 2 MiB responses over a 1 MiB limit could stall URLSessionTransport for
/// more than 30 s on Linux: each `cancel()` held a lock that the delegate queue needed while it
/// waited for the work queue, which the stalled delegate queue let through 50 ms per chunk
/// (DelegateQueue now stops holding the work queue back while a cancel is in progress).
@Suite struct ConcurrentLimitTests {
    @Test func eightResponsesOverTheirLimitAtOnceAllEndAsTooLarge() async throws {
        do {
            try await LocalServer.withServerInMemoryTurn { server in
                // A 20 s timeout: a stalled cancel (more than 30 s before the fix) shows as `.timedOut`
                // instead of `.responseTooLarge`. 10 s was not enough for a 2-core machine running the
                // thread-sanitized suite beside another test run (all 8 timed out; alone: 0.4 s).
                let client = NetworkClient(
                    baseURL: server.baseURL, transport: URLSessionTransport(),
                    configuration: .init(timeout: .seconds(20), maxResponseSize: 1 << 20))
                for _ in 0..<3 {
                    let outcomes = await withTaskGroup(of: String.self) { group in
                        for _ in 0..<8 {
                            group.addTask {
                                do throws(NetworkError) {
                                    _ = try await client.send(Request<Data>(path: "/bytes", query: ["count": 4 << 20]))
                                    return "success"
                                } catch {
                                    return error.name
                                }
                            }
                        }
                        return await group.reduce(into: [String]()) { $0.append($1) }
                    }
                    #expect(outcomes == Array(repeating: "responseTooLarge", count: 8), "\(outcomes)")
                }
            }
        } catch {
            Issue.record(error)
        }
    }
}
