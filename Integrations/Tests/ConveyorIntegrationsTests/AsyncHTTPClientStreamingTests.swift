import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import Foundation
import IntegrationsTestSupport
import Testing

/// Bodies stream both ways through `AsyncHTTPClientTransport`, against the local server: uploads
/// are read as they are sent, response bodies go to the transfer as they arrive, under the same
/// caps, progress and deadlines as on URLSession.
@Suite struct AsyncHTTPClientStreamingTests {
    struct Receipt: Decodable {
        var bytes: Int
        var sha256: String
        var chunked: Bool
    }

    /// Byte i is i % 256, as the server's `/blob` sends.
    static func patterned(_ count: Int) -> Data { Data((0..<count).map { UInt8(truncatingIfNeeded: $0) }) }

    static func sha256(of file: URL) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sha256sum", file.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: output, as: UTF8.self).split(separator: " ").first.map(String.init) ?? ""
    }

    static func scratchFile(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-ahc-\(UUID().uuidString)-\(name)")
    }

    /// Progress values, recorded in order.
    final class Progress: @unchecked Sendable {  // guarded by `lock`
        private let lock = NSLock()
        private var values: [TransferProgress] = []
        func record(_ progress: TransferProgress) { lock.withLock { values.append(progress) } }
        func last(_ direction: TransferProgress.Direction) -> Int64? {
            lock.withLock { values.last { $0.direction == direction }?.completedBytes }
        }
        func count(_ direction: TransferProgress.Direction) -> Int {
            lock.withLock { values.count { $0.direction == direction } }
        }
    }

    @Test func aFileUploadIsReadAsItIsSentWithItsLengthAndProgress() async throws {
        let file = Self.scratchFile("upload.bin")
        defer { try? FileManager.default.removeItem(at: file) }
        let size = 8 << 20
        try Self.patterned(size).write(to: file)
        try await LocalServer.withServer { server in
            let progress = Progress()
            // A client limit far below the file: the body is not read into memory for the transport.
            let client = try ahcClient(server, maxResponseSize: 1 << 20)
            let receipt = try await client.send(
                Request<Receipt>(
                    method: .put, path: "/upload", body: .file(file, contentType: "application/octet-stream")
                )
                .onProgress(progress.record))
            #expect(receipt.bytes == size)
            #expect(receipt.sha256 == (try Self.sha256(of: file)))
            #expect(!receipt.chunked)  // sent with its Content-Length
            #expect(progress.last(.upload) == Int64(size))
            #expect(progress.count(.upload) > 1)  // reported as it went
        }
    }

    @Test func aStreamOfUnknownLengthIsSentChunked() async throws {
        try await LocalServer.withServer { server in
            let chunks = (0..<40).map { Data(repeating: UInt8($0), count: 50_000) }
            let bytes = AsyncStream<Data> { continuation in
                for chunk in chunks { continuation.yield(chunk) }
                continuation.finish()
            }
            let file = Self.scratchFile("expected.bin")
            defer { try? FileManager.default.removeItem(at: file) }
            try chunks.reduce(Data(), +).write(to: file)
            let receipt = try await ahcClient(server).send(
                Request<Receipt>(method: .post, path: "/upload", body: .stream(bytes)))
            #expect(receipt.bytes == 2_000_000)
            #expect(receipt.chunked)
            #expect(receipt.sha256 == (try Self.sha256(of: file)))
        }
    }

    /// A 307 sends the same file again to the new location; a one-shot stream cannot be sent
    /// twice and fails with a typed error instead of an empty body.
    @Test func aRedirectKeepingTheBodySendsTheFileAgainButNotAOneShotStream() async throws {
        let file = Self.scratchFile("again.bin")
        defer { try? FileManager.default.removeItem(at: file) }
        try Self.patterned(300_000).write(to: file)
        try await LocalServer.withServer { server in
            let client = try ahcClient(server)
            let receipt = try await client.send(
                Request<Receipt>(
                    method: .put, path: "/redirect", query: ["status": 307, "to": "/upload"],
                    body: .file(file, contentType: nil)))
            #expect(receipt.bytes == 300_000)
            #expect(receipt.sha256 == (try Self.sha256(of: file)))

            let once = AsyncStream<Data> { continuation in
                continuation.yield(Data(repeating: 1, count: 1000))
                continuation.finish()
            }
            let request = Request<Receipt>(
                method: .put, path: "/redirect", query: ["status": 307, "to": "/upload"],
                body: .stream(once, length: 1000))
            do {
                _ = try await client.send(request)
                Issue.record("a one-shot stream was sent twice")
            } catch {
                #expect(NetworkError.invalidRequest ~= error, "\(error)")
            }
        }
    }

    /// Larger than the client's in-memory limit, so it can only succeed if the body goes to the
    /// file as it arrives; progress ends at the whole size.
    @Test func aDownloadGoesToItsFileAsItArrives() async throws {
        let destination = Self.scratchFile("download.bin")
        defer { try? FileManager.default.removeItem(at: destination) }
        try await LocalServer.withServer { server in
            let progress = Progress()
            let client = try ahcClient(server, maxResponseSize: 1 << 20)
            let total = 24 << 20
            let saved = try await client.download(
                Request<Data>(path: "/blob", query: ["bytes": total]).onProgress(progress.record), to: destination)
            #expect(saved.response.body.isEmpty)
            let data = try Data(contentsOf: destination)
            #expect(data.count == total)
            #expect(data == Self.patterned(total))
            #expect(progress.last(.download) == Int64(total))
            #expect(progress.count(.download) > 1)
        }
    }

    @Test func aDownloadOverItsMaxSizeFailsAndLeavesNoFile() async throws {
        let destination = Self.scratchFile("capped.bin")
        try await LocalServer.withServer { server in
            let client = try ahcClient(server)
            await #expect(throws: NetworkError.responseTooLarge(limit: 1_000_000)) {
                try await client.download(
                    Request<Data>(path: "/blob", query: ["bytes": 2_000_000]), to: destination, maxSize: 1_000_000)
            }
            #expect(!FileManager.default.fileExists(atPath: destination.path))
        }
    }

    /// A streamed body over the in-memory limit arrives whole, in order, in many chunks.
    @Test func aStreamedBodyArrivesInChunksPastTheInMemoryLimit() async throws {
        try await LocalServer.withServer { server in
            let client = try ahcClient(server, maxResponseSize: 1 << 20)
            let total = 8 << 20
            let streamed = try await client.stream(Request<Data>(path: "/blob", query: ["bytes": total]))
            var read = 0
            var chunks = 0
            for try await chunk in streamed.body {
                if let first = chunk.first, first != UInt8(truncatingIfNeeded: read) {
                    Issue.record("bytes out of order at offset \(read)")
                }
                read += chunk.count
                chunks += 1
            }
            #expect(read == total)
            #expect(chunks > 1)
        }
    }

    /// Leaving the loop ends the transfer: the behaviors' ending hook runs with `.cancelled`
    /// although the response value is still held, and the connection goes back or is closed
    /// (the next request on the same client is answered).
    @Test func leavingTheLoopEndsTheTransferAndTheHooks() async throws {
        try await LocalServer.withServer { server in
            let endings = AsyncStream<String>.makeStream()
            let client = try ahcClient(server) { EndingRecorder(endings: endings.continuation) }
            let streamed = try await client.stream(Request<Data>(path: "/stream", query: ["bytes": 1 << 30]))
            for try await _ in streamed.body { break }
            var iterator = endings.stream.makeAsyncIterator()
            #expect(await iterator.next() == "cancelled")
            withExtendedLifetime(streamed) {}
            let echo = try await client.send(Request<Echo>(path: "/echo"))
            #expect(echo.method == "GET")
        }
    }

    /// A body that stops arriving fails at the request's deadline, also while a transfer takes it.
    @Test func aStalledTakenBodyTimesOut() async throws {
        let destination = Self.scratchFile("stalled.bin")
        try await LocalServer.withServer { server in
            let client = try ahcClient(server, timeout: .milliseconds(500))
            await #expect(throws: NetworkError.timedOut) {
                try await client.download(
                    Request<Data>(path: "/blob", query: ["bytes": 1_000_000, "chunk": 1000, "delay": 5000]),
                    to: destination)
            }
            #expect(!FileManager.default.fileExists(atPath: destination.path))
        }
    }
}

/// Reports each request's ending: "success" or the error's name.
struct EndingRecorder: SuccessObserving, FailureObserving {
    let endings: AsyncStream<String>.Continuation
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { endings.yield("success") }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { endings.yield(error.name) }
}
