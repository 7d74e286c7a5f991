import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct Echo: Decodable, Sendable {
    var method: String
    var headers: [String: String]
}

/// One end-to-end test per behavior: NetworkClient + URLSession against the local server.
@Suite struct EndToEndBehaviorTests {
    func client(
        _ server: LocalServer, @RequestBehaviorBuilder behaviors: () -> [any RequestBehavior]
    ) -> NetworkClient {
        NetworkClient(
            baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral),
            configuration: .init(clock: ImmediateClock()), behaviors: behaviors)
    }

    @Test func headersArrive() async throws {
        try await LocalServer.withServer { server in
            let echo: Echo = try await client(server) { HeadersBehavior(["User-Agent": "Conveyor-Test/1"]) }.get("/echo")
            #expect(echo.headers["user-agent"] == "Conveyor-Test/1")
        }
    }

    @Test func authRefreshesAfterARealServer401() async throws {
        try await LocalServer.withServer { server in
            let store = InMemoryTokenStore(token: "expired") { _ in "valid" }
            let auth = AuthTokenBehavior(tokens: store, refresher: store)
            let result: [String: Bool] = try await client(server) { auth }.get("/auth", query: ["token": "valid"])
            #expect(result == ["ok": true])
            #expect(await auth.refreshCount == 1)
        }
    }

    @Test func retryRecoversFromARealFlakyEndpoint() async throws {
        try await LocalServer.withServer { server in
            let clock = ImmediateClock()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral),
                configuration: .init(clock: clock)
            ) { RetryBehavior(.exponentialBackoff(maxAttempts: 4, jitter: .none)) }
            let result: [String: Int] = try await client.get("/flaky/e2e", query: ["failures": 2, "status": 503, "retryAfter": 3])
            #expect(result == ["attempts": 3])
            #expect(clock.sleeps == [.seconds(3), .seconds(3)])  // the server's Retry-After, not the backoff
        }
    }

    @Test func idempotencyKeyArrivesOnAPost() async throws {
        try await LocalServer.withServer { server in
            let echo = try await client(server) { IdempotencyKeyBehavior(makeKey: { "key-42" }) }
                .send(Request<Echo>(method: .post, path: "/echo", body: .json(["a": 1])))
            #expect(echo.headers["idempotency-key"] == "key-42")
        }
    }

    @Test func activityCounterReturnsToZero() async throws {
        try await LocalServer.withServer { server in
            let counter = NetworkActivityCounter()
            let client = client(server) { ActivityCounterBehavior(counter: counter) }
            let _: Echo = try await client.get("/echo")
            _ = await outcome { try await client.send(Request<Void>(path: "/status/500")) }
            #expect(counter.count == 0)
        }
    }

    @Test func backgroundTaskEndsAfterARealRequest() async throws {
        try await LocalServer.withServer { server in
            let runner = FakeTaskRunner()
            let _: Echo = try await client(server) { BackgroundTaskBehavior(runner: runner) }.get("/echo")
            #expect(runner.state.withLock { ($0.begun, $0.ended) } == ([1], [1]))
        }
    }

    @Test func loggingRedactsARealRequest() async throws {
        try await LocalServer.withServer { server in
            let sink = CapturingLogSink()
            let client = client(server) {
                AuthTokenBehavior(tokens: InMemoryTokenStore(token: "real-SECRET"))
                LoggingBehavior(sink: sink, bodyPreviewLimit: 4096)
            }
            let echo: Echo = try await client.get("/echo")
            #expect(echo.headers["authorization"] == "Bearer real-SECRET")  // sent for real…
            let text = sink.messages.joined(separator: "\n")
            #expect(!text.contains("real-SECRET"), "\(text)")  // …but never logged, even in the echoed body
            #expect(text.contains("Authorization: ***"))
        }
    }

    @Test func responseVerificationCatchesAPortalThatDoesNotEcho() async throws {
        try await LocalServer.withServer { server in
            let client = client(server) { ResponseVerificationBehavior() }
            #expect(await outcome { try await client.send(Request<Void>(path: "/nonce")) } == "success")
            #expect(await outcome { try await client.send(Request<Void>(path: "/nonce", query: ["echo": 0])) }
                == "ResponseVerificationBehavior failed in validate")
        }
    }
}
