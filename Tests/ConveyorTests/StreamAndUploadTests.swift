import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Calls back when a request ends, so a test can wait for the outcome hook without sleeping.
struct OutcomeSignal: SuccessObserving, FailureObserving {
    let ended: AsyncStream<String>.Continuation
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { ended.yield("success") }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { ended.yield(error.name) }
}

/// A transport that streams `chunks` bodies and counts how many the client has taken so far.
final class CountingStreamer: StreamingHTTPTransport, Sendable {
    let chunks: Int
    let size: Int
    let taken = Locked(0)
    init(chunks: Int, size: Int) {
        self.chunks = chunks
        self.size = size
    }
    var honorsCancellation: Bool { true }
    func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        let head = HTTPResponse(status: 200, headers: ["Content-Length": String(chunks * size)], request: request)
        guard try transfer?.takesBody(of: head) == true else { return head }
        for _ in 0..<chunks {
            try await transfer?.receive(Data(count: size))
            taken.withLock { $0 += 1 }
        }
        return head
    }
}

@Suite struct StreamedResponseTests {
    let api = URL(string: "https://api.test/v1")!

    @Test func chunksArriveInOrderAndTheOutcomeFiresAtTheEnd() async throws {
        let mock = MockTransport(baseURL: api)
        let parts = (0..<5).map { patterned(10_000, from: $0 * 10_000) }
        mock.enqueue(.chunks(parts, headers: ["Content-Type": "application/octet-stream"]))
        let recorder = HookRecorder()
        let client = NetworkClient(baseURL: api, transport: mock) { RecordingBehavior("spy", recorder: recorder) }
        let streamed = try await client.stream(Request<Data>(path: "/big"))
        #expect(streamed.response.status == 200)
        #expect(streamed.response.headers["Content-Type"] == "application/octet-stream")
        var received: [Data] = []
        for try await chunk in streamed.body { received.append(chunk) }
        #expect(received == parts)
        #expect(recorder.hooks(of: "spy").last == .afterSuccess)
    }

    @Test func theTransferWaitsForTheReader() async throws {
        // 64 chunks of 256 KiB; the channel holds about 1 MiB, so the transport can never be more
        // than a few chunks ahead of the reader, however the tasks are scheduled.
        let transport = CountingStreamer(chunks: 64, size: 256 * 1024)
        let client = NetworkClient(baseURL: api, transport: transport)
        let streamed = try await client.stream(Request<Data>(path: "/big"))
        var read = 0
        var furthestAhead = 0
        for try await _ in streamed.body {
            read += 1
            for _ in 0..<20 { await Task.yield() }  // let the transport run as far as it can
            furthestAhead = max(furthestAhead, transport.taken.withLock { $0 } - read)
        }
        #expect(read == 64)
        #expect(furthestAhead <= 5)
    }

