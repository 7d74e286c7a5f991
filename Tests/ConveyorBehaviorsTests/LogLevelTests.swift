import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTesting
import Foundation
import Testing

/// `LoggingBehavior` builds only the lines its sink accepts, and still scrubs the secrets a
/// request carried from the lines it does build.
@Suite struct LogLevelTests {
    final class Sink: LogSink {
        let lowest: LogEntry.Level?
        let lines = Locked<[LogEntry]>([])
        let asked = Locked<[LogEntry.Level]>([])
        init(lowest: LogEntry.Level?) { self.lowest = lowest }
        var isEnabled: Bool { true }
        func accepts(_ level: LogEntry.Level) -> Bool {
            asked.withLock { $0.append(level) }
            return lowest.map { level >= $0 } ?? false
        }
        func write(_ entry: LogEntry) {
            #expect(accepts(entry.level), "a \(entry.level) line was written to a sink that drops it")
            lines.withLock { $0.append(entry) }
        }
    }

    static let token = "Bearer tok-\(UUID().uuidString)"

    func run(_ sink: Sink, fail: Bool = false) async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .handler { request in
            .text("you sent \(request.headers["Authorization"] ?? "")", status: fail ? 401 : 200)
        })
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com/v1")!, transport: mock) {
            HeadersBehavior(["Authorization": Self.token])
            LoggingBehavior(sink: sink, bodyPreviewLimit: 256)
        }
        _ = try? await client.send(Request<Data>(path: "/me"))
    }

    @Test(arguments: [nil, LogEntry.Level.debug, .info, .error])
    func onlyAcceptedLevelsAreBuiltAndSecretsAreScrubbedInThem(_ lowest: LogEntry.Level?) async {
        for fail in [false, true] {
            let sink = Sink(lowest: lowest)
            await run(sink, fail: fail)
            let lines = sink.lines.withLock { $0 }
            let expected: [LogEntry.Level] = [.debug, fail ? .error : .info].filter { level in
                lowest.map { level >= $0 } ?? false
            }
            #expect(lines.map(\.level) == expected, "lowest \(String(describing: lowest)), fail \(fail)")
            for line in lines {
                #expect(!line.message.contains(Self.token.dropFirst(7)), "\(line.message)")
            }
        }
    }
}
