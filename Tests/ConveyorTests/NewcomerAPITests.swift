import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Issue 13: what a newcomer trips on.
@Suite struct DecodingRuleTests {
    struct Movie: Codable, Equatable, Sendable { var id: Int }
    let api = URL(string: "https://api.test/v1")!

    /// Every entry point turns the same body into the same output, for every output kind.
    @Test func everyEntryPointFollowsTheSameRule() async throws {
        enum API: Endpoint { case name; var path: String { "/name" } }
        let mock = MockTransport()
        mock.stub(.get, "/v1/name", reply: .text("hello"))
        mock.stub(.get, "/v1/movie", reply: .json(Movie(id: 7)))
        let client = NetworkClient(baseURL: api, transport: mock)

        let viaGet: String = try await client.get("/name")
        let viaRequest = try await client.send(Request<String>(path: "/name"))
        let viaEndpoint = try await client.send(API.name, as: String.self)
        #expect([viaGet, viaRequest, viaEndpoint] == ["hello", "hello", "hello"])

        let dataViaGet: Data = try await client.get("/name")
        let dataViaRequest = try await client.send(Request<Data>(path: "/name"))
        let dataViaEndpoint = try await client.send(API.name, as: Data.self)
        #expect(Set([dataViaGet, dataViaRequest, dataViaEndpoint]) == [Data("hello".utf8)])

        let movie: Movie = try await client.get("/movie")
        #expect(movie == Movie(id: 7))
    }

    @Test func invalidUTF8IsADecodingFailureEverywhere() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/v1/bad", reply: .response(status: 200, headers: [:], body: Data([0xFF, 0xFE])))
        let client = NetworkClient(baseURL: api, transport: mock)
        await #expect {
            let _: String = try await client.get("/bad")
        } throws: { error in
            guard case NetworkError.decodingFailed = error else { return false }
            return true
        }
    }
}

@Suite struct NetworkErrorEqualityTests {
    let request = HTTPRequest(method: .get, url: URL(string: "https://api.test/x")!)

    @Test func casesWithAResponseCompareByStatus() {
        let a = HTTPResponse(status: 404, headers: ["A": "1"], body: Data("a".utf8), request: request)
        let b = HTTPResponse(status: 404, headers: ["B": "2"], body: Data("b".utf8), request: request)
        let c = HTTPResponse(status: 500, request: request)
        #expect(NetworkError.unacceptableStatus(a) == .unacceptableStatus(b))
        #expect(NetworkError.unacceptableStatus(a) != .unacceptableStatus(c))
        #expect(NetworkError.unacceptableStatus(a) == .notFound)
        #expect(NetworkError.unacceptableStatus(c) == .status(500))
        #expect(NetworkError.unacceptableStatus(a) != .unacceptableStatus)  // the bare kind keeps no status
        #expect(NetworkError.unacceptableStatus(a) != .decodingFailed(a, underlying: URLError(.badURL)))
    }

    @Test func aKindsStaticMemberMatchesEveryErrorOfThatKind() {
        let e404 = NetworkError.unacceptableStatus(HTTPResponse(status: 404, request: request))
        let e503 = NetworkError.unacceptableStatus(HTTPResponse(status: 503, request: request))
        func kind(_ error: NetworkError) -> String {
            switch error {
            case .unauthorized: "401"
            case .notFound: "404"
            case .unacceptableStatus: "other status"
            case NetworkError.transportFailed(URLError(.badURL)): "bad URL"
            case .transportFailed: "transport"
            case .responseTooLarge(limit: 5): "five"
            case .timedOut, .offline: "retry banner"
            default: "other"
            }
        }
        #expect(kind(e404) == "404")
        #expect(kind(e503) == "other status")
        #expect(kind(.transportFailed(URLError(.badURL))) == "bad URL")
        #expect(kind(.transportFailed(URLError(.timedOut))) == "transport")
        #expect(kind(.responseTooLarge(limit: 5)) == "five")
        #expect(kind(.responseTooLarge(limit: 6)) == "other")
        #expect(kind(.offline) == "retry banner")
        #expect(kind(.notRetryable(after: .offline, reason: "r")) == "other")
        let optional: NetworkError? = e503
        if case .status(503) = optional {} else { Issue.record("an optional error should match its kind") }
        if case .notFound = optional { Issue.record("a 503 is not a 404") }
        if case .notFound = NetworkError?.none { Issue.record("nil matches nothing") }
    }

