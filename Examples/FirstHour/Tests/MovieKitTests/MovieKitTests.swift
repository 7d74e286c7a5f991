import ConveyorTesting
import Foundation
import MovieKit
import Testing

/// Secrets in memory, for tests.
actor MemorySecrets: SecretStorage {
    private var values: [String: String] = [:]
    init(token: String?) { values["access-token"] = token }
    func read(_ key: String) async throws -> String? { values[key] }
    func write(_ value: String?, for key: String) async throws { values[key] = value }
}

actor Timings {
    private(set) var recorded: [String] = []
    func record(_ what: String, _ duration: Duration) { recorded.append(what) }
}

/// The tests of Docs/Testing.md's "The tests app teams write most", on the app's own client.
@Suite struct MovieKitTests {
    let api = URL(string: "https://api.movies.test/v1")!

    func make(_ mock: MockTransport, token: String? = "old", clock: any Clock<Duration> = ImmediateClock(), timings: Timings = Timings())
        async -> (MovieClient, MoviesModel)
    {
        let session = SessionStore(storage: MemorySecrets(token: token)) { _ in "new" }
        let model = await MainActor.run { MoviesModel() }
        let client = MovieClient(baseURL: api, transport: mock, session: session, model: model, clock: clock) { what, duration in
            await timings.record(what, duration)
        }
        return (client, model)
    }

    @Test func loadsMoviesWithEveryHeaderAndTheSpinnerIdleAfter() async throws {
        let mock = MockTransport(baseURL: api)
        mock.stub(.get, "/movies/popular", query: ["page": "2"], reply: .json([Movie(id: 1, title: "Alien")]))
        let timings = Timings()
        let (client, model) = await make(mock, timings: timings)

        await client.loadPopular(page: 2)

        #expect(await model.movies == [Movie(id: 1, title: "Alien")])
        #expect(await model.isLoading == false)
        let sent = try #require(mock.requests.first)
        #expect(sent.headers["Authorization"] == "Bearer old")
        #expect(sent.headers["User-Agent"] == "MovieKit/1.0")
        #expect(sent.headers["X-Signature"] != nil)
        #expect(await timings.recorded == ["GET /v1/movies/popular"])
    }

    @Test func aFourOhOneRefreshesTheTokenAndRetries() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(401), .json([Movie(id: 1, title: "Alien")]))
        let (client, model) = await make(mock)

        await client.loadPopular()

        #expect(await model.movies.count == 1)
        #expect(mock.requests.map { $0.headers["Authorization"] } == ["Bearer old", "Bearer new"])
    }

    @Test func aFiveOhThreeWaitsForRetryAfterOnTheTestClock() async throws {
        let clock = ImmediateClock()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503, headers: ["Retry-After": "5"]), .json([Movie(id: 1, title: "Alien")]))
        let (client, model) = await make(mock, clock: clock)

        await client.loadPopular()

        #expect(await model.movies.count == 1)
        // Retry-After is a floor, spread upward by at most a fifth (the app keeps the default jitter).
        #expect(clock.sleeps.count == 1)
        #expect(clock.sleeps.allSatisfy { $0 >= .seconds(5) && $0 <= .seconds(6) })
    }

    @Test func aFailureShowsABannerForThatRequestOnly() async throws {
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(404))
        let (client, model) = await make(mock)

        await client.loadPopular()
        #expect(await model.banner == "The server answered 404.")

        mock.enqueue(.status(404))
        await #expect(throws: NetworkError.notFound) { try await client.rate(9, stars: 5) }
        #expect(await model.banner == "The server answered 404.")  // the rating had no banner behavior
    }

    @Test func cancellingALoadInFlightStopsTheSpinner() async throws {
        let clock = ManualClock()
        let mock = MockTransport(baseURL: api, clock: clock)
        mock.stub(.get, "/movies/popular", reply: .delayed(.seconds(30), .json([Movie]())))
        let (client, model) = await make(mock)

        let load = Task { await client.loadPopular() }
        await clock.waitForSleepers(1)
        #expect(await model.isLoading)
        load.cancel()
        await load.value
        #expect(await model.isLoading == false)
        #expect(await model.banner == nil)  // a cancelled load shows nothing
    }

    @Test func loginSendsNoToken() async throws {
        let mock = MockTransport(baseURL: api)
        mock.stub(.post, "/login", reply: .rawJSON(#"{"accessToken": "fresh"}"#))
        let (client, _) = await make(mock)

        let session = try await client.login(user: "ana", password: "hunter2")

        #expect(session == Session(accessToken: "fresh"))
        #expect(mock.requests.first?.headers["Authorization"] == nil)
    }
}
