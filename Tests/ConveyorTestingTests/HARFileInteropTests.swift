import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// HAR files are outside bytes: replay reads what other tools write (every optional field of
/// HAR 1.2 optional), any number of recorders in one process share one file, and no file can end
/// the process.
@Suite struct HARFileInteropTests {
    static func fixture(_ name: String) throws -> Data {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures").appendingPathComponent(name)
        return try Data(contentsOf: url)
    }

    /// Exports in the shapes Firefox, Chrome and Charles write (see Fixtures/README.md): no `ssl`
    /// (Firefox: refused before with `missing key 'ssl' at 'log.entries.0.timings'`), `postData`
    /// with `params` and no `text`, content without `text`, fractional sizes and times, extra
    /// fields of their own.
    @Test(arguments: ["firefox-export.har", "chrome-export.har", "charles-export.har"])
    func replaysAnExportOfAnotherTool(file: String) async throws {
        let replay = try HARReplayTransport(data: try Self.fixture(file), mode: .lenient)
        #expect(replay.entryCount == 3)
        let client = NetworkClient(baseURL: URL(string: "https://httpbin.example")!, transport: replay)
        struct Slide: Decodable { let title: String }
        let slide: Slide = try await client.send(Request(path: "/json"))
        #expect(slide.title == "Sample Slide Show")
        let form = try await client.send(
            Request<Data>(method: .post, path: "/post", body: .form(["custname": "ann", "size": "medium"])))
        #expect(String(decoding: form, as: UTF8.self).contains("\"custname\""))
        let empty = try await client.send(Request<Data>(path: "/status/204"))
        #expect(empty.isEmpty)
    }

