import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorLogging
import ConveyorTesting
import Foundation
import IntegrationsTestSupport
import InMemoryLogging
import Logging
import Testing

@Suite struct SwiftLogSinkTests {
    let api = URL(string: "https://api.test")!

    func client(logger: Logger, mock: MockTransport, clock: ManualClock = ManualClock(), includesLine: Bool = false)
        -> NetworkClient
    {
        NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 2))
            HeadersBehavior(["Authorization": "Bearer tok-3f9a-SECRET"])
            LoggingBehavior(
                sink: SwiftLogSink(logger: logger, metadata: ["component": "api"], includesLine: includesLine),
                bodyPreviewLimit: 256, clock: clock)
        }
    }

    @Test func levelsFollowTheLibraryGuidanceAndTheLoggerFilters() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test") { _ in handler }
        logger.logLevel = .trace
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("ok"), .status(404))
        let client = client(logger: logger, mock: mock)
        _ = try await client.send(Request<String>(path: "/a"))
        _ = try? await client.send(Request<String>(path: "/b"))
        // An attempt is trace, an outcome debug; a failure the caller receives is not an error log.
        #expect(handler.entries.map(\.level) == [.trace, .debug, .trace, .debug], "\(handler.entries)")
        #expect(handler.entries.map(\.message.description) == [
            "HTTP request attempt", "HTTP request succeeded", "HTTP request attempt", "HTTP request failed",
        ])
        #expect(handler.entries.allSatisfy { $0.metadata["component"] == "api" })

        let quiet = InMemoryLogHandler()
        var debugLogger = Logger(label: "test") { _ in quiet }
        debugLogger.logLevel = .debug
        mock.enqueue(.text("ok"))
        _ = try await self.client(logger: debugLogger, mock: mock).send(Request<String>(path: "/c"))
        #expect(quiet.entries.map(\.level) == [.debug])

        let custom = InMemoryLogHandler()
        var infoLogger = Logger(label: "test") { _ in custom }
        infoLogger.logLevel = .info
        let levels = SwiftLogSink.Levels(success: .info, failure: .warning)
        let loud = NetworkClient(baseURL: api, transport: mock) {
            LoggingBehavior(sink: SwiftLogSink(logger: infoLogger, levels: levels))
        }
        mock.enqueue(.text("ok"), .status(500))
        _ = try await loud.send(Request<String>(path: "/d"))
        _ = try? await loud.send(Request<String>(path: "/e"))
        #expect(custom.entries.map(\.level) == [.info, .warning])
    }

    @Test func entriesCarryTheRequestsFactsAsMetadata() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test") { _ in handler }
        logger.logLevel = .trace
        let clock = ManualClock()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .handler { _ in
            clock.advance(by: .milliseconds(1_250))
            return .text("fine")
        })
        _ = try await client(logger: logger, mock: mock, clock: clock).send(Request<String>(method: .put, path: "/movies"))
        let entries = handler.entries
        #expect(entries.count == 3, "\(entries)")
        let ids = Set(entries.compactMap { $0.metadata["conveyor.request_id"]?.description })
        #expect(ids.count == 1)
        #expect(entries.map { $0.metadata["conveyor.attempt"]?.description } == ["1", "2", "2"])
        let done = try #require(entries.last)
        #expect(done.metadata["http.request.method"] == "PUT")
        #expect(done.metadata["server.address"] == "api.test")
        #expect(done.metadata["server.port"] == "443")
        #expect(done.metadata["url.full"] == "https://api.test/movies")
        #expect(done.metadata["http.response.status_code"] == "200")
        #expect(done.metadata["http.response.body.size"] == "4")
        #expect(done.metadata["conveyor.duration_ms"] == "1250.000")
        #expect(done.metadata["error.type"] == nil)
        #expect(done.metadata["conveyor.line"] == nil)

        mock.enqueue(.failure(URLError(.timedOut)), .failure(URLError(.timedOut)))
        _ = try? await client(logger: logger, mock: mock, includesLine: true).send(Request<String>(path: "/slow"))
        let failed = try #require(handler.entries.last)
        #expect(failed.message.description == "HTTP request failed")
        #expect(failed.metadata["error.type"] == "timedOut")
        #expect(failed.metadata["http.response.status_code"] == nil)
        #expect(failed.metadata["conveyor.line"]?.description.hasPrefix("✕") == true)
    }

    @Test func aLoggerThatWritesNothingDisablesTheSink() {
        var logger = Logger(label: "test") { _ in InMemoryLogHandler() }
        logger.logLevel = .info
        #expect(!SwiftLogSink(logger: logger).isEnabled)
        logger.logLevel = .debug
        #expect(SwiftLogSink(logger: logger).isEnabled)
    }

    @Test func noSecretReachesTheLoggerInTheMessageOrTheMetadata() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test") { _ in handler }
        logger.logLevel = .trace
        let mock = MockTransport(baseURL: api)
        // A server that echoes the token back, in the body and in a header.
        mock.enqueue(.text(#"{"token": "tok-3f9a-SECRET"}"#, headers: ["X-Echo": "Bearer tok-3f9a-SECRET"]))
        _ = try await client(logger: logger, mock: mock, includesLine: true).send(
            Request<String>(path: "/me", query: ["api_key": "apikey-SECRET"]))
        #expect(handler.entries.count == 2)
        for entry in handler.entries {
            let text = "\(entry.message) \(entry.metadata)"
            #expect(!text.contains("SECRET"), "\(text)")
            #expect(text.contains("conveyor.request_id"))
        }
    }
}

@Suite struct RequestLoggerBehaviorTests {
    @Test func asyncHTTPClientLogsWithTheRequestsIdentity() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test") { _ in handler }
        logger.logLevel = .trace
        try await LocalServer.withServer { server in
            let client = try ahcClient(server) {
                LoggingBehavior(sink: SwiftLogSink(logger: logger))
                RequestLoggerBehavior(logger: logger)
            }
            _ = try await client.send(Request<Data>(path: "/text"))
        }
        let ours = handler.entries.filter { $0.message.description.hasPrefix("HTTP request") }
        let id = try #require(ours.first?.metadata["conveyor.request_id"])
        // AsyncHTTPClient's own lines (its request id is `ahc-request-id`) carry ours.
        let theirs = handler.entries.filter { $0.metadata["ahc-request-id"] != nil }
        #expect(!theirs.isEmpty, "\(handler.entries.map(\.message))")
        #expect(theirs.allSatisfy { $0.metadata["conveyor.request_id"] == id && $0.metadata["conveyor.attempt"] == "1" })
    }

    @Test func outsideAnAttemptThereIsNoRequestLogger() {
        #expect(RequestLogger.current == nil)
    }
}
