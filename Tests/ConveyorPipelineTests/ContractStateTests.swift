import ConveyorTesting
import Foundation
import Testing

/// Contract points 6 and 7: per-request state lives in the context; a request can leave out a
/// client behavior.
@Suite struct ContractStateTests {
    /// Stores a per-request value in beforeSend and reports it in afterSuccess.
    struct Stamp: SendObserving, SuccessObserving {
        enum Key: RequestContextKey { static let defaultValue: String? = nil }
        let seen: Locked<[String: String]>
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
            context[Key.self] = request.url.query
            await Task.yield()  // let other requests interleave
        }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            let stored = context[Key.self] ?? "missing"
            seen.withLock { $0[response.request.url.query ?? "?"] = stored }
        }
    }

    @Test func concurrentRequestsThroughOneBehaviorValueKeepSeparateState() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/api/x", reply: .status(200))
        let seen = Locked<[String: String]>([:])
        let client = makeClient(mock) { Stamp(seen: seen) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask { try await client.send(Request<Void>(path: "/x", query: ["n": index])) }
            }
            try await group.waitForAll()
        }
        let result = seen.withLock { $0 }
        #expect(result.count == 200)
        #expect(result.allSatisfy { $0.key == $0.value })
    }

    @Test func contextKeysAreTypedAndDefaulted() {
        enum Count: RequestContextKey { static let defaultValue = 0 }
        enum Name: RequestContextKey { static let defaultValue = "none" }
        let context = RequestContext(request: HTTPRequest(url: testBaseURL))
        #expect(context[Count.self] == 0)
        context[Count.self] = 3
        context.update(Count.self) { $0 += 1 }
        #expect(context[Count.self] == 4)
        #expect(context[Name.self] == "none")
        // A context made without a client counts on its own.
        #expect(context.requestID == RequestID(rawValue: 1))
    }

    /// Request IDs are per client: each counts from #1, and one client's requests never move
    /// another's counter (no process-wide state).
    @Test func requestIDsArePerClient() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let seen = Locked<[String]>([])
        struct Tag: SendObserving {
            let label: String
            let seen: Locked<[String]>
            func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
                seen.withLock { $0.append("\(label)\(context.requestID)") }
            }
        }
        let first = makeClient(mock) { Tag(label: "a", seen: seen) }
        let second = makeClient(mock) { Tag(label: "b", seen: seen) }
        try await first.send(Request<Void>(path: "/x"))
        try await first.send(Request<Void>(path: "/x"))
        try await second.send(Request<Void>(path: "/x"))
        try await first.send(Request<Void>(path: "/x"))
        #expect(seen.withLock { $0 } == ["a#1", "a#2", "b#1", "a#3"])
    }

    @Test func aRequestCanLeaveOutAClientBehaviorByTypeOrName() async throws {
        struct Auth: HeaderAdding {
            func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
                ["Authorization": "Bearer t"]
            }
        }
        let mock = MockTransport()
        mock.stub(nil, "/api/login", reply: .status(200))
        let recorder = HookRecorder()
        let client = makeClient(mock) {
            Auth()
            RecordingBehavior("spy", recorder: recorder)
        }
        try await client.send(Request<Void>(method: .post, path: "/login").excluding(.type(Auth.self)))
        try await client.send(Request<Void>(method: .post, path: "/login").excluding(.named("spy")))
        try await client.send(Request<Void>(method: .post, path: "/login"))
        #expect(mock.requests.map { $0.headers["Authorization"] } == [nil, "Bearer t", "Bearer t"])
        // The spy saw the first and third requests only.
        #expect(Set(recorder.events.map(\.requestID)).count == 2)
        // The client itself still has both behaviors.
        #expect(client.behaviors.behaviors.count == 2)
    }
}
