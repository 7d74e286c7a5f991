import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// contract rule 17 end to end: the local server answers with non-ASCII and invalid-UTF-8 bytes in
/// `Retry-After`, `Date`, `Expires`, `Last-Modified`, `Vary` and `Content-Type`, through the
/// behaviors that read those headers (retry, cache, logging with a body preview). Every request
/// ends with a response or a typed error, and the process lives: until Conveyor read dates by
/// hand, the first of these requests ended the test process on Linux.
@Suite struct HostileHeaderTests {
    static let headers = ["Retry-After", "Date", "Expires", "Last-Modified", "Vary", "Content-Type"]
    static let variants = 0..<5  // Tests/Server/server.py, HOSTILE_VALUES

    @Test(arguments: headers)
    func everyHostileValueEndsInAResponseOrATypedError(_ header: String) async throws {
        try await LocalServer.withServer { server in
            let sink = CapturingLogSink()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(), configuration: .init(clock: ImmediateClock())
            ) {
                LoggingBehavior(sink: sink, bodyPreviewLimit: 200)
                RetryBehavior(.exponentialBackoff(maxAttempts: 2))
                CacheBehavior(storage: MemoryCacheStorage())
            }
            var outcomes: [String] = []
            for variant in Self.variants {
                for _ in 0..<2 {  // the second may be answered from the cache
                    do throws(NetworkError) {
                        let response = try await client.send(
                            Request<HTTPResponse>(path: "/hostile", query: ["header": header, "variant": variant]))
                        outcomes.append("\(response.status)")
                    } catch {
                        outcomes.append(error.name)
                    }
                }
            }
            #expect(outcomes.count == 10)
            // Not vacuous: the UTF-8 variants (0, 1, 3) reach the behaviors; the two that are not
            // UTF-8 are refused (FoundationNetworking refuses them itself; the framing policy
            // refuses them on every transport, AsyncHTTPClientHostileHeaderTests).
            let reached = header == "Retry-After" ? "unacceptableStatus" : "200"
            let expected = [reached, reached, reached, reached, "transportFailed", "transportFailed", reached, reached,
                "transportFailed", "transportFailed"]
            #expect(outcomes == expected, "\(outcomes)")
            #expect(sink.entries.count >= 10)
        }
    }
}
