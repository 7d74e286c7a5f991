import ConveyorTesting
import Foundation
import Testing

@Suite struct HeadersBehaviorTests {
    @Test func setIfAbsentLetsTheRequestsOwnHeaderWin() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = makeClient(mock) { HeadersBehavior(["User-Agent": "App/1.0", "Accept-Language": "de-CH"]) }
        try await client.send(Request<Void>(path: "/x", headers: ["accept-language": "fr"]))
        let sent = try #require(mock.requests.first)
        #expect(sent.headers["User-Agent"] == "App/1.0")
        #expect(sent.headers.values(for: "Accept-Language") == ["fr"])
    }

    @Test func overwriteReplacesTheRequestsOwnHeader() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = makeClient(mock) { HeadersBehavior(["X-Client": "app"], mode: .overwrite) }
        try await client.send(Request<Void>(path: "/x", headers: ["x-client": "spoofed"]))
        #expect(mock.requests.first?.headers.values(for: "X-Client") == ["app"])
    }
}
