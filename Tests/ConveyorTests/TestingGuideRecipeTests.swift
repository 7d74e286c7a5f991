import ConveyorTesting
import Foundation
import Testing

/// The recipes of Docs/Testing.md's "The tests app teams write most", run (the docs' copies are
/// type-checked by DocSnippetTests; these make sure they pass).
@Suite struct TestingGuideRecipeTests {
    struct Movie: Codable, Sendable, Equatable { var id: Int }
    let api = URL(string: "https://api.example.com")!

    @Test func cancellingARequestInFlightStopsTheSpinner() async throws {
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.stub(.get, "/movies", reply: .delayed(.seconds(30), .json([Movie(id: 1)])))
        let activity = NetworkActivityCounter()
        let client = NetworkClient(baseURL: api, transport: mock) { ActivityCounterBehavior(counter: activity) }

        let task = Task { () async throws -> [Movie] in try await client.get("/movies") }
        await clock.waitForSleepers(1)  // in flight: the mock waits on the test's clock
        #expect(activity.count == 1)
        task.cancel()
        await #expect(throws: NetworkError.cancelled) { try await task.value }
        #expect(activity.count == 0)
    }

    @Test func aFourOhOneRefreshesOnceAndRetries() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(401), .json(Movie(id: 1)))
        let tokens = InMemoryTokenStore(token: "old") { _ in "new" }
        let client = NetworkClient(baseURL: api, transport: mock) {
            AuthTokenBehavior(tokens: tokens, refresher: tokens)
        }

        let movie: Movie = try await client.get("/movies/1")

        #expect(movie == Movie(id: 1))
        #expect(mock.requests.map { $0.headers["Authorization"] } == ["Bearer old", "Bearer new"])
        #expect(try await tokens.currentToken() == "new")
    }

    @Test func aFiveOhThreeWaitsForRetryAfter() async throws {
        let clock = ImmediateClock()
        let mock = MockTransport()
        mock.enqueue(.status(503, headers: ["Retry-After": "7"]), .json(Movie(id: 1)))
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: clock)) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 2, jitter: .none))
        }

        let movie: Movie = try await client.get("/movies/1")

        #expect(movie == Movie(id: 1))
        #expect(clock.sleeps == [.seconds(7)])
    }

    @Test func theModelIsIdleAfterARequest() async throws {
        let model = await MainActor.run { MoviesModel() }
        let mock = MockTransport()
        mock.enqueue(.rawJSON("[]"))
        let client = NetworkClient(baseURL: api, transport: mock) {
            ActivityCounterBehavior(counter: MainActorActivityCounter { busy in model.record(busy) })
        }
        let _: [Movie] = try await client.get("/movies")
        #expect(await model.isLoading == false)
        #expect(await model.seen == [true, false])
    }

    @Test func timesOutOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.hang)
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(timeoutClock: clock))

        let task = Task { () async throws -> Void in try await client.send(Request<Void>(path: "/slow", timeout: .seconds(10))) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(10))

        await #expect(throws: NetworkError.timedOut) { try await task.value }
    }

    @Test func aBrokenBodyIsADecodingFailure() async {
        let mock = MockTransport()
        mock.enqueue(.rawJSON(#"{"id": "#))
        let client = NetworkClient(baseURL: api, transport: mock)
        await #expect {
            let _: Movie = try await client.get("/movies/1")
        } throws: { error in
            NetworkError.decodingFailed ~= error
        }
    }

    @Test func anOutcomeHookKnowsItsRequest() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(404))
        let banners = Banners()
        let client = NetworkClient(baseURL: api, transport: mock) { ErrorBanner(banners: banners) }
        await #expect(throws: NetworkError.notFound) { try await client.send(Request<Void>(path: "/movies/9")) }
        #expect(await banners.shown == ["GET /movies/9 failed: 404"])
    }
}

@MainActor final class MoviesModel {
    var isLoading = false
    var seen: [Bool] = []
    func record(_ busy: Bool) {
        isLoading = busy
        seen.append(busy)
    }
}

actor Banners {
    private(set) var shown: [String] = []
    func show(_ text: String) { shown.append(text) }
}

/// An outcome hook that names the request it ends, from the context alone.
struct ErrorBanner: FailureObserving {
    let banners: Banners
    func afterFailure(_ error: NetworkError, context: RequestContext) async {
        let request = context.originalRequest
        let what = error.status.map(String.init) ?? error.name
        await banners.show("\(request.method) \(request.url.path) failed: \(what)")
    }
}
