import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@testable import Conveyor
@testable import ConveyorBehaviors

/// `MultipartForm` and `RequestBody.multipart`: the bytes on the wire (RFC 7578), escaping,
/// boundaries that cannot collide, errors, and a form parsed by the local server.
@Suite struct MultipartTests {
    // MARK: Encoding

    @Test func aSmallFormIsEncodedByteForByte() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let poster = try folder.write(Data("PNG!".utf8), to: "poster.png")
        var form = MultipartForm(boundary: "XyZ-1")
        form.append("Heat", name: "title")
        form.append(Data([0x00, 0xFF, 0x0D, 0x0A]), name: "blob", filename: "b.bin")
        form.append(Data("{}".utf8), name: "meta", contentType: "application/json")
        form.append(file: poster, name: "poster")

        var expected = Data()
        expected += "--XyZ-1\r\n"
        expected += "Content-Disposition: form-data; name=\"title\"\r\n"
        expected += "\r\n"
        expected += "Heat\r\n"
        expected += "--XyZ-1\r\n"
        expected += "Content-Disposition: form-data; name=\"blob\"; filename=\"b.bin\"\r\n"
        expected += "Content-Type: application/octet-stream\r\n"
        expected += "\r\n"
        expected.append(contentsOf: [0x00, 0xFF, 0x0D, 0x0A])
        expected += "\r\n"
        expected += "--XyZ-1\r\n"
        expected += "Content-Disposition: form-data; name=\"meta\"\r\n"
        expected += "Content-Type: application/json\r\n"
        expected += "\r\n"
        expected += "{}\r\n"
        expected += "--XyZ-1\r\n"
        expected += "Content-Disposition: form-data; name=\"poster\"; filename=\"poster.png\"\r\n"
        expected += "Content-Type: image/png\r\n"
        expected += "\r\n"
        expected += "PNG!\r\n"
        expected += "--XyZ-1--\r\n"

