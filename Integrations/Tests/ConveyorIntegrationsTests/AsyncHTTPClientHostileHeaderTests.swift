import Conveyor
import ConveyorTesting
import Foundation
import IntegrationsTestSupport
import Testing

/// contract rule 17 on AsyncHTTPClient: the local server answers with non-ASCII and invalid-UTF-8
/// bytes in `Retry-After`, `Date`, `Expires`, `Last-Modified`, `Vary` and `Content-Type`
/// (Tests/Server/server.py, `/hostile`), through retry, cache and logging. Every request ends
/// with a response or a typed error and the process lives, with the same outcomes as on
/// URLSession: AsyncHTTPClient hands invalid UTF-8 over as U+FFFD, which the framing policy
/// refuses as FoundationNetworking does.
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
                        outcomes.append(error.name)
                    }
                }
            }
            // The same outcomes as URLSession's (HostileHeaderTests): the variants that are not
            // UTF-8 (2 and 4) are refused by the framing policy, the rest reach the behaviors.
            let reached = header == "Retry-After" ? "unacceptableStatus" : "200"
            let expected = [reached, reached, reached, reached, "transportFailed", "transportFailed", reached, reached,
                "transportFailed", "transportFailed"]
            #expect(outcomes == expected, "\(outcomes)")
            #expect(sink.count >= 10)
        }
    }
}
