// The client part of Examples/FirstHour with Get 2.2: an APIClientDelegate adds the headers, the
// token and the signature to every attempt, refreshes on 401 and waits for Retry-After; a wrapper
// around each call drives the spinner, the timings and the log, since Get has no hook that sees a
// request end. Not compiled (see README.md in this folder).
import Foundation
import Get

@MainActor public final class MoviesModel {
    public private(set) var isLoading = false
    public private(set) var movies: [Movie] = []
    public private(set) var banner: String?

    public init() {}

    private var inFlight = 0
    func started() { inFlight += 1; isLoading = true }
    func ended() { inFlight -= 1; isLoading = inFlight > 0 }
    func setMovies(_ movies: [Movie]) { self.movies = movies }
    func setBanner(_ text: String?) { banner = text }
}

final class MovieDelegate: APIClientDelegate, Sendable {
    let session: SessionStore
    let sleep: @Sendable (Duration) async throws -> Void

    init(session: SessionStore, sleep: @escaping @Sendable (Duration) async throws -> Void) {
        self.session = session
        self.sleep = sleep
    }

    func client(_ client: APIClient, willSendRequest request: inout URLRequest) async throws {
        request.setValue("MovieKit/1.0", forHTTPHeaderField: "User-Agent")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let path = request.url?.path, !MovieAPI.signedOutPaths.contains(where: path.hasSuffix),
            let token = try await session.currentToken()
        {
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        }
        sign(&request, secret: "app-secret")
    }

    func client(_ client: APIClient, shouldRetry task: URLSessionTask, error: any Error, attempts: Int) async throws -> Bool {
        guard attempts < 3, case .unacceptableStatusCode(let status) = error as? APIError else { return false }
        if status == 401 {
            let sent = task.originalRequest?.value(forHTTPHeaderField: "Authorization")?.replacingOccurrences(of: "Bearer ", with: "")
            _ = try await session.refreshToken(replacing: sent)
            return true
        }
        guard [429, 502, 503, 504].contains(status), ["GET", "HEAD", "PUT", "DELETE"].contains(task.originalRequest?.httpMethod)
        else { return false }
        let retryAfter = (task.response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Retry-After").flatMap(Double.init)
        let backoff = 0.5 * pow(2, Double(attempts - 1)) * Double.random(in: 0.5...1)
        try await sleep(.seconds(retryAfter ?? backoff))
        return true
    }
}

public struct MovieClient: Sendable {
    let client: APIClient
    let session: SessionStore
    let model: MoviesModel
    let timings: @Sendable (String, Duration) -> Void

    public init(
        baseURL: URL, sessionConfiguration: URLSessionConfiguration = .default, session: SessionStore,
        model: MoviesModel, sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        timings: @escaping @Sendable (String, Duration) -> Void = { _, _ in }
    ) {
        self.session = session
        self.model = model
        self.timings = timings
        let delegate = MovieDelegate(session: session, sleep: sleep)
        client = APIClient(baseURL: baseURL) {
            $0.sessionConfiguration = sessionConfiguration
            $0.delegate = delegate
        }
    }

    /// Sends a request with the spinner on, timed and logged.
    func perform<T>(_ request: Request<T>, _ send: (Request<T>) async throws -> T) async throws -> T {
        let what = "\(request.method.rawValue) \(client.configuration.baseURL?.path ?? "")\(request.url?.path ?? "")"
        await model.started()
        let start = ContinuousClock.now
        do {
            let value = try await send(request)
            await finish(what, since: start, outcome: "ok")
            return value
        } catch {
            await finish(what, since: start, outcome: "\(error)")
            throw error
        }
    }

    func finish(_ what: String, since start: ContinuousClock.Instant, outcome: String) async {
        timings(what, .now - start)
        print("\(what) → \(outcome)")
        await model.ended()
    }

    public func loadPopular(page: Int = 1) async {
        do {
            let movies = try await perform(MovieAPI.popular(page: page)) { try await client.send($0).value }
            await model.setMovies(movies)
            await model.setBanner(nil)
        } catch {
            if let text = bannerText(for: error) { await model.setBanner(text) }
        }
    }

    public func rate(_ id: Int, stars: Int) async throws {
        try await perform(MovieAPI.rate(id: id, stars: stars)) { try await client.send($0).value }
    }

    public func login(user: String, password: String) async throws -> Session {
        let signedIn = try await perform(MovieAPI.login(user: user, password: password)) { try await client.send($0).value }
        try await session.signIn(signedIn)
        return signedIn
    }
}
