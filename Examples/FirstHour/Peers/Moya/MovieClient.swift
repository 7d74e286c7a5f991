// The client part of Examples/FirstHour with Moya 15: providers over Alamofire Sessions (the
// authenticator, the signer, a RetryPolicy taught Retry-After), NetworkActivityPlugin counted on
// the main queue, NetworkLoggerPlugin, and an async wrapper (Moya 15's API takes callbacks).
// Login goes through a second provider without the authenticator. Not compiled (see README.md).
import Alamofire
import Foundation
import Moya

@MainActor public final class MoviesModel {
    public private(set) var isLoading = false
    public private(set) var movies: [Movie] = []
    public private(set) var banner: String?

    public init() {}

    func setLoading(_ busy: Bool) { isLoading = busy }
    func setMovies(_ movies: [Movie]) { self.movies = movies }
    func setBanner(_ text: String?) { banner = text }
}

/// Alamofire's RetryPolicy backs off exponentially and does not read Retry-After.
final class RetryAfterPolicy: RetryPolicy, @unchecked Sendable {
    override func retry(
        _ request: Request, for session: Alamofire.Session, dueTo error: any Error,
        completion: @escaping (RetryResult) -> Void
    ) {
        if request.retryCount < retryLimit, let value = request.response?.headers["Retry-After"],
            let seconds = TimeInterval(value)
        {
            completion(.retryWithDelay(seconds))
        } else {
            super.retry(request, for: session, dueTo: error, completion: completion)
        }
    }
}

/// Moya's `Cancellable`, cancelled from another task.
final class CancelBox: @unchecked Sendable {
    private let lock = NSLock()
    private var request: (any Cancellable)?
    private var cancelled = false

    func set(_ request: any Cancellable) {
        let cancel = lock.withLock { self.request = request; return cancelled }
        if cancel { request.cancel() }
    }

    func cancel() { lock.withLock { cancelled = true; return request }?.cancel() }
}

public struct MovieClient: Sendable {
    let provider: MoyaProvider<MovieAPI>
    let plain: MoyaProvider<MovieAPI>
    let auth: AuthenticationInterceptor<SessionAuthenticator>
    let storage: any SecretStorage
    let model: MoviesModel
    let timings: @Sendable (String, Duration) -> Void

    public init(
        configuration: URLSessionConfiguration = .af.default, storage: any SecretStorage, token: String?,
        refreshCall: @escaping @Sendable (String?) async throws -> String, model: MoviesModel,
        timings: @escaping @Sendable (String, Duration) -> Void = { _, _ in }
    ) {
        self.storage = storage
        self.model = model
        self.timings = timings
        auth = AuthenticationInterceptor(
            authenticator: SessionAuthenticator(storage: storage, refreshCall: refreshCall),
            credential: token.map(OAuthCredential.init))
        let signer = Signer(secret: "app-secret")
        let retry = RetryAfterPolicy(retryLimit: 2)
        nonisolated(unsafe) var inFlight = 0  // touched on the main queue only
        let activity = NetworkActivityPlugin { change, _ in
            DispatchQueue.main.async {
                MainActor.assumeIsolated {
                    inFlight += change == .began ? 1 : -1
                    model.setLoading(inFlight > 0)
                }
            }
        }
        let plugins: [any PluginType] = [activity, NetworkLoggerPlugin()]
        provider = MoyaProvider(
            session: Alamofire.Session(
                configuration: configuration,
                interceptor: Interceptor(adapters: [signer], retriers: [retry], interceptors: [auth])),
            plugins: plugins)
        plain = MoyaProvider(
            session: Alamofire.Session(configuration: configuration, interceptor: Interceptor(adapters: [signer], retriers: [retry])),
            plugins: plugins)
    }

    /// Sends a target, timed, and cancels it when the calling task is cancelled.
    func send(_ target: MovieAPI, on provider: MoyaProvider<MovieAPI>) async throws -> Response {
        let start = ContinuousClock.now
        defer { timings("\(target.method.rawValue) \(target.baseURL.path)\(target.path)", .now - start) }
        let box = CancelBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                box.set(provider.request(target) { continuation.resume(with: $0) })
            }
        } onCancel: {
            box.cancel()
        }
    }

    public func loadPopular(page: Int = 1) async {
        do {
            let movies = try await send(.popular(page: page), on: provider).map([Movie].self)
            await model.setMovies(movies)
            await model.setBanner(nil)
        } catch {
            if let text = bannerText(for: error) { await model.setBanner(text) }
        }
    }

    public func rate(_ id: Int, stars: Int) async throws {
        _ = try await send(.rate(id: id, stars: stars), on: provider)
    }

    public func login(user: String, password: String) async throws -> Session {
        let signedIn = try await send(.login(user: user, password: password), on: plain).map(Session.self)
        try await storage.write(signedIn.accessToken, for: "access-token")
        auth.credential = OAuthCredential(accessToken: signedIn.accessToken)
        return signedIn
    }
}