    @Test func leavingTheLoopCancelsTheTransferAndTheOutcomeIsCancelled() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.streamed(status: 200, headers: [:], chunks: [patterned(100)], end: .hang))
        let (ended, signal) = AsyncStream<String>.makeStream()
        let client = NetworkClient(baseURL: api, transport: mock) { OutcomeSignal(ended: signal) }
        do {
            let streamed = try await client.stream(Request<Data>(path: "/big"))
            for try await chunk in streamed.body {
                #expect(chunk == patterned(100))
                break
            }
        }
        let outcome = await withinTimeLimit(seconds: hangBound) { await ended.first { _ in true } }
        #expect(outcome == "cancelled")
    }

    /// The app keeps the response (in a property, say) after leaving the loop: the transfer
    /// still ends, and the behaviors see `.cancelled`.
    @Test func leavingTheLoopEndsTheTransferWhileTheResponseIsStillHeld() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.streamed(status: 200, headers: [:], chunks: [patterned(100), patterned(100)], end: .hang))
        let (ended, signal) = AsyncStream<String>.makeStream()
        let client = NetworkClient(baseURL: api, transport: mock) { OutcomeSignal(ended: signal) }
        let held = Locked<StreamedResponse?>(nil)
        let streamed = try await client.stream(Request<Data>(path: "/big"))
        held.withLock { $0 = streamed }
        for try await chunk in streamed.body {
            #expect(chunk == patterned(100))
            break
        }
        let outcome = await withinTimeLimit(seconds: hangBound) { await ended.first { _ in true } }
        #expect(outcome == "cancelled")
        #expect(held.withLock { $0?.response.status } == 200)  // still held
    }

    @Test func cancellingTheReadingTaskCancelsTheTransfer() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.streamed(status: 200, headers: [:], chunks: [patterned(100)], end: .hang))
        let (ended, signal) = AsyncStream<String>.makeStream()
        let client = NetworkClient(baseURL: api, transport: mock) { OutcomeSignal(ended: signal) }
        let streamed = try await client.stream(Request<Data>(path: "/big"))
        let reader = Task {
            var count = 0
            do {
                for try await _ in streamed.body { count += 1 }
                return "ended"
            } catch {
                return (error as? NetworkError)?.name ?? "other"
            }
        }
        reader.cancel()
        let readerOutcome = await withinTimeLimit(seconds: hangBound) { await reader.value }
        #expect(readerOutcome == "cancelled")
        let outcome = await withinTimeLimit(seconds: hangBound) { await ended.first { _ in true } }
        #expect(outcome == "cancelled")
    }

    @Test func aBrokenBodyEndsTheSequenceWithItsErrorAndIsNotRetried() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(
            .streamed(status: 200, headers: [:], chunks: [patterned(100)], end: .failure(URLError(.networkConnectionLost))))
        mock.enqueue(.chunks([patterned(100)]))
        let recorder = HookRecorder()
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())) {
            RecordingBehavior("spy", recorder: recorder)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3))
        }
        let streamed = try await client.stream(Request<Data>(path: "/big"))
        var chunks = 0
        let error = await #expect(throws: NetworkError.self) {
            for try await _ in streamed.body { chunks += 1 }
        }
        #expect(chunks == 1)
        guard case .notRetryable = error, let after = error?.after, let reason = error?.reason else {
            Issue.record("expected .notRetryable, got \(String(describing: error))")
            return
        }
        #expect(after.name == "connectionFailed")
        #expect(reason.contains("stream(_:)"))
        #expect(mock.requests.count == 1)
        #expect(recorder.hooks(of: "spy").filter { $0 == .afterFailure }.count == 1)
    }

    @Test func attemptsBeforeTheHeadAreRetried() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .chunks([Data("ok".utf8)]))
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 3))
        }
        let streamed = try await client.stream(Request<Data>(path: "/big"))
        #expect(try await streamed.body.collect() == Data("ok".utf8))
        #expect(mock.requests.count == 2)
    }

    @Test func anErrorStatusThrowsWithItsBody() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.rawJSON(#"{"error":"gone"}"#, status: 404))
        let error = await #expect(throws: NetworkError.self) {
            _ = try await NetworkClient(baseURL: api, transport: mock).stream(Request<Data>(path: "/big"))
        }
        #expect(error?.status == 404)
        #expect(error?.response?.body == Data(#"{"error":"gone"}"#.utf8))
    }

    @Test func collectStopsAtItsLimit() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.chunks([patterned(600), patterned(600)]))
        let streamed = try await NetworkClient(baseURL: api, transport: mock).stream(Request<Data>(path: "/big"))
        await #expect(throws: NetworkError.responseTooLarge(limit: 1_000)) { try await streamed.body.collect(limit: 1_000) }
    }
}

@Suite struct UploadTests {
    let api = URL(string: "https://api.test/v1")!