    @Test func decodingErrorsCompareByCaseAndPath() {
        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        let response = HTTPResponse(status: 200, request: request)
        let missingA = DecodingError.keyNotFound(Key(stringValue: "a"), .init(codingPath: [], debugDescription: ""))
        let missingB = DecodingError.keyNotFound(Key(stringValue: "b"), .init(codingPath: [], debugDescription: ""))
        let corrupted = DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "x"))
        #expect(NetworkError.decodingFailed(response, underlying: missingA) == .decodingFailed(response, underlying: missingA))
        #expect(NetworkError.decodingFailed(response, underlying: missingA) != .decodingFailed(response, underlying: missingB))
        #expect(NetworkError.decodingFailed(response, underlying: missingA) != .decodingFailed(response, underlying: corrupted))
    }

    @Test func underlyingErrorsCompareByTypeAndEquality() {
        struct Opaque: Error {}
        #expect(NetworkError.transportFailed(URLError(.badURL)) == .transportFailed(URLError(.badURL)))
        #expect(NetworkError.transportFailed(URLError(.badURL)) != .transportFailed(URLError(.timedOut)))
        #expect(NetworkError.transportFailed(Opaque()) == .transportFailed(Opaque()))
        #expect(NetworkError.transportFailed(CocoaError(.fileNoSuchFile)) != .transportFailed(CocoaError(.fileLocking)))
        #expect(NetworkError.transportFailed(Opaque()) != .transportFailed(URLError(.badURL)))
        #expect(
            NetworkError.behaviorFailed(behavior: "Auth", hook: .modify, underlying: Opaque())
                != .behaviorFailed(behavior: "Auth", hook: .validate, underlying: Opaque()))
    }

    @Test func payloadFreeCasesAndLimits() {
        #expect(NetworkError.offline == .offline)
        #expect(NetworkError.offline != .cancelled)
        #expect(NetworkError.responseTooLarge(limit: 1) != .responseTooLarge(limit: 2))
        #expect(NetworkError.invalidRequest("a") == .invalidRequest("a"))
    }

    @Test func expectThrowsCompiles() async {
        let mock = MockTransport()
        mock.enqueue(.failure(URLError(.notConnectedToInternet)))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock)
        await #expect(throws: NetworkError.offline) {
            try await client.send(Request<Void>(path: "/x"))
        }
    }
}

@Suite struct ResponseAndResultTests {
    @Test func theValueComesWithTheResponseAndTheAttemptCount() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(503), .json([1, 2], headers: ["Link": "<next>"]))
        let client = NetworkClient(
            baseURL: URL(string: "https://api.test")!, transport: mock, configuration: .init(clock: ImmediateClock())
        ) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 3))
        }
        let page = try await client.response(for: Request<[Int]>(path: "/numbers"))
        #expect(page.value == [1, 2])
        #expect(page.response.status == 200)
        #expect(page.response.headers["Link"] == "<next>")
        #expect(page.attempts == 2)
    }

    @Test func resultKeepsTheErrorTypeThroughATask() async {
        let mock = MockTransport()
        mock.enqueue(.failure(URLError(.notConnectedToInternet)))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock)
        let outcome = await Task { await client.result(for: Request<Void>(path: "/x")) }.value
        switch outcome {
        case .success: Issue.record("expected a failure")
        case .failure(let error): #expect(error == .offline)
        }
    }
}

@Suite struct SeparateClocksTests {
    /// With one clock for both, an immediate clock made every request with a timeout time out at
    /// once. Waits now skip; the safety timeout stays real.
    @Test func anImmediateWaitClockKeepsARealSafetyTimeout() async throws {
        let waits = ImmediateClock()
        let mock = MockTransport()
        mock.enqueue(.status(503, headers: ["Retry-After": "20"]), .json(["ok": true]))
        let client = NetworkClient(
            baseURL: URL(string: "https://api.test")!, transport: mock,
            // The timeout is real and far above the wait: under the sanitizer beside other suites,
            // 30 s of real time once went by before the retry, and its wait was cut to what was left.
            configuration: .init(timeout: .seconds(hangBound), clock: waits)
        ) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 2))
        }
        let result: [String: Bool] = try await client.get("/flaky")
        #expect(result == ["ok": true])
        // The server's 20 s, spread up to a fifth above it by the default full jitter.
        #expect(waits.sleeps.count == 1 && waits.sleeps[0] >= .seconds(20) && waits.sleeps[0] <= .seconds(24))
    }

    @Test func aManualTimeoutClockDrivesTimeoutsOnly() async throws {
        let timeouts = ManualClock()
        let mock = MockTransport()
        mock.enqueue(.hang)
        let client = NetworkClient(
            baseURL: URL(string: "https://api.test")!, transport: mock,
            configuration: .init(timeout: .seconds(10), clock: ImmediateClock(), timeoutClock: timeouts))
        let task = Task { await client.result(for: Request<Void>(path: "/x")) }
        await timeouts.waitForSleepers(1)
        timeouts.advance(by: .seconds(10))
        let outcome = await task.value
        #expect(throws: NetworkError.timedOut) { try outcome.get() }
    }
}

