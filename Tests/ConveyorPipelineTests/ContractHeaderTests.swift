import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Contract point 3: header precedence, case-insensitivity, CR/LF/NUL rejection.
@Suite struct ContractHeaderTests {
    struct SetInModify: RequestModifying {
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
            guard case .invalidRequest = error, let reason = error.reason else {
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

/// The one merge rule for repeated header names (HTTPHeaders.merge): for each name, the fields of
/// the last list that has it win, all of them. Checked against a model on generated lists, and
/// through the pipeline with behaviors in every order.
@Suite struct HeaderMergeRuleTests {
    struct Contributes: HeaderAdding {
        let headers: HTTPHeaders
        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            headers
        }
    }

    /// The rule, written the obvious way: per lowercased name, the last contributor's values.
    static func model(_ lists: [HTTPHeaders]) -> [String: [String]] {
        var result: [String: [String]] = [:]
        for list in lists {
            var seen: [String: [String]] = [:]
            for field in list { seen[field.name.lowercased(), default: []].append(field.value) }
            for (name, values) in seen { result[name] = values }
        }
        return result
    }

    static func grouped(_ headers: HTTPHeaders) -> [String: [String]] {
        var result: [String: [String]] = [:]
        for field in headers { result[field.name.lowercased(), default: []].append(field.value) }
        return result
    }

    static func randomList(_ generator: inout SplitMix64, tag: String) -> HTTPHeaders {
        let names = ["X-Dup", "x-dup", "X-DUP", "Accept", "accept", "X-Only"]
        var headers = HTTPHeaders()
        for index in 0..<Int.random(in: 0...4, using: &generator) {
            headers.add(name: names.randomElement(using: &generator)!, value: "\(tag)\(index)")
        }
        return headers
    }

    @Test func mergingFollowsTheModelOnGeneratedLists() {
        var generator = SplitMix64(state: 13)
        for _ in 0..<2_000 {
            let lists = (0..<3).map { Self.randomList(&generator, tag: "L\($0)-") }
            var merged = HTTPHeaders()
            for list in lists { merged.merge(list) }
            #expect(Self.grouped(merged) == Self.model(lists), "\(lists.map { Array($0) })")
        }
    }

    @Test func aRepeatedNameMergesTheSameWayInEveryOrderThroughThePipeline() async throws {
        let dup: HTTPHeaders = [("X-Dup", "a"), ("x-dup", "b")].reduce(into: HTTPHeaders()) {
            $0.add(name: $1.0, value: $1.1)
        }
        let other: HTTPHeaders = ["X-Other": "o"]
        let override: HTTPHeaders = ["X-DUP": "c"]
        let lists = [dup, other, override]
        let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
        for order in orders {
            let mock = MockTransport()
            mock.enqueue(.status(200))
            let contributed = order.map { lists[$0] }
            let client = NetworkClient(baseURL: testBaseURL, transport: mock) {
                for headers in contributed { Contributes(headers: headers) }
            }
            try await client.send(Request<Void>(path: "/x"))
            let sent = try #require(mock.requests.first)
            #expect(Self.grouped(sent.headers) == Self.model(contributed), "order \(order)")
            // The request's own fields win over every behavior, all of them.
            mock.enqueue(.status(200))
            var own = HTTPHeaders()
            own.add(name: "x-dup", value: "mine-1")
            own.add(name: "X-Dup", value: "mine-2")
            try await client.send(Request<Void>(path: "/x", headers: own))
            let second = try #require(mock.requests.last)
            #expect(second.headers.values(for: "X-Dup") == ["mine-1", "mine-2"], "order \(order)")
        }
    }
}