    func client(_ mock: MockTransport, @RequestBehaviorBuilder behaviors: () -> [any RequestBehavior] = { [] }) -> NetworkClient {
        NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock()), behaviors: behaviors)
    }

    @Test func aFileUploadIsReadAgainForARetryAndProgressRestarts() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let file = scratch.file("photo.jpg")
        let content = patterned(200_000)
        try content.write(to: file)
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .status(201))
        let progress = ProgressLog()
        let request = Request<Void>(method: .put, path: "/photos/1", body: .file(file, contentType: "image/jpeg"))
            .onProgress(progress.record)
        try await client(mock) { RetryBehavior(.exponentialBackoff(maxAttempts: 3)) }.send(request)
        #expect(mock.requests.count == 2)
        #expect(mock.requests.map(\.body) == [content, content])
        #expect(mock.requests.first?.headers["Content-Type"] == "image/jpeg")
        #expect(progress.uploads(attempt: 1) == [65_536, 131_072, 196_608, 200_000])
        #expect(progress.uploads(attempt: 2) == [65_536, 131_072, 196_608, 200_000])
        #expect(progress.all.filter { $0.direction == .upload }.allSatisfy { $0.expectedBytes == 200_000 })
    }

    @Test func aOneShotStreamIsNotRetriedAndTheErrorSaysWhy() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .status(201))
        let (chunks, feed) = AsyncStream<Data>.makeStream()
        feed.yield(Data("live ".utf8))
        feed.yield(Data("bytes".utf8))
        feed.finish()
        let request = Request<Void>(method: .put, path: "/live", body: .stream(chunks, length: 10))
        let error = await #expect(throws: NetworkError.self) {
            try await client(mock) { RetryBehavior(.exponentialBackoff(maxAttempts: 3)) }.send(request)
        }
        guard case .notRetryable = error, let after = error?.after, let reason = error?.reason else {
            Issue.record("expected .notRetryable, got \(String(describing: error))")
            return
        }
        #expect(after.status == 503)
        #expect(error?.status == 503)
        #expect(reason.contains("one-shot"))
        #expect(error?.description.contains("not retried") == true)
        #expect(mock.requests.map(\.body) == [Data("live bytes".utf8)])
    }

    @Test func aOneShotStreamThatIsNotRetriedFailsAsItWould() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503))
        let (chunks, feed) = AsyncStream<Data>.makeStream()
        feed.finish()
        let error = await #expect(throws: NetworkError.self) {
            try await client(mock).send(Request<Void>(method: .put, path: "/live", body: .stream(chunks)))
        }
        #expect(error?.name == "unacceptableStatus")
    }

    @Test func aStreamLongerOrShorterThanItsLengthFails() async throws {
        for (pieces, length) in [(["abc", "def"], Int64(4)), (["ab"], Int64(4))] {
            let mock = MockTransport(baseURL: api)
            mock.enqueue(.status(200))
            let (chunks, feed) = AsyncStream<Data>.makeStream()
            for piece in pieces { feed.yield(Data(piece.utf8)) }
            feed.finish()
            let error = await #expect(throws: NetworkError.self) {
                try await client(mock).send(Request<Void>(method: .put, path: "/live", body: .stream(chunks, length: length)))
            }
            #expect(error?.name == "invalidRequest")
        }
    }

    @Test func aMissingFileFailsBeforeAnythingIsSent() async throws {
        let mock = MockTransport(baseURL: api)
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-missing-\(UUID().uuidString).bin")
        let error = await #expect(throws: NetworkError.self) {
            try await client(mock).send(Request<Void>(method: .put, path: "/up", body: .file(missing, contentType: nil)))
        }
        guard case .fileFailed = error, let file = error?.file else {
            Issue.record("expected .fileFailed, got \(String(describing: error))")
            return
        }
        #expect(file == missing.lastPathComponent)
        #expect(error?.description.contains(missing.deletingLastPathComponent().path) == false)
        #expect(mock.requests.isEmpty)
    }

    @Test func aFileThatShrinksWhileSentFailsWithAFileError() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let file = scratch.file("shrinks.bin")
        try patterned(100_000).write(to: file)
        let body = try HTTPBodyStream.file(file)
        try patterned(10).write(to: file)
        let error = await #expect(throws: NetworkError.self) { try await body.collect() }
        #expect(error?.name == "fileFailed")
    }

    @Test func aTransportThatDoesNotStreamGetsTheBytes() async throws {
        struct Whole: HTTPTransport {
            let seen: Locked<Data?>
            func send(_ request: HTTPRequest) async throws -> HTTPResponse {
                #expect(request.bodyStream == nil)
                seen.withLock { $0 = request.body }
                return HTTPResponse(status: 200, request: request)
            }
        }
        let scratch = try Scratch()
        defer { scratch.remove() }
        let file = scratch.file("small.txt")
        try Data("from disk".utf8).write(to: file)
        let seen = Locked<Data?>(nil)
        try await NetworkClient(baseURL: api, transport: Whole(seen: seen)).send(
            Request<Void>(method: .post, path: "/up", body: .file(file, contentType: "text/plain")))
        #expect(seen.withLock { $0 } == Data("from disk".utf8))
    }

    @Test func aBehaviorThatObservesProgressHearsEveryTransfer() async throws {
        struct Observer: TransferProgressObserving {
            let log: ProgressLog
            func transferProgressed(_ progress: TransferProgress, context: RequestContext) { log.record(progress) }
        }
        let scratch = try Scratch()
        defer { scratch.remove() }
        let file = scratch.file("a.bin")
        try patterned(1_000).write(to: file)
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.chunks([patterned(300), patterned(300)]))
        let log = ProgressLog()
        let data: Data = try await client(mock) { Observer(log: log) }.send(
            Request<Data>(method: .post, path: "/up", body: .file(file, contentType: nil)))
        #expect(data == patterned(300) + patterned(300))
        #expect(log.uploads(attempt: 1) == [1_000])
        #expect(log.downloads(attempt: 1) == [300, 600])
    }

    @Test func bodyStreamsCompareByIdentityAndDescribeWithoutBytes() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let file = scratch.file("secret.txt")
        try Data("Bearer sk_live_123".utf8).write(to: file)
        let one = try HTTPBodyStream.file(file)
        let same = one
        let other = try HTTPBodyStream.file(file)
        #expect(one == same)
        #expect(one != other)
        #expect(one.length == 18)
        #expect(one.isReplayable)
        var request = HTTPRequest(method: .put, url: api)
        request.bodyStream = one
        var dumped = ""
        dump(request, to: &dumped)
        #expect(!dumped.contains("sk_live"))
        #expect(dumped.contains("18 bytes"))
    }
}
