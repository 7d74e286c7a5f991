import ConveyorTesting
import Foundation
import Testing

/// Contract point 3: header precedence, case-insensitivity, CR/LF/NUL rejection.
@Suite struct ContractHeaderTests {
    struct SetInModify: RequestBehavior {
        let name: String
        let value: String
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
            request.headers[name] = value
        }
    }

    @Test func laterBehaviorsWinOverEarlierOnesWhateverTheCase() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(200))
        let recorder = HookRecorder()
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder, headers: ["X-Token": "from-A", "X-Only-A": "a"])
            RecordingBehavior("B", recorder: recorder, headers: ["x-token": "from-B"])
        }
        try await client.send(Request<Void>(path: "/x"))
        let sent = try #require(mock.requests.first)
        #expect(sent.headers.values(for: "X-TOKEN") == ["from-B"])
        #expect(sent.headers["x-only-a"] == "a")
    }

    @Test func theRequestsOwnHeaderWinsOverAllBehaviors() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(200))
        let recorder = HookRecorder()
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder, headers: ["Accept": "text/html"])
        }
        try await client.send(
            Request<Void>(path: "/x", headers: ["ACCEPT": "application/json"]),
            behaviors: [RecordingBehavior("B", recorder: recorder, headers: ["accept": "text/plain"])])
        let sent = try #require(mock.requests.first)
        #expect(sent.headers.values(for: "Accept") == ["application/json"])
    }

    @Test func modifyOverwritesTheRequestsOwnHeader() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(200))
        let client = makeClient(mock) { SetInModify(name: "accept", value: "from-modify") }
        try await client.send(Request<Void>(path: "/x", headers: ["Accept": "explicit"]))
        #expect(mock.requests.first?.headers.values(for: "Accept") == ["from-modify"])
    }

    @Test(arguments: ["CRLF", "LF", "NUL"])
    func behaviorHeadersWithControlCharactersAreRejectedAndNothingIsSent(kind: String) async {
        let value = ["CRLF": "evil\r\nX-Injected: 1", "LF": "a\nb", "NUL": "nul\0"][kind] ?? ""
        let mock = MockTransport()
        mock.enqueue(.status(200))
        let recorder = HookRecorder()
        let client = makeClient(mock) { RecordingBehavior("A", recorder: recorder, headers: ["X-Value": value]) }
        do {
            try await client.send(Request<Void>(path: "/x"))
            Issue.record("the request should have been rejected")
        } catch {
            guard case .invalidRequest(let reason) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(reason.contains("X-Value"))
            #expect(!reason.contains("evil") && !reason.contains("nul"))  // the value is not echoed
        }
        #expect(mock.requests.isEmpty)
        // Nothing was sent, so no once-per-request hook ran.
        #expect(!recorder.hooks(of: "A").contains(.beforeSend))
        #expect(recorder.isBalanced(labels: ["A"]))
    }

    @Test func requestHeadersWithCRLFAreRejectedToo() async {
        let mock = MockTransport()
        let client = makeClient(mock)
        await #expect(throws: NetworkError.self) {
            try await client.send(Request<Void>(path: "/x", headers: ["Bad\r\nName": "v"]))
        }
        #expect(mock.requests.isEmpty)
    }
}
