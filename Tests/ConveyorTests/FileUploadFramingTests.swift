@testable import Conveyor
@testable import ConveyorBehaviors
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A body read from a file is framed by its `Content-Length` alone, whichever way the transport
/// reads it (on Linux, an `InputStream` whose `Transfer-Encoding` is blanked so that libcurl
/// neither sends the field nor chunks the body; `URLSessionTransport.uploadTask`).
@Suite struct FileUploadFramingTests {
    struct Upload: Decodable {
        var bytes: Int
        var sha256: String
        var contentType: String?
        var chunked: Bool
    }

    func client(_ server: LocalServer) -> NetworkClient {
        NetworkClient(
            baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral),
            configuration: .init(clock: ImmediateClock()))
    }

    /// What the server saw: one `Content-Length`, no `Transfer-Encoding`, no `Content-Type` the
    /// request did not have, and the file's bytes.
    @Test(arguments: ["POST", "PUT"])
    func aFileBodyIsSentUnderItsLengthWithNothingAdded(method: String) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await LocalServer.withServer { server in
            let file = scratch.file("plain.bin")
            try Data("framed by its length".utf8).write(to: file)
            let echo: Echo = try await client(server).send(
                Request<Echo>(method: HTTPMethod(rawValue: method), path: "/echo", body: .file(file, contentType: nil)))
            #expect(echo.method == method)
            #expect(echo.body == "framed by its length")
            #expect(echo.headers["content-length"] == "20")
            #expect(echo.headers["transfer-encoding"] == nil)
            #expect(echo.headers["content-type"] == nil)
        }
    }

    /// Bytes in memory without a content type arrive without one, through Conveyor's transport
    /// and through a plain session: FoundationNetworking labels an unlabelled POST body
    /// `application/x-www-form-urlencoded`, which a server would parse as a form.
    @Test(arguments: ["POST", "PUT", "PATCH"], [false, true])
    func aBodyInMemoryGetsNoContentTypeItDidNotHave(method: String, plainSession: Bool) async throws {
        try await LocalServer.withServer { server in
            let transport: any HTTPTransport =
                plainSession
                ? URLSession(configuration: .ephemeral) : URLSessionTransport(configuration: .ephemeral)
            let client = NetworkClient(baseURL: server.baseURL, transport: transport)
            let unlabelled: Echo = try await client.send(
                Request<Echo>(
                    method: HTTPMethod(rawValue: method), path: "/echo", body: .data(Data("a=1&b=2".utf8), contentType: nil)))
            #expect(unlabelled.method == method)
            #expect(unlabelled.body == "a=1&b=2")
            #expect(unlabelled.headers["content-length"] == "7")
            #expect(unlabelled.headers["content-type"] == nil, "\(unlabelled.headers)")
            // A type the caller gave, and the form body's own, still arrive.
            let labelled: Echo = try await client.send(
                Request<Echo>(method: HTTPMethod(rawValue: method), path: "/echo", body: .data(Data("{}".utf8), contentType: "application/json")))
            #expect(labelled.headers["content-type"] == "application/json")
            let form: Echo = try await client.send(
                Request<Echo>(method: HTTPMethod(rawValue: method), path: "/echo", body: .form(["a": "1"])))
            #expect(form.headers["content-type"] == "application/x-www-form-urlencoded")
        }
    }

    /// Megabytes from a file, and from the copy a one-shot stream is spilled to: every byte, in
    /// order, not chunked, with the content type the request gave.
    @Test func largeFileAndSpilledBodiesArriveWholeAndUnchunked() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await LocalServer.withServer { server in
            let data = patterned(5_000_003)
            let file = scratch.file("large.bin")
            try data.write(to: file)
            let fromFile: Upload = try await client(server).send(
                Request<Upload>(
                    method: .post, path: "/upload", body: .file(file, contentType: "application/octet-stream")))
            #expect(fromFile.bytes == data.count)
            #expect(fromFile.sha256 == hex(SHA256.digest(data)))
            #expect(!fromFile.chunked)
            #expect(fromFile.contentType == "application/octet-stream")

            let (chunks, feed) = AsyncStream<Data>.makeStream()
            var offset = 0
            while offset < data.count {
                feed.yield(data[offset..<min(offset + 700_001, data.count)])
                offset += 700_001
            }
            feed.finish()
            let spilled: Upload = try await client(server).send(
                Request<Upload>(
                    method: .put, path: "/upload", body: .stream(chunks, length: Int64(data.count), contentType: "x/y")))
            #expect(spilled.bytes == data.count)
            #expect(spilled.sha256 == hex(SHA256.digest(data)))
            #expect(!spilled.chunked)
            #expect(spilled.contentType == "x/y")
        }
    }

    /// When libcurl rewinds a body it reads from a stream (a request sent again on a new
    /// connection), the session's delegate hands FoundationNetworking a new stream of the file
    /// from its first byte; a task without a body file gets none.
    @Test func aRewoundBodyStartsAgainFromTheFilesFirstByte() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let file = scratch.file("rewind.bin")
        let data = patterned(200_000)
        try data.write(to: file)
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let delegate = SessionDelegate(policy: RedirectPolicy())
        let url = try #require(URL(string: "http://127.0.0.1:9/upload"))
        let withFile = session.dataTask(with: url)
        let withoutFile = session.dataTask(with: url)
        let request = HTTPRequest(method: .put, url: url)
        delegate.register(
            DataTaskExchange(request: request, session: session), for: withFile,
            bodyFile: UploadBodyFile(url: file, length: Int64(data.count)))
        delegate.register(DataTaskExchange(request: request, session: session), for: withoutFile)

        func newStream(for task: URLSessionTask) -> InputStream? {
            let handed = Locked<InputStream?>(nil)
            delegate.urlSession(session, task: task, needNewBodyStream: { stream in handed.withLock { $0 = stream } })
            return handed.withLock { $0 }
        }
        for _ in 0..<2 {  // each rewind gets a stream of its own, from the start
            let stream = try #require(newStream(for: withFile))
            #expect(readAll(stream) == data)
        }
        #expect(newStream(for: withoutFile) == nil)
        withFile.cancel()
        withoutFile.cancel()
    }

    #if canImport(FoundationNetworking)
        /// A file that shrank after its body was made (so after its length was announced) fails
        /// at once with `.fileFailed`, naming the file, instead of leaving the server waiting for
        /// the rest until the request times out (what it did, on both Linux paths, before).
        @Test func aFileThatShrinksBeforeItIsSentFailsAtOnceWithAFileError() async throws {
            struct Shrinking: StreamingHTTPTransport {
                let inner = URLSessionTransport()
                let file: URL
                func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
                    try patterned(10).write(to: file)  // after the client made the body and its length
                    return try await inner.send(request, transfer: transfer)
                }
                func send(_ request: HTTPRequest) async throws -> HTTPResponse { try await send(request, transfer: nil) }
            }
            let scratch = try Scratch()
            defer { scratch.remove() }
            try await LocalServer.withServer { server in
                let file = scratch.file("shrinks.bin")
                try patterned(2_000_000).write(to: file)
                var request = Request<Data>(method: .post, path: "/upload", body: .file(file, contentType: nil))
                // What a server left waiting ends in: `.timedOut`. As long as the suite's hang
                // bound: at the start of a parallel run on two cores trivial tests take 28 s (57 s
                // under the thread sanitizer), and 10 s once ran out before the transfer was under way.
                request.timeout = .seconds(Double(hangBound))
                let client = NetworkClient(baseURL: server.baseURL, transport: Shrinking(file: file))
                let error = await #expect(throws: NetworkError.self) { try await client.send(request) }
                #expect(error?.name == "fileFailed")
                #expect("\(error.map(String.init(describing:)) ?? "")".contains("shrinks.bin"))
            }
        }

        /// A file that grew is sent only up to the length the request announced.
        @Test func aFileThatGrewIsSentUpToItsAnnouncedLength() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let file = scratch.file("grows.bin")
            try patterned(300_000).write(to: file)
            let body = UploadBodyFile(url: file, length: 100_000)
            let stream = try #require(FileBodyStream(body))
            #expect(readAll(stream) == patterned(100_000))
            #expect(body.shortfall.problem == nil)
            let short = UploadBodyFile(url: file, length: 400_000)
            let shortStream = try #require(FileBodyStream(short))
            #expect(readAll(shortStream) == patterned(300_000))
            #expect(short.shortfall.problem?.contains("300000 of the 400000") == true)
        }
    #endif

    func hex(_ digest: some Sequence<UInt8>) -> String { digest.map { String(format: "%02x", $0) }.joined() }

    func readAll(_ stream: InputStream) -> Data {
        stream.open()
        defer { stream.close() }
        var result = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count <= 0 { break }
            result.append(contentsOf: buffer[0..<count])
        }
        return result
    }
}
