import Conveyor
import ConveyorTesting
import Foundation
import IntegrationsTestSupport
import Testing

/// DESIGN rule 17 on AsyncHTTPClient: the local server answers with non-ASCII and invalid-UTF-8
/// bytes in `Retry-After`, `Date`, `Expires`, `Last-Modified`, `Vary` and `Content-Type`
/// (Tests/Server/server.py, `/hostile`), through retry, cache and logging. Every request ends
/// with a response or a typed error and the process lives. Unlike FoundationNetworking,
/// AsyncHTTPClient hands every variant to the behaviors, invalid UTF-8 included.
@Suite struct AsyncHTTPClientHostileHeaderTests {
    final class Sink: LogSink, @unchecked Sendable {  // its one counter is behind the lock
        private let lock = NSLock()
        private var written = 0
        var isEnabled: Bool { true }
        var count: Int { lock.withLock { written } }
        func write(_ entry: LogEntry) { lock.withLock { written += 1 } }
    }

    @Test(arguments: ["Retry-After", "Date", "Expires", "Last-Modified", "Vary", "Content-Type"])
    func everyHostileValueEndsInAResponseOrATypedError(_ header: String) async throws {
        try await LocalServer.withServer { server in
            let sink = Sink()
            let client = try ahcClient(server) {
                LoggingBehavior(sink: sink, bodyPreviewLimit: 200)
                RetryBehavior(RetryPolicy(maxAttempts: 2, baseDelay: .zero, jitter: .none))
                CacheBehavior(storage: MemoryCacheStorage())
            }
            var outcomes: [String] = []
            for variant in 0..<5 {
                for _ in 0..<2 {
                    do throws(NetworkError) {
                        let response = try await client.send(
                            Request<HTTPResponse>(path: "/hostile", query: ["header": header, "variant": variant]))
                        outcomes.append("\(response.status)")
                    } catch {
                        outcomes.append(error.caseName)
                    }
                }
            }
            let reached = header == "Retry-After" ? "unacceptableStatus" : "200"
            #expect(outcomes == Array(repeating: reached, count: 10), "\(outcomes)")
            #expect(sink.count >= 10)
        }
    }
}