        let stream = try form.bodyStream()
        #expect(try await stream.collect() == expected)
        #expect(stream.length == Int64(expected.count))
        #expect(form.contentType == "multipart/form-data; boundary=XyZ-1")
        // The file goes into the stream as a file, read when sent, not as its bytes.
        #expect(try form.streamParts().filter { $0 == .file(poster) }.count == 1)
    }

    @Test func anEmptyFormIsTheClosingDelimiterOnly() async throws {
        let form = MultipartForm(boundary: "b")
        #expect(try await form.bodyStream().collect() == Data("--b--\r\n".utf8))
    }

    @Test func fileNamesAndContentTypesHaveDefaults() throws {
        var form = MultipartForm(boundary: "b")
        form.append(file: URL(fileURLWithPath: "/tmp/Photo.JPEG"), name: "a")
        form.append(file: URL(fileURLWithPath: "/tmp/archive"), name: "b")
        form.append(file: URL(fileURLWithPath: "/tmp/x"), name: "c", filename: "clip.mp4")
        form.append(file: URL(fileURLWithPath: "/tmp/x.pdf"), name: "d", filename: "renamed", contentType: "text/csv")
        form.append(Data(), name: "e", filename: "notes.txt")
        let headers = form.parts.map(MultipartForm.headers(of:))
        #expect(
            headers == [
                "Content-Disposition: form-data; name=\"a\"; filename=\"Photo.JPEG\"\r\nContent-Type: image/jpeg\r\n\r\n",
                "Content-Disposition: form-data; name=\"b\"; filename=\"archive\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                "Content-Disposition: form-data; name=\"c\"; filename=\"clip.mp4\"\r\nContent-Type: video/mp4\r\n\r\n",
                "Content-Disposition: form-data; name=\"d\"; filename=\"renamed\"\r\nContent-Type: text/csv\r\n\r\n",
                "Content-Disposition: form-data; name=\"e\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\n",
            ])
    }

    // MARK: Escaping

    @Test func quotesAndLineBreaksInNamesAreEscapedAndNonASCIIStaysUTF8() async throws {
        var form = MultipartForm(boundary: "b")
        form.append(Data("v".utf8), name: "a\"b\r\nc;d é", filename: "日本 \"x\";\n.txt")
        let body = try await form.bodyStream().collect()
        let expected =
            "--b\r\nContent-Disposition: form-data; name=\"a%22b%0D%0Ac;d é\"; filename=\"日本 %22x%22;%0A.txt\"\r\n"
            + "Content-Type: text/plain\r\n\r\nv\r\n--b--\r\n"
        #expect(body == Data(expected.utf8))

        let parts = try #require(MultipartReader.parse(body, boundary: "b"))
        #expect(parts == [.init(name: "a\"b\r\nc;d é", filename: "日本 \"x\";\n.txt", contentType: "text/plain", content: Data("v".utf8))])
    }

    /// Random forms (names, filenames and values full of quotes, CRLFs, `--`, the boundary's own
    /// text and non-ASCII) come back part for part from a parser that knows only RFC 7578. With a
    /// random boundary, text that contains the delimiter makes the form choose another boundary;
    /// with the caller's, it makes building the body fail.
    @Test func randomFormsRoundTrip() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        var random = SplitMix64(state: 0x6D75_6C74_6970_6172)
        var changed = 0
        var refused = 0
        var sent = 0
        for round in 0..<300 {
            let callers = random.next() % 3 == 0
            let chosen = callers ? Self.randomBoundary(using: &random) : nil
            var form = MultipartForm(boundary: chosen, using: SplitMix64(state: random.next()))
            var expected: [MultipartReader.Part] = []
            var collides = false
            for index in 0..<Int(random.next() % 6) {
                // Text that comes close to the delimiter or, sometimes, is the delimiter.
                let boundary = form.boundary
                let delimiter = "--" + boundary
                let extra = ["--" + boundary.dropLast(), "-" + boundary, "\r\n-" + boundary, boundary] + (random.next() % 4 == 0 ? [delimiter] : [])
                let name = Self.randomText(using: &random, extra: extra)
                let value = Self.randomText(using: &random, extra: extra)
                let contentType = random.next() % 2 == 0 ? nil : "text/x-\(index); q=\"1\""
                var inMemory = [name, value]
                switch random.next() % 4 {
                case 0:
                    form.append(value, name: name)
                    expected.append(.init(name: name, filename: nil, contentType: nil, content: Data(value.utf8)))
                case 1:
                    form.append(Data(value.utf8), name: name, contentType: contentType)
                    expected.append(.init(name: name, filename: nil, contentType: contentType, content: Data(value.utf8)))
                case 2:
                    let filename = Self.randomText(using: &random, extra: extra)
                    inMemory.append(filename)
                    form.append(Data(value.utf8), name: name, filename: filename, contentType: contentType)
                    expected.append(.init(name: name, filename: filename, contentType: contentType ?? "application/octet-stream", content: Data(value.utf8)))
                default:
                    // File contents are not searched for the boundary: they only come close.
                    var content = value
                    while Self.occurs(delimiter, in: content) { content = Self.randomText(using: &random, extra: extra) }
                    inMemory = [name]
                    let url = try folder.write(Data(content.utf8), to: "\(round)-\(index).bin")
                    form.append(file: url, name: name, contentType: contentType)
                    expected.append(.init(name: name, filename: url.lastPathComponent, contentType: contentType ?? "application/octet-stream", content: Data(content.utf8)))
                }
                if inMemory.contains(where: { Self.occurs(delimiter, in: $0) }) {
                    if callers { collides = true } else { #expect(form.boundary != boundary, "round \(round)") }
                }
                if form.boundary != boundary { changed += 1 }
            }
            if callers { #expect(form.boundary == chosen) }
            let stream: HTTPBodyStream
            do {
                stream = try form.bodyStream()
            } catch {
                guard case .invalidRequest = error, collides else {
                    Issue.record("round \(round): unexpected \(error)")
                    continue
                }
                refused += 1
                continue
            }
            #expect(!collides, "round \(round): a caller's boundary found in a part was not refused")
            let body = try await stream.collect()
            #expect(stream.length == Int64(body.count))
            let parts = MultipartReader.parse(body, boundary: form.boundary)
            #expect(parts?.count == expected.count, "round \(round)")
            #expect(parts == expected.map(\.asReadBack), "round \(round)")
            sent += 1
        }
        // The generator exercised every path.
        #expect(changed > 10)
        #expect(refused > 5)
        #expect(sent > 150)
    }

    // MARK: Boundaries

    @Test func aPartContainingTheBoundaryGetsAnotherRandomBoundary() async throws {
        var expected: any RandomNumberGenerator & Sendable = SplitMix64(state: 7)
        let first = MultipartForm.randomBoundary(using: &expected)
        let second = MultipartForm.randomBoundary(using: &expected)
        let third = MultipartForm.randomBoundary(using: &expected)
        #expect(first.hasPrefix("conveyor-") && first.count == 41)
        #expect(first.dropFirst(9).allSatisfy { $0.isHexDigit })

        var form = MultipartForm(boundary: nil, using: SplitMix64(state: 7))
        #expect(form.boundary == first)
        form.append("no clash", name: "a")
        #expect(form.boundary == first)
        form.append(Data("x\r\n--\(first)--\r\n".utf8), name: "clash", filename: "c.bin")
        #expect(form.boundary == second)
        #expect(form.contentType == "multipart/form-data; boundary=\(second)")
        // A name can collide too; the new boundary must then also avoid every earlier part.
        form.append("--\(third)", name: "--\(second)")
        #expect(form.boundary != second && form.boundary != third)

        let body = try await form.bodyStream().collect()
        let parts = try #require(MultipartReader.parse(body, boundary: form.boundary))
        #expect(parts.map(\.name) == ["a", "clash", "--\(second)"])
        #expect(parts[1].content == Data("x\r\n--\(first)--\r\n".utf8))
    }

    @Test func aGeneratorThatRepeatsItselfFailsInsteadOfLooping() throws {
        var form = MultipartForm(boundary: nil, using: RepeatingGenerator())
        form.append("--\(form.boundary)", name: "clash")
        let error = #expect(throws: NetworkError.self) { try form.bodyStream() }
        guard case .invalidRequest? = error, let reason = error?.reason else { return }
        #expect(reason.contains("no random multipart boundary"))
    }

    @Test(arguments: ["", String(repeating: "a", count: 71), "ends with a space ", "quote\"", "semi;colon", "crlf\r\nx", "ümlaut", "tab\t"])
    func anInvalidBoundaryOfTheCallersIsRefused(boundary: String) {
        var form = MultipartForm(boundary: boundary)
        form.append("v", name: "n")
        let error = #expect(throws: NetworkError.self) { try form.bodyStream() }
        guard case .invalidRequest? = error, let reason = error?.reason else { return }
        #expect(reason.hasPrefix("the multipart boundary is not valid"))
    }

    @Test(arguments: ["a", String(repeating: "z", count: 70), "with space:and/more=?(),'+_.-"])
    func everyRFC2046BoundaryWorks(boundary: String) async throws {
        var form = MultipartForm(boundary: boundary)
        form.append("v", name: "n")
        let quoted = boundary.contains { " :/=?(),".contains($0) }
        #expect(form.contentType == (quoted ? "multipart/form-data; boundary=\"\(boundary)\"" : "multipart/form-data; boundary=\(boundary)"))
        let parts = MultipartReader.parse(try await form.bodyStream().collect(), boundary: boundary)
        #expect(parts == [.init(name: "n", filename: nil, contentType: nil, content: Data("v".utf8))])
    }

    @Test func theCallersBoundaryInAPartIsRefusedNotChanged() {
        var form = MultipartForm(boundary: "fixed")
        form.append("before --fixed after", name: "text")
        #expect(form.boundary == "fixed")
        let error = #expect(throws: NetworkError.self) { try form.bodyStream() }
        guard case .invalidRequest? = error, let reason = error?.reason else { return }
        #expect(reason.contains("part 1 contains the boundary"))
        #expect(!reason.contains("before"), "the reason never quotes the content")
    }

    // MARK: Errors

    @Test(arguments: ["text/plain\r\nX-Evil: 1", "text/plain\nX", "text/plain\r", "text/\0plain"])
    func aContentTypeWithALineBreakIsRefused(contentType: String) {
        var form = MultipartForm()
        form.append("ok", name: "first")
        form.append(Data("x".utf8), name: "f", filename: "f.txt", contentType: contentType)
        let error = #expect(throws: NetworkError.self) { try form.bodyStream() }
        guard case .invalidRequest? = error, let reason = error?.reason else { return }
        #expect(reason == "the content type of multipart part 2 contains CR, LF or NUL")
    }

    @Test func aMissingFileFailsBeforeAnythingIsSent() async throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-missing-\(UUID()).bin")
        var form = MultipartForm()
        form.append(file: missing, name: "upload")
        let error = #expect(throws: NetworkError.self) { try form.bodyStream() }
        guard case .fileFailed? = error, let file = error?.file else {
            Issue.record("expected fileFailed, got \(String(describing: error))")
            return
        }
        #expect(file == missing.lastPathComponent)

        let mock = MockTransport()
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!, transport: mock)
        await #expect(throws: NetworkError.self) {
            try await client.send(Request<Void>(method: .post, path: "/upload", body: .multipart(form)))
        }
        #expect(mock.requests.isEmpty)
    }

    // MARK: Through the client

    @Test func theClientSendsTheFormWithItsContentTypeAndLength() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try folder.write(Data(repeating: 0x41, count: 200_000), to: "a.txt")
        var form = MultipartForm()
        form.append("Heat", name: "title")
        form.append(file: file, name: "attachment")

        let mock = MockTransport()
        mock.enqueue(.status(201))
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!, transport: mock)
        let request = Request<Void>(method: .post, path: "/upload", body: .multipart(form))

        let built = try client.makeHTTPRequest(request)
        let stream = try #require(built.bodyStream)
        let collected = try await stream.collect()
        #expect(stream.length == Int64(collected.count))
        #expect(built.headers["Content-Type"] == form.contentType)

        try await client.send(request)
        let sent = try #require(mock.requests.first)
        #expect(sent.headers["Content-Type"] == form.contentType)
        #expect(sent.body == collected)
        let parts = try #require(MultipartReader.parse(collected, boundary: form.boundary))
        #expect(parts.map(\.name) == ["title", "attachment"])
        #expect(parts[1].content == Data(repeating: 0x41, count: 200_000))
    }

    @Test func aRetriedFormIsSentWholeAgainWithItsFiles() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try folder.write(Data("file content".utf8), to: "f.txt")
        var form = MultipartForm()
        form.append("v", name: "field")
        form.append(file: file, name: "file")

        let mock = MockTransport()
        mock.enqueue(.status(503), .status(200))
        let client = NetworkClient(
            baseURL: URL(string: "https://api.example.com")!, transport: mock,
            configuration: .init(clock: ImmediateClock())
        ) { RetryBehavior(.exponentialBackoff(maxAttempts: 2, jitter: .none)) }
        try await client.send(Request<Void>(method: .put, path: "/upload", body: .multipart(form)))

        #expect(mock.requests.count == 2)
        let bodies = mock.requests.map { $0.body ?? Data() }
        #expect(bodies[0] == bodies[1])
        let parts = try #require(MultipartReader.parse(bodies[1], boundary: form.boundary))
        #expect(parts.map(\.content) == [Data("v".utf8), Data("file content".utf8)])
    }

    @Test func aDescriptionNamesThePartsButNeverTheirValues() {
        var form = MultipartForm()
        form.append("hunter2", name: "password")
        form.append(file: URL(fileURLWithPath: "/tmp/secret-plans.pdf"), name: "doc")
        #expect(form.description == "multipart form (2 parts: \"password\" 7 bytes, \"doc\" file)")
        var dumped = ""
        dump(form, to: &dumped)
        #expect(!dumped.contains("hunter2") && !dumped.contains("secret-plans"))
    }

    // MARK: End to end

    /// Text fields and two files, one of 3 MiB, parsed by the local server. Through
    /// `URLSessionTransport`, which today does not stream: the client reads the body into memory
    /// first (its buffered path); the test stays as it is once the transport streams.
    @Test func theLocalServerParsesTheForm() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        var random = SplitMix64(state: 42)
        let big = Data((0..<(3 << 20)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        let small = Data("a small text file\r\n--not-a-boundary\r\n".utf8)
        let bigURL = try folder.write(big, to: "big.bin")
        let smallURL = try folder.write(small, to: "notes.txt")

        var form = MultipartForm()
        form.append("Heat", name: "title")
        form.append("Zürich \"quoted\"\r\nline two", name: "a \"tricky\"\r\nname")
        form.append(file: smallURL, name: "notes")
        form.append(file: bigURL, name: "archive", filename: "data.zip")

        try await LocalServer.withServer { server in
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral))
            let answer = try await client.send(
                Request<ServerAnswer>(method: .post, path: "/multipart", body: .multipart(form)))
            let hex = { (data: Data) in SHA256.digest(data).map { String(format: "%02x", $0) }.joined() }
            let title = Data("Heat".utf8)
            let tricky = Data("Zürich \"quoted\"\r\nline two".utf8)
            #expect(
                answer.parts == [
                    .init(name: "title", filename: nil, contentType: nil, size: title.count, sha256: hex(title), text: "Heat"),
                    .init(
                        name: "a \"tricky\"\r\nname", filename: nil, contentType: nil, size: tricky.count, sha256: hex(tricky),
                        text: "Zürich \"quoted\"\r\nline two"),
                    .init(name: "notes", filename: "notes.txt", contentType: "text/plain", size: small.count, sha256: hex(small), text: nil),
                    .init(name: "archive", filename: "data.zip", contentType: "application/zip", size: big.count, sha256: hex(big), text: nil),
                ])
        }
    }

    /// What `/multipart` answers.
    struct ServerAnswer: Decodable, Sendable {
        struct Part: Decodable, Equatable, Sendable {
            var name: String?
            var filename: String?
            var contentType: String?
            var size: Int
            var sha256: String
            var text: String?
        }
        var parts: [Part]
    }

    // MARK: Helpers

    /// A boundary of RFC 2046's characters, 1 to 70 of them, not ending in a space.
    static func randomBoundary(using random: inout SplitMix64) -> String {
        let characters = Array("abcXYZ019'()+_,-./:=? ")
        var text = String((0..<Int(1 + random.next() % 70)).map { _ in characters[Int(random.next() % UInt64(characters.count))] })
        if text.hasSuffix(" ") { text = text.dropLast() + "x" }
        return text
    }

    /// Whether `needle` occurs in `text`, byte for byte.
    static func occurs(_ needle: String, in text: String) -> Bool {
        Array(text.utf8).firstRange(of: Array(needle.utf8)) != nil
    }

    /// Short text from pieces that stress the encoding: quotes, CR, LF, CRLF, `;`, `=`, `%`,
    /// non-ASCII, dashes, and `extra`.
    static func randomText(using random: inout SplitMix64, extra: [String]) -> String {
        let pieces = ["a", "Z", "0", " ", "\"", "\r", "\n", "\r\n", ";", "=", "%", "-", "--", "é", "日本", "👩‍💻", "\\"] + extra
        return (0..<Int(random.next() % 8)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
    }
}

extension Data {
    fileprivate static func += (data: inout Data, text: String) { data.append(contentsOf: Array(text.utf8)) }
}
