import Conveyor
import Foundation

/// The app's view model for the movie list: its spinner is on the main actor
/// (README: `MainActorActivityCounter`).
@MainActor public final class MoviesModel {
    public private(set) var isLoading = false
    public private(set) var movies: [Movie] = []
    public private(set) var banner: String?

    public init() {}

    func setLoading(_ busy: Bool) { isLoading = busy }
    func setMovies(_ movies: [Movie]) { self.movies = movies }
    func setBanner(_ text: String?) { banner = text }
}

/// Everything the app sends goes through this client.
public struct MovieClient: Sendable {
    public let client: NetworkClient
    let model: MoviesModel

    /// - Parameters:
    ///   - baseURL: The API.
    ///   - transport: The network, or a `MockTransport` in tests.
    ///   - session: The token store.
    ///   - model: The view model whose spinner and banner this client drives.
    ///   - clock: Retry waits (a test clock in tests).
    ///   - timings: Where request durations go.
    public init(
        baseURL: URL, transport: any HTTPTransport = URLSessionTransport.shared, session: SessionStore,
        model: MoviesModel, clock: any Clock<Duration> = ContinuousClock(),
        timings: @escaping @Sendable (String, Duration) async -> Void = { _, _ in }
    ) {
        self.model = model
        self.client = NetworkClient(baseURL: baseURL, transport: transport, configuration: .init(clock: clock)) {
            HeadersBehavior(["User-Agent": "MovieKit/1.0", "Accept": "application/json"])
            AuthTokenBehavior(tokens: session, refresher: session)
            ActivityCounterBehavior(counter: MainActorActivityCounter { busy in model.setLoading(busy) })
            RetryBehavior(.exponentialBackoff(maxAttempts: 3))
            SigningAndTimingBehavior(secret: "app-secret", report: timings)
            LoggingBehavior(sink: PrintLogSink())
        }
    }

    /// Loads a page of popular movies into the model; a failure shows a banner.
    public func loadPopular(page: Int = 1) async {
        let banner = BannerBehavior { text in await model.setBanner(text) }
        do {
            let movies: [Movie] = try await client.send(MovieAPI.popular(page: page), behaviors: [banner])
            await model.setMovies(movies)
            await model.setBanner(nil)
        } catch {
            // The banner behavior has shown the failure.
        }
    }

    /// Rates a movie.
    public func rate(_ id: Int, stars: Int) async throws(NetworkError) {
        try await client.send(MovieAPI.rate(id: id, stars: stars))
    }

    /// Signs in; the request carries no token.
    public func login(user: String, password: String) async throws(NetworkError) -> Session {
        try await client.send(MovieAPI.login(user: user, password: password))
    }
}
