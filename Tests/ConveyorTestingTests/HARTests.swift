import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// HAR record and replay: a session recorded against the local server replays offline with the
/// same outcomes and hook traces; what cannot be replayed says why.
@Suite struct HARTests {
    struct Movie: Decodable, Sendable { var id: Int; var title: String }
    struct Echo: Decodable, Sendable { var method: String; var path: String }
    struct Attempts: Decodable, Sendable { var attempts: Int }
    struct Count: Decodable, Sendable { var count: Int }

    static func temporaryFile(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("har-\(UUID().uuidString)-\(name).har")
    }

    /// A client as an app would make it: a token refreshed on 401, retries, a cache, and a spy.
    static func client(base: URL, transport: any HTTPTransport, recorder: HookRecorder) -> NetworkClient {
        let tokens = InMemoryTokenStore(token: "tok-3f9a-SECRET") { _ in "valid" }
        return NetworkClient(baseURL: base, transport: transport, configuration: .init(clock: ImmediateClock())) {
            RecordingBehavior("spy", recorder: recorder)
            AuthTokenBehavior(tokens: tokens, refresher: tokens)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
            CacheBehavior()
        }
    }

    /// The session: every outcome as text (secrets the server echoes are left out: a recording
    /// redacts them, by design).
    static func session(_ client: NetworkClient, name: String) async -> [String] {
        var outcomes: [String] = []
        func run(_ label: String, _ body: () async throws -> String) async {
            do {
                outcomes.append("\(label): \(try await body())")
            } catch let error as NetworkError {
                let detail = error.status.map(String.init) ?? error.underlying.map { "\($0)" } ?? ""
                outcomes.append("\(label) failed: \(error.name) \(detail)")
            } catch {
                outcomes.append("\(label) failed: \(error)")
            }
        }
        await run("movies") {
            let movies: [Movie] = try await client.get("/json/movies", query: ["page": 2])
            return movies.map(\.title).joined(separator: ",")
        }
        await run("auth") {
            let ok: [String: Bool] = try await client.get("/auth", query: ["token": "valid"])
            return "\(ok)"
        }
        await run("flaky") {
            let result: Attempts = try await client.get("/flaky/\(name)", query: ["failures": 1, "status": 503, "retryAfter": 0])
            return "\(result.attempts)"
        }
        await run("echo") {
            let echo = try await client.send(
                Request<Echo>(method: .post, path: "/echo", body: .json(["user": "ann", "password": "pw-SECRET-77"])))
            return "\(echo.method) \(echo.path)"
        }
        for round in 1...2 {
            await run("cache \(round)") {
                let count: Count = try await client.get("/cache/\(name)", query: ["cc": "public, max-age=60"])
                return "\(count.count)"
            }
        }
        await run("missing") {
            let _: [String: Int] = try await client.get("/status/404")
            return "?"
        }
        await run("text") { try await client.send(Request<String>(path: "/text")) }
        await run("bytes") {
            let bytes = try await client.send(Request<Data>(path: "/bytes", query: ["count": 300]))
            return "\(bytes.count) bytes, sum \(bytes.reduce(0) { $0 + Int($1) })"
        }
        return outcomes
    }

    @Test func aSessionRecordedAgainstTheServerReplaysOfflineWithTheSameOutcomesAndHooks() async throws {
        let file = Self.temporaryFile("session")
        defer { try? FileManager.default.removeItem(at: file) }
        let name = "har-\(UUID().uuidString.prefix(8))"
        let liveRecorder = HookRecorder()
        let server = try await LocalServer.start()
        let base = server.baseURL
        let har = HARRecorder(file: file)
        let live = await Self.session(
            Self.client(
                base: base,
                transport: HARRecordingTransport(wrapping: URLSessionTransport(configuration: .ephemeral), recorder: har),
                recorder: liveRecorder),
            name: name)
        await server.stopAndWait()
        #expect(har.lastWriteError == nil)
        #expect(live.contains("auth: [\"ok\": true]"))
        #expect(live.contains("flaky: 2"))
        #expect(live.contains("cache 2: 1"))  // the second from the cache: never recorded
        #expect(live.contains("missing failed: unacceptableStatus 404"))

        // Offline: the server is gone; the file answers.
        let replay = try HARReplayTransport(contentsOf: file)
        let replayRecorder = HookRecorder()
        let replayed = await Self.session(Self.client(base: base, transport: replay, recorder: replayRecorder), name: name)
        #expect(replayed == live)
        #expect(replayRecorder.trace == liveRecorder.trace)
        #expect(replayRecorder.events.map(\.attempt) == liveRecorder.events.map(\.attempt))
        #expect(replay.usedEntryCount == replay.entryCount)
        #expect(replay.entryCount == 10)  // 1 + 2 (401, 200) + 2 (503, 200) + 1 + 1 (the second from the cache) + 1 + 1 + 1

        // Nothing secret in the file: the expired and the refreshed token, the password.
        let text = String(decoding: try Data(contentsOf: file), as: UTF8.self)
        for secret in ["tok-3f9a-SECRET", "Bearer valid", "pw-SECRET-77"] {
            #expect(!text.contains(secret), "\(secret)")
        }
        #expect(text.contains(#"\"password\":\"***\""#))
        try Self.checkHAR12(try Data(contentsOf: file))
    }

