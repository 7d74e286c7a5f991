import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A directory of its own for one test, removed at the end.
struct Scratch {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func file(_ name: String) -> URL { url.appendingPathComponent(name) }
    /// Every name in the directory, hidden ones included, sorted.
    var names: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted() }
    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// `count` bytes where byte i is `i % 256`, like the server's `/blob`.
func patterned(_ count: Int, from start: Int = 0) -> Data {
    // Built from a repeated 256-byte block: a byte-by-byte loop takes seconds for megabytes under
    // the thread sanitizer, and holds one of the cooperative pool's threads all that time.
    let block = Data((0..<256).map { UInt8(truncatingIfNeeded: start + $0) })
    var data = Data(capacity: count + 256)
    while data.count < count { data.append(block) }
    return data.prefix(count)
}

/// Collects progress reports.
final class ProgressLog: Sendable {
    private let reports = Locked<[TransferProgress]>([])
    var all: [TransferProgress] { reports.withLock { $0 } }
    func record(_ progress: TransferProgress) { reports.withLock { $0.append(progress) } }
    func downloads(attempt: Int) -> [Int64] { all.filter { $0.direction == .download && $0.attempt == attempt }.map(\.completedBytes) }
    func uploads(attempt: Int) -> [Int64] { all.filter { $0.direction == .upload && $0.attempt == attempt }.map(\.completedBytes) }
}

@Suite struct DownloadTests {
    let api = URL(string: "https://api.test/v1")!

