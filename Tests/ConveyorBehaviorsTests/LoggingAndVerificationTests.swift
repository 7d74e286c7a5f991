@testable import ConveyorBehaviors
import ConveyorTesting
import Foundation
import Testing

extension CapturingLogSink {
    var messages: [String] { entries.map(\.message) }
}

@Suite struct LoggingBehaviorTests {
    let secrets = ["tok-SECRET", "cookie-SECRET", "pw-SECRET", "key-SECRET", "apikey-SECRET"]

    func client(_ mock: MockTransport, sink: CapturingLogSink, preview: Int = 0) -> NetworkClient {
        makeClient(mock) {
            AuthTokenBehavior(tokens: InMemoryTokenStore(token: "tok-SECRET"))
            HeadersBehavior(["Cookie": "s=cookie-SECRET", "X-API-Key": "key-SECRET"])
            RetryBehavior(.exponentialBackoff(jitter: .none))
            LoggingBehavior(sink: sink, bodyPreviewLimit: preview)
        }
    }

    @Test func writesOneLinePerAttemptAndOnePerOutcome() async {
        let mock = MockTransport()
        mock.enqueue(.status(503), .text(#"{"ok":true}"#))
        let sink = CapturingLogSink()
        _ = await outcome { try await client(mock, sink: sink).send(Request<Void>(path: "/movies", query: ["page": 2])) }
        let lines = sink.entries
        #expect(lines.map(\.level) == [.debug, .debug, .info])
        #expect(lines[0].message.contains("GET https://api.test/v1/movies?page=2 attempt 1"))
        #expect(lines[1].message.contains("attempt 2"))
        #expect(lines[2].message.contains("200 after 2 attempt(s), 11 bytes"))
    }

    @Test func failuresAreLoggedAsErrors() async {
        let mock = MockTransport()
        mock.enqueue(.status(404))
        let sink = CapturingLogSink()
        _ = await outcome { try await client(mock, sink: sink).send(Request<Void>(path: "/missing")) }
        #expect(sink.entries.last?.level == .error)
        #expect(sink.messages.last?.contains("failed after 1 attempt(s): Not found: 404") == true)
    }

    @Test func secretsAreRedactedEverywhere() async {
        let mock = MockTransport()
        mock.enqueue(.text(#"{"access_token":"tok-SECRET","name":"ann"}"#, headers: ["Content-Type": "application/json"]))
        let sink = CapturingLogSink()
        let request = Request<Void>(
            method: .post, path: "/login", query: ["api_key": "apikey-SECRET", "page": 1],
            body: .form(["user": "ann", "password": "pw-SECRET"]))
        _ = await outcome { try await client(mock, sink: sink, preview: 500).send(request) }
        let text = sink.messages.joined(separator: "\n")
        for secret in secrets { #expect(!text.contains(secret), "leaked \(secret): \(text)") }
        #expect(text.contains("Authorization: ***") && text.contains("Cookie: ***") && text.contains("X-API-Key: ***"))
        #expect(text.contains("api_key=***&page=1"))
        #expect(text.contains("user=ann&password=***"))
        #expect(text.contains(#""access_token":"***""#) && text.contains(#""name":"ann""#))
    }

    /// A form body is recognized whatever the case of its content type, and a custom auth header
    /// is a credential like `Authorization`.
    @Test func formBodiesInAnyCaseAndCustomAuthHeadersAreRedacted() async {
        let mock = MockTransport()
        mock.enqueue(.status(204))
        let sink = CapturingLogSink()
        let client = makeClient(mock) {
            AuthTokenBehavior(tokens: InMemoryTokenStore(token: "tok-SECRET"), header: .custom("X-Session-Ticket"))
            LoggingBehavior(sink: sink, bodyPreviewLimit: 500)
        }
        let request = Request<Void>(
            method: .post, path: "/login", headers: ["Content-Type": "Application/X-WWW-Form-URLEncoded; charset=UTF-8"],
            body: .data(Data("user=ann&password=pw-SECRET".utf8), contentType: "ignored"))
        _ = await outcome { try await client.send(request) }
        let text = sink.messages.joined(separator: "\n")
        #expect(text.contains("user=ann&password=***"), "\(text)")
        #expect(text.contains("X-Session-Ticket: ***"))
        #expect(!text.contains("SECRET"))
    }

    @Test func aDisabledSinkGetsNothing() async {
        let mock = MockTransport()
        mock.enqueue(.status(200))
        let sink = CapturingLogSink(levels: [])
        _ = await outcome { try await client(mock, sink: sink).send(Request<Void>(path: "/x")) }
        #expect(sink.messages.isEmpty)
    }

    @Test func bodyPreviewsAreCapped() async {
        let mock = MockTransport()
        mock.enqueue(.text(String(repeating: "x", count: 1000)))
        let sink = CapturingLogSink()
        _ = await outcome { try await client(mock, sink: sink, preview: 16).send(Request<Void>(path: "/big")) }
        #expect(sink.messages.last?.hasSuffix("body: " + String(repeating: "x", count: 16) + "…") == true)
    }

    @Test func curlRenderingIsRedactedAndShellQuoted() {
        let request = HTTPRequest(
            method: .post, url: URL(string: "https://api.test/login?token=tok-SECRET&q=it's")!,
            headers: ["Authorization": "Bearer tok-SECRET", "Content-Type": "application/x-www-form-urlencoded"],
            body: Data("user=o'neil&password=pw-SECRET".utf8))
        #expect(
            request.curlCommand()
                == #"curl -X 'POST' 'https://api.test/login?token=***&q=it'\''s' -H 'Authorization: ***' "#
                + #"-H 'Content-Type: application/x-www-form-urlencoded' --data-binary 'user=o'\''neil&password=***'"#)
    }
}

@Suite struct IdempotencyKeyBehaviorTests {
    @Test func onlyConfiguredMethodsGetAKeyAndEachRequestItsOwn() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = makeClient(mock) { IdempotencyKeyBehavior() }
        try await client.send(Request<Void>(method: .post, path: "/x"))
        try await client.send(Request<Void>(method: .post, path: "/x"))
        try await client.send(Request<Void>(method: .get, path: "/x"))
        let keys = mock.requests.map { $0.headers["Idempotency-Key"] }
        #expect(keys[0] != nil && keys[1] != nil && keys[0] != keys[1])
        #expect(keys[2] == nil)
    }
}

@Suite struct ResponseVerificationBehaviorTests {
    func client(_ mock: MockTransport) -> NetworkClient {
        let counter = Locked(0)
        return makeClient(mock) { ResponseVerificationBehavior(makeNonce: { "n\(counter.withLock { $0 += 1; return $0 })" }) }
    }

    @Test func anEchoedNoncePasses() async {
        let mock = MockTransport()
        mock.enqueue(.handler { request in .status(200, headers: ["X-Request-Nonce": request.headers["X-Request-Nonce"] ?? ""]) })
        #expect(await outcome { try await client(mock).send(Request<Void>(path: "/x")) } == "success")
    }

    @Test func aCaptivePortalsPageFailsTheRequest() async {
        let mock = MockTransport()
        mock.enqueue(.text("<html>Sign in to Wi-Fi</html>"))
        let error: NetworkError?
        do throws(NetworkError) {
            try await client(mock).send(Request<Void>(path: "/x"))
            error = nil
        } catch let caught { error = caught }
        guard case .behaviorFailed? = error, error?.behavior == "ResponseVerificationBehavior", error?.hook == .validate, let underlying = error?.underlying else {
            Issue.record("unexpected \(String(describing: error))")
            return
        }
        #expect(underlying as? ResponseVerificationError == .nonceMismatch)
    }

    @Test func aStaleNonceFromAnEarlierAttemptFails() async {
        let mock = MockTransport()
        mock.enqueue(.status(200, headers: ["X-Request-Nonce": "n0"]))
        #expect(await outcome { try await client(mock).send(Request<Void>(path: "/x")) }
            == "ResponseVerificationBehavior failed in validate")
    }

    @Test func errorStatusesAreLeftToStatusHandling() async {
        let mock = MockTransport()
        mock.enqueue(.status(500))
        #expect(await outcome { try await client(mock).send(Request<Void>(path: "/x")) } == "status 500")
    }
}

@Suite struct LogMetadataTests {
    @Test func durationsAreMillisecondsWithThreeDecimalsAndHugeOnesDoNotTrap() {
        #expect(LoggingBehavior.milliseconds(.milliseconds(1_250)) == "1250.000")
        #expect(LoggingBehavior.milliseconds(.microseconds(41)) == "0.041")
        #expect(LoggingBehavior.milliseconds(.zero) == "0.000")
        #expect(LoggingBehavior.milliseconds(.seconds(Int64.max)) == "9223372036854775.807")
        #expect(LoggingBehavior.milliseconds(.seconds(Int64.max / 1_000_000)) == "9223372036854000.000")
        #expect(LoggingBehavior.milliseconds(.seconds(-5)) == "0.000")
    }

    @Test func everyEntryCarriesTheRequestsFactsAndAHugeClockJumpDoesNotTrap() async throws {
        let sink = CapturingLogSink()
        let clock = ManualClock()
        let mock = MockTransport(baseURL: URL(string: "https://api.test:8443")!)
        mock.enqueue(.handler { _ in
            clock.advance(by: .seconds(Int64.max))
            return .text("ok")
        })
        let client = NetworkClient(baseURL: URL(string: "https://api.test:8443")!, transport: mock) {
            LoggingBehavior(sink: sink, clock: clock)
        }
        _ = try await client.send(Request<String>(path: "/movies", query: ["page": "2"]))
        let entries = sink.entries
        #expect(entries.count == 2)
        for entry in entries {
            #expect(entry.metadata["http.request.method"] == "GET")
            #expect(entry.metadata["server.address"] == "api.test")
            #expect(entry.metadata["server.port"] == "8443")
            #expect(entry.metadata["url.full"] == "https://api.test:8443/movies?page=2")
            #expect(entry.metadata["conveyor.attempt"] == "1")
        }
        #expect(entries.first?.metadata["conveyor.duration_ms"] == "0.000")
        #expect(entries.last?.metadata["conveyor.duration_ms"] == "9223372036854775.807")
        #expect(entries.last?.metadata["http.response.status_code"] == "200")
    }
}