@Suite struct NamesAndWrappersTests {
    struct Timed: WrappingRequestBehavior, HeaderAdding {
        let inner: any RequestBehavior
        var wrappedBehaviors: [any RequestBehavior] { [inner] }
        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            try await CombinedRequestBehavior([inner]).additionalHeaders(for: request, context: context)
        }
    }

    @Test func twoHeadersBehaviorsCanBeLeftOutSeparately() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/x", reply: .status(200))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock) {
            HeadersBehavior(["X-App": "1"], name: "app")
            HeadersBehavior(["X-Tenant": "t"], name: "tenant")
        }
        try await client.send(Request<Void>(path: "/x").excluding(.named("tenant")))
        try await client.send(Request<Void>(path: "/x").excluding(.named("app")))
        let sent = mock.requests.map { ($0.headers["X-App"], $0.headers["X-Tenant"]) }
        #expect(sent[0] == ("1", nil))
        #expect(sent[1] == (nil, "t"))
    }

    @Test func everyStandardBehaviorTakesAName() {
        let named: [any RequestBehavior] = [
            HeadersBehavior([:], name: "n"),
            AuthTokenBehavior(tokens: InMemoryTokenStore(token: "t"), name: "n"),
            ActivityCounterBehavior(counter: NetworkActivityCounter(), name: "n"),
            BackgroundTaskBehavior(runner: NoBackgroundTasks(), name: "n"),
            IdempotencyKeyBehavior(name: "n"),
            LoggingBehavior(sink: PrintLogSink(), name: "n"),
            RetryBehavior(name: "n"),
            ResponseVerificationBehavior(name: "n"),
        ]
        #expect(named.allSatisfy { $0.name == "n" })
        #expect(RetryBehavior().name == "RetryBehavior")
    }

    struct NoBackgroundTasks: BackgroundTaskRunner {
        func beginTask(named name: String, onExpiration: @escaping @Sendable () -> Void) async -> BackgroundTaskID? { nil }
        func endTask(_ id: BackgroundTaskID) async {}
    }

    @Test(arguments: [BehaviorExclusion.type(HeadersBehavior.self), .named("tenant")])
    func anExclusionReachesAWrappedBehavior(exclusion: BehaviorExclusion) async throws {
        let mock = MockTransport()
        mock.stub(nil, "/x", reply: .status(200))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock) {
            Timed(inner: Timed(inner: HeadersBehavior(["X-Tenant": "t"], name: "tenant")))
        }
        try await client.send(Request<Void>(path: "/x"))
        try await client.send(Request<Void>(path: "/x").excluding(exclusion))
        #expect(mock.requests.map { $0.headers["X-Tenant"] } == ["t", nil])
    }
}

@Suite struct QueryValueTests {
    enum Sort: String, QueryParameterValue, CustomStringConvertible {
        case newest
        var description: String { rawValue }
    }

    @Test func knownValuesAndYourOwnTypesRender() {
        let cursor: String? = nil
        let query: QueryParameters = ["page": 2, "tag": ["a", "b"], "after": cursor, "sort": Sort.newest, "on": true]
        #expect(query.encoded == "page=2&tag=a&tag=b&sort=newest&on=true")
    }
}

@Suite struct JSONLiteralBodyTests {
    struct Rating: Encodable, Sendable { var stars: Int }

    @Test func mixedValueLiteralsEncodeInOrder() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(200), .status(200), .status(200))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock)
        let tags = ["crime", "drama"]
        let note: String? = nil
        try await client.send(Request<Void>(method: .post, path: "/m", body: .json(["title": "Heat", "stars": 5])))
        try await client.send(
            Request<Void>(
                method: .post, path: "/m",
                body: .json([
                    "title": "Heat", "tags": tags, "note": note, "rating": Rating(stars: 5),
                    "meta": JSONObject(["year": 1995, "ok": true]),
                ])))
        try await client.send(Request<Void>(method: .post, path: "/m", body: .json(["stars": 5])))
        func object(_ text: String) -> NSDictionary? {
            (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? NSDictionary
        }
        let bodies = mock.requests.map { object($0.bodyText ?? "") }
        #expect(bodies[0] == object(#"{"title":"Heat","stars":5}"#))
        #expect(
            bodies[1]
                == object(
                    #"{"title":"Heat","tags":["crime","drama"],"note":null,"rating":{"stars":5},"meta":{"year":1995,"ok":true}}"#))
        #expect(bodies[2] == object(#"{"stars":5}"#))
        #expect(bodies.allSatisfy { $0 != nil })
        #expect(mock.requests.allSatisfy { $0.headers["Content-Type"] == "application/json" })
    }
}

