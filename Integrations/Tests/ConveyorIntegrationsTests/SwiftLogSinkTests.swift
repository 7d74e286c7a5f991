import Conveyor
import ConveyorLogging
import ConveyorTesting
import Foundation
import InMemoryLogging
import Logging
import Testing

@Suite struct SwiftLogSinkTests {
    let api = URL(string: "https://api.test")!

    func client(logger: Logger, mock: MockTransport) -> NetworkClient {
        NetworkClient(baseURL: api, transport: mock) {
            HeadersBehavior(["Authorization": "Bearer tok-3f9a-SECRET"])
            LoggingBehavior(sink: SwiftLogSink(logger: logger, metadata: ["component": "api"]), bodyPreviewLimit: 256)
        }
    }

    @Test func levelsMapOneToOneAndTheLoggerFilters() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test") { _ in handler }
        logger.logLevel = .debug
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("ok"), .status(500))
        let client = client(logger: logger, mock: mock)
        _ = try await client.send(Request<String>(path: "/a"))
        _ = try? await client.send(Request<String>(path: "/b"))
        let levels = handler.entries.map(\.level)
        #expect(levels == [.debug, .info, .debug, .error], "\(handler.entries)")
        #expect(handler.entries.allSatisfy { $0.metadata["component"] == "api" })
        #expect(handler.entries[1].message.description.contains("200"))

        let quiet = InMemoryLogHandler()
        var infoLogger = Logger(label: "test") { _ in quiet }
        infoLogger.logLevel = .info
        mock.enqueue(.text("ok"))
        _ = try await self.client(logger: infoLogger, mock: mock).send(Request<String>(path: "/c"))
        #expect(quiet.entries.map(\.level) == [.info])
    }

    @Test func aLoggerThatWritesNothingDisablesTheSink() {
        var logger = Logger(label: "test") { _ in InMemoryLogHandler() }
        logger.logLevel = .critical
        #expect(!SwiftLogSink(logger: logger).isEnabled)
        logger.logLevel = .error
        #expect(SwiftLogSink(logger: logger).isEnabled)
    }

    @Test func noSecretReachesTheLogger() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test") { _ in handler }
        logger.logLevel = .trace
        let mock = MockTransport(baseURL: api)
        // A server that echoes the token back, in the body and in a header.
        mock.enqueue(.text(#"{"token": "tok-3f9a-SECRET"}"#, headers: ["X-Echo": "Bearer tok-3f9a-SECRET"]))
        _ = try await client(logger: logger, mock: mock).send(Request<String>(path: "/me", query: ["api_key": "apikey-SECRET"]))
        #expect(!handler.entries.isEmpty)
        for entry in handler.entries {
            let text = "\(entry.message) \(entry.metadata)"
            #expect(!text.contains("SECRET"), "\(text)")
        }
    }
}