    /// The fields HAR 1.2 requires, with the types it gives them (what devtools need to open it).
    static func checkHAR12(_ data: Data) throws {
        let root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let log = try #require(root["log"] as? [String: Any])
        #expect(log["version"] as? String == "1.2")
        let creator = try #require(log["creator"] as? [String: Any])
        #expect(creator["name"] is String && creator["version"] is String)
        let entries = try #require(log["entries"] as? [[String: Any]])
        #expect(!entries.isEmpty)
        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for entry in entries {
            #expect((entry["startedDateTime"] as? String).flatMap(iso.date(from:)) != nil)
            #expect(entry["time"] is NSNumber && entry["cache"] is [String: Any])
            let request = try #require(entry["request"] as? [String: Any])
            for key in ["method", "url", "httpVersion"] { #expect(request[key] is String, "request.\(key)") }
            for key in ["cookies", "headers", "queryString"] { #expect(request[key] is [Any], "request.\(key)") }
            for key in ["headersSize", "bodySize"] { #expect(request[key] is NSNumber, "request.\(key)") }
            let response = try #require(entry["response"] as? [String: Any])
            for key in ["statusText", "httpVersion", "redirectURL"] { #expect(response[key] is String, "response.\(key)") }
            for key in ["status", "headersSize", "bodySize"] { #expect(response[key] is NSNumber, "response.\(key)") }
            for key in ["cookies", "headers"] { #expect(response[key] is [Any], "response.\(key)") }
            let content = try #require(response["content"] as? [String: Any])
            #expect(content["size"] is NSNumber && content["mimeType"] is String)
            let timings = try #require(entry["timings"] as? [String: Any])
            for key in ["send", "wait", "receive"] {
                #expect(((timings[key] as? NSNumber)?.doubleValue ?? -1) >= 0, "timings.\(key)")
            }
        }
    }

    /// A recording made with a mock: one entry per reply.
    static func recording(_ replies: [(String, MockTransport.Reply)], maxBodySize: Int = 256 * 1024) async throws -> Data {
        let mock = MockTransport()
        for (_, reply) in replies { mock.enqueue(reply) }
        let har = HARRecorder(maxBodySize: maxBodySize)
        let client = NetworkClient(
            baseURL: URL(string: "https://api.example.com")!, transport: HARRecordingTransport(wrapping: mock, recorder: har))
        for (path, _) in replies { _ = try? await client.send(Request<Data>(path: path)) }
        return try har.data()
    }

    /// A long recording appends each exchange to the file in place (the same file, not a renamed
    /// copy: its inode stays), so N exchanges write each entry once instead of the archive N
    /// times; after every exchange the file is the whole archive. A file someone else changed,
    /// truncated or removed is written whole again.
    @Test func eachExchangeIsAppendedInPlaceAndAFileChangedElsewhereIsWrittenWhole() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/movies", reply: .rawJSON(#"{"id":1,"title":"Heat"}"#))
        let file = Self.temporaryFile("appended")
        defer { try? FileManager.default.removeItem(at: file) }
        let har = HARRecorder(file: file)
        let client = NetworkClient(
            baseURL: URL(string: "https://api.example.com")!, transport: HARRecordingTransport(wrapping: mock, recorder: har))
        func inode() throws -> Int? {
            (try FileManager.default.attributesOfItem(atPath: file.path)[.systemFileNumber] as? NSNumber)?.intValue
        }
        func expectWhole(_ note: String) throws {
            #expect(har.lastWriteError == nil, "\(note)")
            #expect(try Data(contentsOf: file) == (try har.data()), "\(note): the file is not the archive")
        }

        _ = try await client.send(Request<Data>(path: "/movies", query: ["page": 0]))
        try expectWhole("first exchange")
        let first = try #require(try inode())
        for page in 1..<30 {
            _ = try await client.send(Request<Data>(path: "/movies", query: ["page": page]))
            try expectWhole("exchange \(page + 1)")
            #expect(try inode() == first, "exchange \(page + 1) replaced the file instead of appending to it")
        }
        #expect(try HARReplayTransport(contentsOf: file).entryCount == 30)

        // Changed elsewhere: one byte more, one byte less, another ending, removed.
        let changes: [(String, (Data) -> Data?)] = [
            ("64 KiB appended", { $0 + Data(repeating: 0x20, count: 64 << 10) }),
            ("the last byte cut", { $0.dropLast() }),
            ("the ending replaced", { $0.dropLast(3) + Data("x}}".utf8) }),
            ("removed", { _ in nil }),
        ]
        for (change, edit) in changes {
            if let edited = edit(try Data(contentsOf: file)) {
                try edited.write(to: file)
            } else {
                try FileManager.default.removeItem(at: file)
            }
            _ = try await client.send(Request<Data>(path: "/movies", query: ["after": change]))
            try expectWhole("after the file was changed: \(change)")
            let appended = try #require(try inode())
            _ = try await client.send(Request<Data>(path: "/movies", query: ["then": change]))
            try expectWhole("the exchange after the rewrite (\(change))")
            #expect(try inode() == appended, "\(change): the exchange after the rewrite was not appended")
        }
        #expect(har.entryCount == 30 + 2 * changes.count)
        #expect(try HARReplayTransport(contentsOf: file).entryCount == 30 + 2 * changes.count)
    }

    /// Each entry is encoded once and the archive assembled from them: the bytes equal encoding
    /// the archive whole (entries with empty lists, query items, JSON, form and binary bodies, a
    /// cut body, a failure); and with exchanges recorded concurrently, the file written last
    /// holds every one of them (writes are serialized, each of everything recorded before it).
    @Test func theArchiveIsAssembledAsEncodedWholeAndTheLastWriteHoldsEveryExchange() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/fail", reply: .failure(NetworkError.timedOut))
        mock.stub(.get, "/binary", reply: .response(status: 200, headers: ["Content-Type": "application/octet-stream"], body: Data([0xFF, 0x00, 0xFE])))
        mock.stub(.get, "/long", reply: .text(String(repeating: "long body/", count: 20)))
        mock.stub(.post, "/form", reply: .status(204))
        mock.stub(.get, "/movies", reply: .rawJSON(#"{"id":1,"title":"a/b \"quoted\"\nline"}"#))
        let requests: [Request<Data>] = [
            Request(path: "/movies", query: ["page": 2, "q": "a b"]), Request(path: "/fail"), Request(path: "/binary"),
            Request(path: "/long"), Request(method: .post, path: "/form", body: .form(["name": "ann", "password": "hunter2"])),
        ]
        // Which write finishes last is up to the scheduler: several bursts, each on a recorder
        // of its own, so that unserialized writes would be caught.
        for burst in 0..<40 {
            let file = Self.temporaryFile("assembled-\(burst)")
            defer { try? FileManager.default.removeItem(at: file) }
            let har = HARRecorder(file: file, maxBodySize: 64)
            let client = NetworkClient(
                baseURL: URL(string: "https://api.example.com")!, transport: HARRecordingTransport(wrapping: mock, recorder: har))
            let copies = 4
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<copies {
                    for request in requests { group.addTask { _ = try? await client.send(request) } }
                }
            }
            let written = try Data(contentsOf: file)
            #expect(har.lastWriteError == nil)
            #expect(har.entryCount == copies * requests.count)
            #expect(written == (try har.data()), "burst \(burst): the file is not the archive of every exchange")
            #expect(try HARRecorder.encodedWhole(written) == written)
            #expect(try har.dataEncodedWhole() == written)  // the fallback for another encoder layout
            let replay = try HARReplayTransport(data: written, mode: .lenient)
            #expect(replay.entryCount == copies * requests.count)
            #expect(!String(decoding: written, as: UTF8.self).contains("hunter2"))
        }
        // No entries: the archive's own encoding.
        let empty = HARRecorder()
        #expect(try HARRecorder.encodedWhole(try empty.data()) == (try empty.data()))
    }

    @Test func anUnmatchedRequestSaysWhichEntriesCameClosestAndWhy() async throws {
        let data = try await Self.recording([("/movies?page=2", .text("two")), ("/shows", .text("shows"))])
        let client = NetworkClient(
            baseURL: URL(string: "https://api.example.com")!, transport: try HARReplayTransport(data: data))
        do {
            _ = try await client.send(Request<Data>(path: "/movies", query: ["page": 3]))
            Issue.record("an unrecorded request was answered")
        } catch {
            let unmatched = try #require(error.underlying as? HARReplayTransport.Unmatched)
            #expect(unmatched.request == "GET https://api.example.com/movies?page=3")
            #expect(unmatched.closest.first == "#1 GET https://api.example.com/movies?page=2: query differs (the request has page=3) (the entry has page=2)")
            #expect(unmatched.closest.dropFirst().first?.contains("URL https://api.example.com/shows, not https://api.example.com/movies") == true)
            #expect(error.description.contains("no recorded entry (of 2, strict) matches GET https://api.example.com/movies?page=3"))
        }
    }

    @Test func strictReplaysInOrderOnceAndLenientInAnyOrderAgain() async throws {
        let data = try await Self.recording([("/a?x=1&y=2", .text("A")), ("/b", .text("B"))])
        let base = URL(string: "https://api.example.com")!
        let strict = NetworkClient(baseURL: base, transport: try HARReplayTransport(data: data))
        await #expect(throws: NetworkError.self) { try await strict.send(Request<String>(path: "/b")) }
        #expect(try await strict.send(Request<String>(path: "/a?y=2&x=1")) == "A")  // query order does not matter
        #expect(try await strict.send(Request<String>(path: "/b")) == "B")
        do {
            _ = try await strict.send(Request<String>(path: "/b"))
            Issue.record("a strict replay answered an entry twice")
        } catch {
            #expect(error.description.contains("matches, but it is not next (already used)"))
        }

        let lenient = NetworkClient(baseURL: base, transport: try HARReplayTransport(data: data, mode: .lenient))
        #expect(try await lenient.send(Request<String>(path: "/b")) == "B")
        #expect(try await lenient.send(Request<String>(path: "/a?x=1&y=2")) == "A")
        #expect(try await lenient.send(Request<String>(path: "/b")) == "B")
    }

    @Test func requestBodiesMatchAfterRedactionAndDifferencesAreNamed() async throws {
        let mock = MockTransport()
        mock.enqueue(.json(["ok": true]))
        let har = HARRecorder()
        let base = URL(string: "https://api.example.com")!
        let recording = NetworkClient(baseURL: base, transport: HARRecordingTransport(wrapping: mock, recorder: har))
        _ = try await recording.send(
            Request<Data>(method: .post, path: "/login", body: .json(["user": "ann", "password": "pw-SECRET-1"])))
        let data = try har.data()
        #expect(!String(decoding: data, as: UTF8.self).contains("pw-SECRET-1"))
        // Another password matches (both are ***); another user does not.
        let replay = NetworkClient(baseURL: base, transport: try HARReplayTransport(data: data, mode: .lenient))
        _ = try await replay.send(
            Request<Data>(method: .post, path: "/login", body: .json(["user": "ann", "password": "other-password"])))
        do {
            _ = try await replay.send(
                Request<Data>(method: .post, path: "/login", body: .json(["user": "bob", "password": "x"])))
            Issue.record("a different body matched")
        } catch {
            #expect(error.description.contains("body differs from character"))
        }
    }

    @Test func bodiesOverTheLimitAreCutWithANoteAndBinaryBodiesAreBase64() async throws {
        let long = String(repeating: "abcdefghij", count: 100)
        let binary = Data((0..<200).map { UInt8($0) } + [0xFF, 0xFE])
        let data = try await Self.recording(
            [("/long", .text(long)), ("/binary", .response(status: 200, headers: [:], body: binary)),
             ("/big-binary", .response(status: 200, headers: [:], body: Data(repeating: 0xFF, count: 500)))],
            maxBodySize: 300)
        let archive = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let entries = try #require((archive?["log"] as? [String: Any])?["entries"] as? [[String: Any]])
        let contents = entries.compactMap { ($0["response"] as? [String: Any])?["content"] as? [String: Any] }
        #expect(contents.count == 3)
        #expect(contents[0]["comment"] as? String == "cut: the first 300 of 1000 bytes")
        // Exactly the bytes that were read: before, a `…` the server never sent was appended.
        #expect(contents[0]["text"] as? String == String(long.prefix(300)))
        #expect(contents[0]["size"] as? Int == 1000)
        #expect(contents[1]["encoding"] as? String == "base64")
        #expect(contents[1]["text"] as? String == binary.base64EncodedString())
        #expect(contents[2]["encoding"] as? String == "base64")
        #expect(contents[2]["text"] as? String == Data(repeating: 0xFF, count: 300).base64EncodedString())
        #expect(contents[2]["comment"] as? String == "cut: the first 300 of 500 bytes")
        // Replayed, each body is the bytes recorded and nothing else.
        let replay = NetworkClient(
            baseURL: URL(string: "https://api.example.com")!, transport: try HARReplayTransport(data: data, mode: .lenient))
        #expect(try await replay.send(Request<Data>(path: "/binary")) == binary)
        #expect(try await replay.send(Request<Data>(path: "/long")) == Data(long.prefix(300).utf8))
        #expect(try await replay.send(Request<Data>(path: "/big-binary")) == Data(repeating: 0xFF, count: 300))
    }

    /// Zero bytes are valid UTF-8, and were written as JSON text: six bytes (`\u0000`) per byte, a
    /// 1 MiB cap made a 6.29 MB file. Bytes with control characters are base64 now.
    @Test func zeroBytesAreBase64NotEscapedText() async throws {
        let zeros = Data(count: 64 * 1024)
        let data = try await Self.recording(
            [("/zeros", .response(status: 200, headers: ["Content-Type": "application/octet-stream"], body: zeros))],
            maxBodySize: 1 << 20)
        #expect(data.count < zeros.count * 4 / 3 + 4096)
        let replay = NetworkClient(
            baseURL: URL(string: "https://api.example.com")!, transport: try HARReplayTransport(data: data, mode: .lenient))
        #expect(try await replay.send(Request<Data>(path: "/zeros")) == zeros)
    }

    @Test func anExchangeRecordedAsFailedReplaysAsTheSameKindOfFailure() async throws {
        let har = HARRecorder()
        // Port 1 on 127.0.0.1: nothing listens, the connection is refused.
        let base = URL(string: "http://127.0.0.1:1")!
        let live = NetworkClient(
            baseURL: base, transport: HARRecordingTransport(wrapping: URLSessionTransport(configuration: .ephemeral), recorder: har))
        var liveError: NetworkError?
        do { _ = try await live.send(Request<Data>(path: "/x")) } catch { liveError = error }
        #expect(liveError?.name == "connectionFailed")
        let replay = NetworkClient(baseURL: base, transport: try HARReplayTransport(data: try har.data()))
        do {
            _ = try await replay.send(Request<Data>(path: "/x"))
            Issue.record("a failed exchange replayed as a success")
        } catch {
            #expect(error.name == liveError?.name)
        }
    }

    @Test func theModeComesFromOneEnvironmentVariable() throws {
        #expect(try HARMode(environmentVariable: "APP_HAR", environment: [:]) == .live)
        #expect(try HARMode(environmentVariable: "APP_HAR", environment: ["APP_HAR": ""]) == .live)
        #expect(
            try HARMode(environmentVariable: "APP_HAR", environment: ["APP_HAR": "record:/tmp/a.har"])
                == .record(URL(fileURLWithPath: "/tmp/a.har")))
        #expect(
            try HARMode(environmentVariable: "APP_HAR", environment: ["APP_HAR": "replay:/tmp/a.har"])
                == .replay(URL(fileURLWithPath: "/tmp/a.har"), .strict))
        #expect(
            try HARMode(environmentVariable: "APP_HAR", environment: ["APP_HAR": "replay-lenient:/tmp/a.har"])
                == .replay(URL(fileURLWithPath: "/tmp/a.har"), .lenient))
        for wrong in ["replay", "record:", "play:/tmp/a.har", "/tmp/a.har"] {
            #expect(throws: HARFileError.self) { try HARMode(environmentVariable: "APP_HAR", environment: ["APP_HAR": wrong]) }
        }
        #expect(throws: HARFileError.self) {
            try HARMode.replay(URL(fileURLWithPath: "/nonexistent/a.har"), .strict).transport(wrapping: MockTransport())
        }
    }

    @Test func theBehaviorRecordsAttemptsWhereItSits() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(503, headers: ["Retry-After": "0"]))
        mock.enqueue(.json(["ok": true]))
        let har = HARRecorder()
        let client = NetworkClient(
            baseURL: URL(string: "https://api.example.com")!, transport: mock, configuration: .init(clock: ImmediateClock())
        ) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
            AuthTokenBehavior(tokens: InMemoryTokenStore(token: "tok-3f9a-SECRET"))
            HARRecordingBehavior(recorder: har)
        }
        _ = try await client.send(Request<Data>(path: "/items"))
        #expect(har.entryCount == 2)
        let text = String(decoding: try har.data(), as: UTF8.self)
        #expect(!text.contains("tok-3f9a-SECRET"))
        #expect(text.contains("\"name\" : \"Authorization\""))
        #expect(text.contains("\"status\" : 503"))
    }
}