@Suite struct MockTransportNewcomerTests {
    struct Movie: Codable, Equatable, Sendable { var id: Int; var title: String }
    let api = URL(string: "https://api.test/v1/")!

    @Test func stubsTakePathsAsCodeWritesThem() async throws {
        let mock = MockTransport(baseURL: api)
        mock.stub(.get, "/movies/1", reply: .rawJSON(#"{"id": 1, "title": "Alien"}"#))
        mock.stub(.get, "/v1/movies/2", reply: .json(Movie(id: 2, title: "Heat")))  // whole paths still match
        let client = NetworkClient(baseURL: api, transport: mock)
        let first: Movie = try await client.get("/movies/1")
        let second: Movie = try await client.get("/movies/2")
        #expect([first, second] == [Movie(id: 1, title: "Alien"), Movie(id: 2, title: "Heat")])
        #expect(mock.requests.first?.url.path == "/v1/movies/1")
    }

    @Test func withoutABaseURLOnlyWholePathsMatch() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/movies/1", reply: .status(200))
        let client = NetworkClient(baseURL: api, transport: mock)
        await #expect(throws: NetworkError.self) { try await client.send(Request<Void>(path: "/movies/1")) }
    }

    @Test func rawJSONRepliesAreJSON() async throws {
        let mock = MockTransport()
        mock.enqueue(.rawJSON(#"[1, 2, 3]"#, status: 201))
        let client = NetworkClient(baseURL: api, transport: mock)
        let page = try await client.response(for: Request<[Int]>(path: "/n"))
        #expect(page.value == [1, 2, 3])
        #expect(page.response.status == 201)
        #expect(page.response.headers["Content-Type"] == "application/json")
    }
}

@Suite struct SampledEndpointTests {
    enum MovieAPI: SampledEndpoint, CaseIterable {
        case popular, upcoming
        static let allCases: [MovieAPI] = [.popular, .upcoming]
        var path: String { self == .popular ? "/movies/popular" : "/movies/upcoming" }
        var sampleReply: MockTransport.Reply? {
            self == .popular ? .rawJSON(#"[{"id": 1, "title": "Alien"}]"#) : nil
        }
    }
    enum PagedAPI: SampledEndpoint {
        case page(Int)
        var path: String { "/movies" }
        var query: QueryParameters { if case .page(let n) = self { ["page": n] } else { [:] } }
        var sampleReply: MockTransport.Reply? { if case .page(let n) = self { .rawJSON("[\(n)]") } else { nil } }
    }
    struct Movie: Codable, Equatable, Sendable { var id: Int; var title: String }

    @Test func aTransportStubbedWithSamplesAnswersThroughEveryBehavior() async throws {
        let samples = MockTransport(baseURL: URL(string: "https://api.test/v1")!)
        samples.stubSamples(MovieAPI.allCases)
        let recorder = HookRecorder()
        let client = NetworkClient(baseURL: URL(string: "https://api.test/v1")!, transport: samples) {
            RecordingBehavior("R", recorder: recorder)
        }
        let movies: [Movie] = try await client.send(MovieAPI.popular)
        #expect(movies == [Movie(id: 1, title: "Alien")])
        #expect(recorder.hooks(of: "R").contains(.afterSuccess))
        do throws(NetworkError) {
            let _: [Movie] = try await client.send(MovieAPI.upcoming)
            Issue.record("expected a failure")
        } catch {
            guard case .transportFailed = error else {
                Issue.record("got \(error)")
                return
            }
            #expect(error.description.contains("GET /movies/popular"))  // the stubs are listed
        }
    }

    @Test func endpointsWithParametersAreStubbedOneValueEach() async throws {
        let samples = MockTransport(baseURL: URL(string: "https://api.test")!)
        samples.stubSamples([PagedAPI.page(1), .page(2)])
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: samples)
        let two: [Int] = try await client.send(PagedAPI.page(2))
        let one: [Int] = try await client.send(PagedAPI.page(1))
        #expect(one == [1] && two == [2])
        await #expect {
            let _: [Int] = try await client.send(PagedAPI.page(3))
        } throws: { error in
            NetworkError.transportFailed ~= error
        }
    }
}