    /// Two clients recording to one file, each through `HARMode` (an auth client and an API
    /// client). Before: 6 exchanges, 3 entries in the file, nothing reported.
    @Test func recordersInOneProcessShareAFileWithoutLoss() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("har-\(UUID().uuidString)-shared.har")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("{\"log\":{\"entries\":[]}}".utf8).write(to: file)  // a previous run's file: started over
        let environment = ["APP_HAR": "record:" + file.path]
        let authMock = MockTransport()
        authMock.stub(.post, "/token", reply: .rawJSON(#"{"ok":true}"#))
        let apiMock = MockTransport()
        apiMock.stub(.get, "/me", reply: .rawJSON(#"{"id":1}"#))
        let auth = NetworkClient(
            baseURL: URL(string: "https://auth.example")!,
            transport: try HARMode(environmentVariable: "APP_HAR", environment: environment).transport(wrapping: authMock))
        let api = NetworkClient(
            baseURL: URL(string: "https://api.example")!,
            transport: try HARMode(environmentVariable: "APP_HAR", environment: environment).transport(wrapping: apiMock))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<20 {
                group.addTask {
                    if index % 2 == 0 {
                        _ = try await auth.send(Request<Data>(method: .post, path: "/token"))
                    } else {
                        _ = try await api.send(Request<Data>(path: "/me"))
                    }
                }
            }
            try await group.waitForAll()
        }
        let replay = try HARReplayTransport(contentsOf: file, mode: .lenient)
        #expect(replay.entryCount == 20)
        let recorded = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any]
        let urls = ((recorded?["log"] as? [String: Any])?["entries"] as? [[String: Any]] ?? [])
            .compactMap { ($0["request"] as? [String: Any])?["url"] as? String }
        #expect(urls.filter { $0.hasPrefix("https://auth.example") }.count == 10)
        #expect(urls.filter { $0.hasPrefix("https://api.example") }.count == 10)
    }

    /// The guide's setup end to end: an auth client and an API client, each given its transport
    /// by `HARMode`, record one file; `replay:` (strict) then answers all of it, in order. Before:
    /// each client had a replay of its own, strict over the whole file, and answered 1 of 6 (the
    /// other client's entry was always next). Strict order is kept per origin, and the clients
    /// of a file share one replay, so two clients of one origin replay too.
    @Test(arguments: [("https://auth.example", "https://api.example"), ("https://api.example/oauth", "https://api.example")])
    func twoClientsRecordedThroughHARModeReplayStrictlyInOrder(authBase: String, apiBase: String) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("har-\(UUID().uuidString)-two.har")
        defer { try? FileManager.default.removeItem(at: file) }
        let authMock = MockTransport()
        authMock.enqueue(.rawJSON(#"{"grant":1}"#), .rawJSON(#"{"grant":2}"#))
        let apiMock = MockTransport()
        apiMock.enqueue(.rawJSON(#"{"id":1}"#), .rawJSON(#"{"orders":1}"#), .rawJSON(#"{"orders":2}"#), .rawJSON(#"{"paid":true}"#))
        /// The session: six exchanges, the two clients taking turns.
        typealias Step = (client: Int, request: Request<Data>, answer: String)
        let steps: [Step] = [
            (0, Request(method: .post, path: "/token"), #"{"grant":1}"#),
            (1, Request(path: "/me"), #"{"id":1}"#),
            (1, Request(path: "/orders", query: ["page": "1"]), #"{"orders":1}"#),
            (0, Request(method: .post, path: "/token"), #"{"grant":2}"#),
            (1, Request(path: "/orders", query: ["page": "2"]), #"{"orders":2}"#),
            (1, Request(method: .post, path: "/checkout", body: .json(["cart": 7])), #"{"paid":true}"#),
        ]
        func clients(_ value: String, auth: any HTTPTransport, api: any HTTPTransport) throws -> [NetworkClient] {
            let environment = ["APP_HAR": value]
            return [
                NetworkClient(
                    baseURL: URL(string: authBase)!,
                    transport: try HARMode(environmentVariable: "APP_HAR", environment: environment).transport(wrapping: auth)),
                NetworkClient(
                    baseURL: URL(string: apiBase)!,
                    transport: try HARMode(environmentVariable: "APP_HAR", environment: environment).transport(wrapping: api)),
            ]
        }
        let recording = try clients("record:" + file.path, auth: authMock, api: apiMock)
        for step in steps {
            #expect(String(decoding: try await recording[step.client].send(step.request), as: UTF8.self) == step.answer)
        }
        #expect(try HARReplayTransport(contentsOf: file).entryCount == 6)

        // Replay: nothing reaches a network (the live transports have nothing to answer with).
        let offline = MockTransport()
        let replaying = try clients("replay:" + file.path, auth: offline, api: offline)
        // Out of order within an origin: a typed error naming the entry that is next, and no
        // entry used up by it.
        do {
            _ = try await replaying[1].send(Request<Data>(path: "/orders", query: ["page": "1"]))
            Issue.record("a strict replay answered /orders before /me")
        } catch {
            let unmatched = try #require(error.underlying as? HARReplayTransport.Unmatched)
            #expect(unmatched.mode == .strict)
            // The next entry of the request's origin comes first: the API's `/me`, or with one
            // origin for both clients, the auth client's token request.
            let next =
                authBase.hasPrefix(apiBase)
                ? "#1 POST https://api.example/oauth/token: method POST, not GET; URL https://api.example/oauth/token, not https://api.example/orders; query differs (the request has page=1)"
                : "#2 GET https://api.example/me: URL https://api.example/me, not https://api.example/orders; query differs (the request has page=1)"
            #expect(unmatched.closest.first == next)
        }
        var answered = 0
        for step in steps {
            #expect(String(decoding: try await replaying[step.client].send(step.request), as: UTF8.self) == step.answer)
            answered += 1
        }
        #expect(answered == 6)
        #expect(offline.requests.isEmpty)
        // Each entry answers once: a seventh request is not answered again.
        await #expect(throws: NetworkError.self) { try await replaying[1].send(steps[1].request) }
        // A client made later in the process (an app that makes its clients again) joins the same
        // replay rather than starting it over.
        let later = try clients("replay:" + file.path, auth: offline, api: offline)
        await #expect(throws: NetworkError.self) { try await later[1].send(steps[1].request) }
    }

    /// Strict order per origin: two origins' requests may interleave in any order (two clients
    /// running at once), each origin's in the recorded order; one replay, shared by both.
    @Test func strictReplayKeepsTheOrderOfEachOriginWhateverTheInterleaving() async throws {
        let mock = MockTransport()
        for index in 0..<8 { mock.enqueue(.text("answer \(index)")) }
        let recorder = HARRecorder()
        let recording = HARRecordingTransport(wrapping: mock, recorder: recorder)
        let auth = URL(string: "https://auth.example")!
        let api = URL(string: "https://api.example")!
        for index in 0..<4 {
            _ = try await recording.send(HTTPRequest(method: .post, url: auth.appendingPathComponent("token/\(index)")))
            _ = try await recording.send(HTTPRequest(url: api.appendingPathComponent("item/\(index)")))
        }
        let replay = try HARReplayTransport(data: try recorder.data())
        // Every API request first, then every auth one: each origin in order, all answered.
        var answers: [String] = []
        for index in 0..<4 {
            let response = try await replay.send(HTTPRequest(url: api.appendingPathComponent("item/\(index)")))
            answers.append(String(decoding: response.body, as: UTF8.self))
        }
        for index in 0..<4 {
            let response = try await replay.send(HTTPRequest(method: .post, url: auth.appendingPathComponent("token/\(index)")))
            answers.append(String(decoding: response.body, as: UTF8.self))
        }
        #expect(answers == ["answer 1", "answer 3", "answer 5", "answer 7", "answer 0", "answer 2", "answer 4", "answer 6"])
        #expect(replay.usedEntryCount == 8)

        // Within an origin the order holds: the second item before the first fails.
        let again = try HARReplayTransport(data: try recorder.data())
        #expect(throws: HARReplayTransport.Unmatched.self) {
            _ = try again.answer(HTTPRequest(url: api.appendingPathComponent("item/1")))
        }
        #expect(again.usedEntryCount == 0)
    }

    /// A negative `_conveyorBodyLimit` loaded, then trapped the process on the first request with
    /// a body (`Can't take a prefix of negative length`). Numbers from a file are clamped.
    @Test func hostileNumbersInAFileAreClamped() async throws {
        for limit in ["-5", "-1e300", "1e300", "0", "2.5"] {
            let har = """
                {"log":{"_conveyorBodyLimit":\(limit),"entries":[{"request":{"method":"POST","url":"https://a.example/p",
                "postData":{"mimeType":"text/plain","text":"hi"}},"response":{"status":200.0,"content":{"size":-3,"text":"ok"}}}]}}
                """
            let client = NetworkClient(
                baseURL: URL(string: "https://a.example")!,
                transport: try HARReplayTransport(data: Data(har.utf8), mode: .lenient))
            _ = try? await client.send(Request<Data>(method: .post, path: "/p", body: .data(Data("hi".utf8), contentType: "text/plain")))
        }
    }
}

/// Secrets a HAR file used to keep: a token in a redirect's fragment (the header and
/// `redirectURL`), in any response header that carries a URL, a base64 echo of the whole
/// `Authorization` value, and a Basic credential's password echoed decoded.
@Suite struct HARSecretTests {
    @Test func noSecretSurvivesInAURLHeaderOrAnEcho() async throws {
        let minted = "mint3d-T0KEN-9931"
        let bearer = "Bearer brr-7720-SECRET"
        let password = "pa55word-SECRET-44"
        let basic = "Basic " + Data("ann:\(password)".utf8).base64EncodedString()
        let mock = MockTransport()
        mock.enqueue(
            .response(
                status: 302,
                headers: [
                    "Location": "app:/cb#access_token=\(minted)&state=s1",
                    "Content-Location": "/x?token=\(minted)",
                    "Link": "<https://api.example/p?page=2&access_token=\(minted)>; rel=\"next\"",
                    "Refresh": "0; url=/?session_id=\(minted)",
                    "X-Where": "https://ann:\(minted)@api.example/home",
                ], body: Data()))
        let echo = Data(bearer.utf8).base64EncodedString() + " " + Data("brr-7720-SECRET".utf8).base64EncodedString()
        mock.enqueue(.response(status: 200, headers: ["Content-Type": "text/plain"], body: Data(echo.utf8)))
        mock.enqueue(.response(status: 200, headers: ["Content-Type": "text/plain"], body: Data("you are ann, \(password)".utf8)))
        let har = HARRecorder()
        let client = NetworkClient(
            baseURL: URL(string: "https://api.example")!, transport: HARRecordingTransport(wrapping: mock, recorder: har),
            configuration: .init(acceptableStatusCodes: Set(200..<400)))
        _ = try await client.send(Request<Data>(path: "/login"))
        _ = try await client.send(Request<Data>(path: "/debug", headers: ["Authorization": bearer]))
        _ = try await client.send(Request<Data>(path: "/me", headers: ["Authorization": basic]))
        let text = String(decoding: try har.data(), as: UTF8.self)
        for secret in [minted, "brr-7720-SECRET", password, Data(bearer.utf8).base64EncodedString()] {
            #expect(!text.contains(secret), "\(secret) is in the HAR file")
        }
        #expect(text.contains("page=2") && text.contains("rel=\\\"next\\\"") && text.contains("state=s1"))
    }
}