    func client(_ mock: MockTransport, retries: Bool = false, recorder: HookRecorder? = nil) -> NetworkClient {
        NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())) {
            if let recorder { RecordingBehavior("spy", recorder: recorder) }
            if retries { RetryBehavior(.exponentialBackoff(maxAttempts: 4)) }
        }
    }

    static let resumable: HTTPHeaders = ["ETag": "\"v1\"", "Accept-Ranges": "bytes"]

    @Test func theBodyIsWrittenAsItArrivesAndMovedIntoPlace() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        let body = patterned(300_000)
        mock.enqueue(.chunks([body[0..<100_000], body[100_000..<200_000], body[200_000...]].map { Data($0) }))
        let recorder = HookRecorder()
        let progress = ProgressLog()
        let destination = scratch.file("movie.bin")
        let saved = try await client(mock, recorder: recorder).download(
            Request<Data>(path: "/movie").onProgress(progress.record), to: destination)
        #expect(saved.value == destination)
        #expect(saved.response.status == 200)
        #expect(saved.response.body.isEmpty)
        #expect(try Data(contentsOf: destination) == body)
        #expect(scratch.names == ["movie.bin"])  // no partial file or info left behind
        #expect(recorder.hooks(of: "spy").filter { $0 == .beforeSend || $0 == .afterSuccess || $0 == .afterFailure } == [.beforeSend, .afterSuccess])
        #expect(progress.downloads(attempt: 1) == [0, 100_000, 200_000, 300_000])
        #expect(progress.all.last?.fractionCompleted == 1)
    }

    @Test func aRetryResumesWithRangeAndIfRange() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        let body = patterned(250_000)
        var headers = Self.resumable
        headers["Content-Length"] = "250000"
        mock.enqueue(
            .streamed(
                status: 200, headers: headers, chunks: [Data(body[0..<100_000])],
                end: .failure(URLError(.networkConnectionLost))))
        mock.enqueue(
            .handler { request in
                guard request.headers["Range"] == "bytes=100000-", request.headers["If-Range"] == "\"v1\"" else {
                    return .status(400)
                }
                return .streamed(
                    status: 206, headers: ["Content-Range": "bytes 100000-249999/250000", "ETag": "\"v1\""],
                    chunks: [Data(body[100_000...])], end: .complete)
            })
        let progress = ProgressLog()
        let destination = scratch.file("resumed.bin")
        let saved = try await client(mock, retries: true).download(
            Request<Data>(path: "/big").onProgress(progress.record), to: destination)
        #expect(saved.attempts == 2)
        #expect(try Data(contentsOf: destination) == body)
        #expect(mock.requests.map { $0.headers["Range"] } == [nil, "bytes=100000-"])
        // Progress restarts honestly: the second attempt starts from the bytes on disk.
        #expect(progress.downloads(attempt: 1) == [0, 100_000])
        #expect(progress.downloads(attempt: 2) == [100_000, 250_000])
        #expect(scratch.names == ["resumed.bin"])
    }

    @Test func aServerThatIgnoresRangeGetsTheWholeBodyWrittenFromTheStart() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        let body = patterned(200_000)
        mock.enqueue(
            .streamed(
                status: 200, headers: Self.resumable, chunks: [Data(body[0..<50_000])],
                end: .failure(URLError(.networkConnectionLost))))
        mock.enqueue(.chunks([body], headers: Self.resumable))  // a 200 despite the Range
        let destination = scratch.file("whole.bin")
        _ = try await client(mock, retries: true).download(Request<Data>(path: "/big"), to: destination)
        #expect(mock.requests.last?.headers["Range"] == "bytes=50000-")
        #expect(try Data(contentsOf: destination) == body)
    }

    /// A server that honors `Range` but not `If-Range` answers the resume with the new version's
    /// bytes: the partial file is emptied and the request sent again without `Range`, in the same
    /// call, which ends with the new version whole.
    @Test func aResumeAnsweredByAnotherVersionStartsOverInTheSameCall() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        let v1 = patterned(250_000)
        let v2 = patterned(250_000, from: 7)
        mock.enqueue(
            .streamed(
                status: 200, headers: Self.resumable, chunks: [Data(v1[0..<100_000])],
                end: .failure(URLError(.networkConnectionLost))),
            .streamed(
                status: 206, headers: ["Content-Range": "bytes 100000-249999/250000", "ETag": "\"v2\""],
                chunks: [Data(v2[100_000...])], end: .complete),
            .handler { request in
                guard request.headers["Range"] == nil, request.headers["If-Range"] == nil else { return .status(400) }
                return .chunks([v2], headers: ["ETag": "\"v2\"", "Accept-Ranges": "bytes"])
            })
        let recorder = HookRecorder()
        let destination = scratch.file("changed.bin")
        let saved = try await client(mock, retries: true, recorder: recorder).download(Request<Data>(path: "/big"), to: destination)
        #expect(try Data(contentsOf: destination) == v2)
        #expect(mock.requests.map { $0.headers["Range"] } == [nil, "bytes=100000-", nil])
        #expect(saved.attempts == 3)
        #expect(scratch.names == ["changed.bin"])
        #expect(recorder.hooks(of: "spy").filter { $0 == .beforeSend || $0 == .afterSuccess || $0 == .afterFailure } == [.beforeSend, .afterSuccess])
    }

    /// Starting over happens once per call: a server that answers the fresh request with a `206`
    /// that does not cover the body either fails the download, with nothing left behind.
    @Test func aServerThatNeverSendsTheWholeBodyFailsAfterOneFreshStart() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        let body = patterned(1_000)
        let short: MockTransport.Reply = .streamed(
            status: 206, headers: ["Content-Range": "bytes 0-99/1000", "ETag": "\"v1\""], chunks: [Data(body[0..<100])],
            end: .complete)
        mock.enqueue(
            .streamed(status: 200, headers: Self.resumable, chunks: [Data(body[0..<500])], end: .failure(URLError(.networkConnectionLost))),
            .streamed(
                status: 206, headers: ["Content-Range": "bytes 500-599/1000", "ETag": "\"v1\""], chunks: [Data(body[500..<600])],
                end: .complete),
            short, short, short)
        let destination = scratch.file("short.bin")
        let dropped = await #expect(throws: NetworkError.self) {
            _ = try await client(mock).download(Request<Data>(path: "/big"), to: destination)
        }
        // Without RetryBehavior the first drop ends the call, keeping a resumable partial file.
        #expect(dropped?.name == "connectionFailed")
        #expect(mock.requests.count == 1)
        let refused = await #expect(throws: NetworkError.self) {
            _ = try await client(mock).download(Request<Data>(path: "/big"), to: destination)
        }
        #expect(refused?.name == "transportFailed")
        // The next call resumed (500-), got a short 206, started over once, got a short 206 again.
        #expect(mock.requests.map { $0.headers["Range"] } == [nil, "bytes=500-", nil])
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(scratch.names.isEmpty)  // nothing can be resumed: no partial file is kept
    }

    @Test func aFailedResumableDownloadIsResumedByTheNextCall() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        let body = patterned(120_000)
        mock.enqueue(
            .streamed(
                status: 200, headers: Self.resumable, chunks: [Data(body[0..<70_000])],
                end: .failure(URLError(.networkConnectionLost))))
        let destination = scratch.file("later.bin")
        let first = await #expect(throws: NetworkError.self) {
            try await client(mock).download(Request<Data>(path: "/big"), to: destination)
        }
        #expect(first?.name == "connectionFailed")
        #expect(!FileManager.default.fileExists(atPath: destination.path))  // never a partial body at the destination
        #expect(scratch.names == [".later.bin.conveyor-partial", ".later.bin.conveyor-partial-info"])
        // The info file names neither the URL nor anything from it.
        let info = try String(contentsOf: scratch.file(".later.bin.conveyor-partial-info"), encoding: .utf8)
        #expect(!info.contains("api.test") && !info.contains("/big"))

        mock.enqueue(
            .chunks(
                [Data(body[70_000...])], status: 206,
                headers: ["Content-Range": "bytes 70000-119999/120000", "ETag": "\"v1\"", "Accept-Ranges": "bytes"]))
        _ = try await client(mock).download(Request<Data>(path: "/big"), to: destination)
        #expect(mock.requests.last?.headers["Range"] == "bytes=70000-")
        #expect(mock.requests.last?.headers["If-Range"] == "\"v1\"")
        #expect(try Data(contentsOf: destination) == body)
        #expect(scratch.names == ["later.bin"])
    }

    @Test func aPartialFileOfAnotherURLIsNotResumed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        mock.enqueue(
            .streamed(
                status: 200, headers: Self.resumable, chunks: [patterned(1_000)], end: .failure(URLError(.networkConnectionLost))))
        let destination = scratch.file("x.bin")
        _ = try? await client(mock).download(Request<Data>(path: "/one"), to: destination)
        mock.enqueue(.chunks([Data("other".utf8)]))
        _ = try await client(mock).download(Request<Data>(path: "/two"), to: destination)
        #expect(mock.requests.last?.headers["Range"] == nil)
        #expect(try Data(contentsOf: destination) == Data("other".utf8))
    }

    @Test func withoutAValidatorNothingIsKeptForLater() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        mock.enqueue(
            .streamed(
                status: 200, headers: ["Accept-Ranges": "bytes"], chunks: [patterned(5_000)],
                end: .failure(URLError(.networkConnectionLost))))
        let destination = scratch.file("gone.bin")
        await #expect(throws: NetworkError.self) {
            try await client(mock).download(Request<Data>(path: "/big"), to: destination)
        }
        #expect(scratch.names.isEmpty)
    }

    /// A content-coded body (the transport inflated it, as URLSession does gzip) is written in
    /// inflated bytes while the server's ranges count coded ones: a `Range` from the file's
    /// length would splice the wrong bytes. It is never resumed, in the call or by a later one.
    @Test func aContentCodedBodyIsNeverResumed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        let body = patterned(250_000)
        let coded: HTTPHeaders = ["ETag": "\"v1\"", "Accept-Ranges": "bytes", "Content-Encoding": "gzip"]
        // A server asked for a range gets one of its coded bytes: consistent headers, wrong bytes.
        let answer: MockTransport.Reply = .handler { request in
            guard let range = request.headers["Range"] else { return .chunks([body], headers: coded) }
            guard range == "bytes=100000-" else { return .status(416) }
            var partial = coded
            partial["Content-Range"] = "bytes 100000-249999/250000"
            return .chunks([Data(repeating: 0xEE, count: 150_000)], status: 206, headers: partial)
        }
        mock.enqueue(
            .streamed(status: 200, headers: coded, chunks: [Data(body[0..<100_000])], end: .failure(URLError(.networkConnectionLost))),
            answer)
        let destination = scratch.file("coded.bin")
        let saved = try await client(mock, retries: true).download(Request<Data>(path: "/big"), to: destination)
        #expect(mock.requests.map { $0.headers["Range"] } == [nil, nil])
        #expect(saved.attempts == 2)
        #expect(try Data(contentsOf: destination) == body)

        // Without RetryBehavior the call fails, and nothing is kept for the next call to resume.
        mock.enqueue(
            .streamed(status: 200, headers: coded, chunks: [Data(body[0..<100_000])], end: .failure(URLError(.networkConnectionLost))),
            answer)
        let later = scratch.file("later.bin")
        await #expect(throws: NetworkError.self) {
            try await client(mock).download(Request<Data>(path: "/big"), to: later)
        }
        #expect(scratch.names == ["coded.bin"])
        _ = try await client(mock).download(Request<Data>(path: "/big"), to: later)
        #expect(mock.requests.suffix(2).map { $0.headers["Range"] } == [nil, nil])
        #expect(try Data(contentsOf: later) == body)
    }

    /// An identity body resumed with a `206` that is content-coded: the coded representation's
    /// bytes are not the ones that follow the file's, so the download starts over.
    @Test func aCodedAnswerToAResumeStartsOver() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        let body = patterned(250_000)
        mock.enqueue(
            .streamed(
                status: 200, headers: Self.resumable, chunks: [Data(body[0..<100_000])],
                end: .failure(URLError(.networkConnectionLost))),
            .chunks(
                [Data(repeating: 0xEE, count: 150_000)], status: 206,
                headers: [
                    "Content-Range": "bytes 100000-249999/250000", "ETag": "\"v1\"", "Content-Encoding": "gzip",
                ]),
            .chunks([body], headers: Self.resumable))
        let destination = scratch.file("recoded.bin")
        let saved = try await client(mock, retries: true).download(Request<Data>(path: "/big"), to: destination)
        #expect(mock.requests.map { $0.headers["Range"] } == [nil, "bytes=100000-", nil])
        #expect(saved.attempts == 3)
        #expect(try Data(contentsOf: destination) == body)
    }

    @Test func anUnwritableDestinationFailsWithAFileErrorBeforeAnythingIsSent() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        mock.stub(.get, "/big", reply: .chunks([patterned(10)]))
        let aFile = scratch.file("plain")
        try Data("x".utf8).write(to: aFile)
        for destination in [scratch.file("missing-folder/out.bin"), aFile.appendingPathComponent("out.bin")] {
            let error = await #expect(throws: NetworkError.self) {
                try await client(mock).download(Request<Data>(path: "/big"), to: destination)
            }
            guard case .fileFailed = error, let file = error?.file else {
                Issue.record("expected .fileFailed, got \(String(describing: error))")
                continue
            }
            #expect(file == "out.bin")
        }
        #expect(mock.requests.isEmpty)
        #expect(scratch.names == ["plain"])
    }

    @Test func aFullDiskFailsWithAFileErrorAndLeavesNoFileBehind() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.chunks((0..<10).map { patterned(50_000, from: $0 * 50_000) }, headers: Self.resumable))
        let recorder = HookRecorder()
        let written = Locked(0)
        // The disk fills after 120,000 bytes: then every write fails with ENOSPC.
        let fullDisk: @Sendable (Int32, UnsafeRawBufferPointer) -> Int = { fd, buffer in
            let room = written.withLock { total -> Int in
                let room = min(buffer.count, max(0, 120_000 - total))
                total += room
                return room
            }
            guard room > 0 else {
                errno = ENOSPC
                return -1
            }
            return buffer.baseAddress.map { write(fd, $0, room) } ?? 0
        }
        let destination = scratch.file("full.bin")
        try Data("previous".utf8).write(to: destination)
        let error = await #expect(throws: NetworkError.self) {
            try await client(mock, recorder: recorder).download(
                Request<Data>(path: "/big"), to: destination, maxSize: nil, writeBytes: fullDisk)
        }
        guard case .fileFailed = error, let file = error?.file, let underlying = error?.underlying else {
            Issue.record("expected .fileFailed, got \(String(describing: error))")
            return
        }
        #expect(file == "full.bin")
        #expect((underlying as? POSIXError)?.code == .ENOSPC)
        #expect(try Data(contentsOf: destination) == Data("previous".utf8))  // the old file is untouched
        #expect(scratch.names == ["full.bin"])  // and no partial file is left
        #expect(recorder.hooks(of: "spy").last == .afterFailure)
    }

    @Test func anErrorStatusIsReadIntoMemoryAndNothingIsWritten() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.rawJSON(#"{"error":"no such movie"}"#, status: 404))
        let error = await #expect(throws: NetworkError.self) {
            try await client(mock).download(Request<Data>(path: "/big"), to: scratch.file("no.bin"))
        }
        #expect(error?.status == 404)
        #expect(error?.response?.body == Data(#"{"error":"no such movie"}"#.utf8))
        #expect(scratch.names.isEmpty)
    }

    @Test func maxSizeStopsTheDownload() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.chunks([patterned(60_000), patterned(60_000)]))
        let error = await #expect(throws: NetworkError.self) {
            try await client(mock).download(Request<Data>(path: "/big"), to: scratch.file("cap.bin"), maxSize: 100_000)
        }
        #expect(error == .responseTooLarge(limit: 100_000))
        #expect(scratch.names.isEmpty)
    }

    @Test func theClientsMemoryLimitDoesNotApplyToTheFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.chunks([patterned(70_000), patterned(70_000, from: 70_000)]))
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(maxResponseSize: 100_000))
        let destination = scratch.file("big.bin")
        _ = try await client.download(Request<Data>(path: "/big"), to: destination)
        #expect(try Data(contentsOf: destination) == patterned(140_000))
    }

    @Test func aTransportThatDoesNotStreamStillDownloads() async throws {
        struct Whole: HTTPTransport {  // not a StreamingHTTPTransport: its type says it buffers
            func send(_ request: HTTPRequest) async throws -> HTTPResponse {
                HTTPResponse(status: 200, body: patterned(5_000), request: request)
            }
        }
        let scratch = try Scratch()
        defer { scratch.remove() }
        let progress = ProgressLog()
        let destination = scratch.file("whole.bin")
        _ = try await NetworkClient(baseURL: api, transport: Whole()).download(
            Request<Data>(path: "/x").onProgress(progress.record), to: destination)
        #expect(try Data(contentsOf: destination) == patterned(5_000))
        #expect(progress.downloads(attempt: 1).last == 5_000)
    }

    @Test func aCacheNeverKeepsADownload() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        mock.stub(.get, "/big", reply: .chunks([patterned(1_000)], headers: ["Cache-Control": "max-age=600"]))
        let client = NetworkClient(baseURL: api, transport: mock) { CacheBehavior(storage: MemoryCacheStorage()) }
        for name in ["a.bin", "b.bin"] {
            _ = try await client.download(Request<Data>(path: "/big"), to: scratch.file(name))
            #expect(try Data(contentsOf: scratch.file(name)) == patterned(1_000))
        }
        #expect(mock.requests.count == 2)
    }

    @Test func aDownloadReplacesAnExistingFileOnlyOnSuccess() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let mock = MockTransport(baseURL: api)
        let destination = scratch.file("keep.bin")
        try Data("old".utf8).write(to: destination)
        mock.enqueue(.streamed(status: 200, headers: [:], chunks: [patterned(10)], end: .failure(URLError(.networkConnectionLost))))
        _ = try? await client(mock).download(Request<Data>(path: "/big"), to: destination)
        #expect(try Data(contentsOf: destination) == Data("old".utf8))
        mock.enqueue(.chunks([Data("new".utf8)]))
        _ = try await client(mock).download(Request<Data>(path: "/big"), to: destination)
        #expect(try Data(contentsOf: destination) == Data("new".utf8))
    }
}
