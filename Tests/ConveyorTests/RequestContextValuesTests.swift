import Conveyor
import ConveyorTesting
import Foundation
import Testing

/// `Request.setting(_:to:)`: a value the caller puts on a request is in the context before the
/// first hook of every behavior, the client's included, on every way of sending it.
@Suite struct RequestContextValuesTests {
    enum Screen: RequestContextKey { static let defaultValue = "unknown" }
    enum Attempts: RequestContextKey { static let defaultValue = 0 }

    /// Records what `Screen` held in each hook it has, first hook first.
    struct ScreenReader: SendObserving, HeaderAdding, SuccessObserving, FailureObserving {
        let seen: Log
        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            seen.append("headers \(context[Screen.self])")
            return [:]
        }
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
            seen.append("beforeSend \(context[Screen.self]) \(context[Attempts.self])")
        }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            seen.append("afterSuccess \(context[Screen.self])")
        }
        func afterFailure(_ error: NetworkError, context: RequestContext) async {
            seen.append("afterFailure \(context[Screen.self])")
        }
    }

    func client(_ seen: Log) -> (NetworkClient, MockTransport) {
        let transport = MockTransport()
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!, transport: transport) {
            ScreenReader(seen: seen)
        }
        return (client, transport)
    }

    @Test func theClientsBehaviorsSeeTheValueInTheirFirstHook() async throws {
        let seen = Log()
        let (client, transport) = client(seen)
        transport.enqueue(.json(["ok": true]))
        let request = Request<Data>(path: "/feed").setting(Screen.self, to: "home").setting(Attempts.self, to: 3)
        _ = try await client.send(request)
        #expect(seen.all == ["headers home", "beforeSend home 3", "afterSuccess home"])
    }

    @Test func aLaterValueForTheSameKeyWins() async throws {
        var values = RequestContextValues()
        #expect(values.isEmpty)
        values.set(Screen.self, to: "a")
        values.set(Screen.self, to: "b")
        #expect(values[Screen.self] == "b")
        #expect(values[Attempts.self] == 0)
        let seen = Log()
        let (client, transport) = client(seen)
        transport.enqueue(.status(500))
        let request = Request<Data>(path: "/feed").setting(Screen.self, to: "a").setting(Screen.self, to: "b")
        await #expect(throws: NetworkError.self) { try await client.send(request) }
        #expect(seen.all == ["headers b", "beforeSend b 0", "afterFailure b"])
    }

    @Test func streamedAndDownloadedRequestsCarryTheValueToo() async throws {
        let seen = Log()
        let (client, transport) = client(seen)
        transport.enqueue(.text("abc"))
        transport.enqueue(.text("abc"))
        let streamed = try await client.stream(Request<Data>(path: "/a").setting(Screen.self, to: "player"))
        #expect(try await streamed.body.collect() == Data("abc".utf8))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try await client.download(
            Request<Data>(path: "/b").setting(Screen.self, to: "offline"), to: folder.appendingPathComponent("b"))
        #expect(seen.all.filter { $0.hasPrefix("beforeSend") } == ["beforeSend player 0", "beforeSend offline 0"])
        #expect(seen.all.filter { $0.hasPrefix("afterSuccess") } == ["afterSuccess player", "afterSuccess offline"])
    }

    @Test func aRequestWithoutValuesSeesTheDefaults() async throws {
        let seen = Log()
        let (client, transport) = client(seen)
        transport.enqueue(.json(["ok": true]))
        _ = try await client.send(Request<Data>(path: "/feed"))
        #expect(seen.all.prefix(2) == ["headers unknown", "beforeSend unknown 0"])
    }
}
