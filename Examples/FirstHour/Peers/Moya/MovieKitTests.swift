// The tests part of Examples/FirstHour with Moya 15. Moya's stubbing (`stubClosure`) answers before Alamofire
// runs, so the authenticator and the retrier would never see a stubbed 401 or 503: a URLProtocol
// answers in the session's place instead, and with no clock to inject the Retry-After test
// waits the real second. Not compiled (see README.md in this folder).
import Alamofire
import Moya
import Foundation
import MovieKit
import Testing

/// Answers every request with the next queued reply; with none queued it never answers, so the
/// request stays in flight until it is cancelled.
final class StubProtocol: URLProtocol, @unchecked Sendable {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var replies: [(Int, [String: String], Data)] = []
    nonisolated(unsafe) private static var sent: [URLRequest] = []

    static func reset(_ queued: [(Int, [String: String], Data)]) { lock.withLock { replies = queued; sent = [] } }
    static var requests: [URLRequest] { lock.withLock { sent } }

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let reply = Self.lock.withLock { () -> (Int, [String: String], Data)? in
            Self.sent.append(request)
            return Self.replies.isEmpty ? nil : Self.replies.removeFirst()
        }
        guard let (status, headers, body) = reply, let url = request.url,
            let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)
        else { return }
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: body)
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

actor MemorySecrets: SecretStorage {
    private var values: [String: String] = [:]
    init(token: String?) { values["access-token"] = token }
    func read(_ key: String) async throws -> String? { values[key] }
    func write(_ value: String?, for key: String) async throws { values[key] = value }
}

final class Timings: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String] = []
    var recorded: [String] { lock.withLock { values } }
    func record(_ what: String, _ duration: Duration) { lock.withLock { values.append(what) } }
}

let json = ["Content-Type": "application/json"]
let alien = Data(#"[{"id": 1, "title": "Alien"}]"#.utf8)

// The stub's replies are process-wide, so the tests run one at a time.
@Suite(.serialized) struct MovieKitTests {
    func make(_ replies: [(Int, [String: String], Data)], timings: Timings = Timings()) async -> (MovieClient, MoviesModel) {
        StubProtocol.reset(replies)
        let configuration = URLSessionConfiguration.af.default
        configuration.protocolClasses = [StubProtocol.self]
        let model = await MainActor.run { MoviesModel() }
        let client = MovieClient(
            configuration: configuration, storage: MemorySecrets(token: "old"), token: "old",
            refreshCall: { _ in "new" }, model: model, timings: timings.record)
        return (client, model)
    }

    @Test func loadsMoviesWithEveryHeaderAndTheSpinnerIdleAfter() async throws {
        let timings = Timings()
        let (client, model) = await make([(200, json, alien)], timings: timings)

        await client.loadPopular(page: 2)

        #expect(await model.movies == [Movie(id: 1, title: "Alien")])
        // The spinner's idle is delivered on the main queue after the request's end.
        while await model.isLoading { await _Concurrency.Task.yield() }
        let sent = try #require(StubProtocol.requests.first)
        #expect(sent.url?.query == "page=2")
        #expect(sent.headers["Authorization"] == "Bearer old")
        #expect(sent.headers["User-Agent"] == "MovieKit/1.0")
        #expect(sent.headers["X-Signature"] != nil)
        #expect(timings.recorded == ["GET /v1/movies/popular"])
    }

    @Test func aFourOhOneRefreshesTheTokenAndRetries() async throws {
        let (client, model) = await make([(401, [:], Data()), (200, json, alien)])

        await client.loadPopular()

        #expect(await model.movies.count == 1)
        #expect(StubProtocol.requests.map { $0.headers["Authorization"] } == ["Bearer old", "Bearer new"])
    }

    @Test func aFiveOhThreeWaitsForRetryAfter() async throws {
        let (client, model) = await make([(503, ["Retry-After": "1"], Data()), (200, json, alien)])
        let start = ContinuousClock.now

        await client.loadPopular()

        #expect(await model.movies.count == 1)
        #expect(ContinuousClock.now - start >= .seconds(1))  // waited for real
    }

    @Test func aFailureShowsABannerForThatRequestOnly() async throws {
        let (client, model) = await make([(404, [:], Data()), (404, [:], Data())])

        await client.loadPopular()
        #expect(await model.banner == "The server answered 404.")

        await #expect(throws: MoyaError.self) { try await client.rate(9, stars: 5) }
        #expect(await model.banner == "The server answered 404.")
    }

    @Test func cancellingALoadInFlightStopsTheSpinner() async throws {
        let (client, model) = await make([])

        // Moya's `Task` shadows Swift's.
        let load = _Concurrency.Task { await client.loadPopular() }
        while StubProtocol.requests.isEmpty { await _Concurrency.Task.yield() }
        while await !model.isLoading { await _Concurrency.Task.yield() }
        load.cancel()
        await load.value
        while await model.isLoading { await _Concurrency.Task.yield() }
        #expect(await model.banner == nil)
    }

    @Test func loginSendsNoToken() async throws {
        let (client, _) = await make([(200, json, Data(#"{"accessToken": "fresh"}"#.utf8))])

        let session = try await client.login(user: "ana", password: "hunter2")

        #expect(session == MovieKit.Session(accessToken: "fresh"))
        #expect(StubProtocol.requests.first?.headers["Authorization"] == nil)
    }
}
