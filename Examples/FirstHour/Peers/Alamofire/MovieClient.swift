// The client part of Examples/FirstHour with Alamofire 5.10: headers on the configuration, the
// authentication interceptor, a RetryPolicy taught Retry-After, and EventMonitors for the spinner,
// the timings and the log. Login goes through a second Session without the authenticator.
// Not compiled (see README.md in this folder).
import Alamofire
import Foundation

@MainActor public final class MoviesModel {
    public private(set) var isLoading = false
    public private(set) var movies: [Movie] = []
    public private(set) var banner: String?

    public init() {}

    func setLoading(_ busy: Bool) { isLoading = busy }
    func setMovies(_ movies: [Movie]) { self.movies = movies }
    func setBanner(_ text: String?) { banner = text }
}

/// Counts requests in flight on the main queue; the model sees busy and idle.
final class Spinner: EventMonitor, @unchecked Sendable {
    let queue = DispatchQueue.main
    let model: MoviesModel
    private var inFlight = 0  // touched on the main queue only

    init(model: MoviesModel) { self.model = model }

    func requestDidResume(_ request: Request) { change(by: 1) }
    func requestDidFinish(_ request: Request) { change(by: -1) }

    private func change(by delta: Int) {
        MainActor.assumeIsolated {
            inFlight += delta
            model.setLoading(inFlight > 0)
        }
    }
}

final class RequestLog: EventMonitor {
    func requestDidFinish(_ request: Request) {
        print("\(request.request?.method?.rawValue ?? "") \(request.request?.url?.path ?? "") → \(request.response?.statusCode ?? 0)")
    }
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

public struct MovieClient: Sendable {
    let session: Alamofire.Session
    let plain: Alamofire.Session
    let auth: AuthenticationInterceptor<SessionAuthenticator>
    let storage: any SecretStorage
    let model: MoviesModel

    public init(
        configuration: URLSessionConfiguration = .af.default, storage: any SecretStorage, token: String?,
        refreshCall: @escaping @Sendable (String?) async throws -> String, model: MoviesModel,
        timings: @escaping @Sendable (String, Duration) -> Void = { _, _ in }
    ) {
        configuration.headers = [.userAgent("MovieKit/1.0"), .accept("application/json")]
        self.storage = storage
        self.model = model
        auth = AuthenticationInterceptor(
            authenticator: SessionAuthenticator(storage: storage, refreshCall: refreshCall),
            credential: token.map(OAuthCredential.init))
        let monitors: [any EventMonitor] = [Spinner(model: model), Timing(report: timings), RequestLog()]
        let signer = Signer(secret: "app-secret")
        let retry = RetryAfterPolicy(retryLimit: 2)
        session = Alamofire.Session(
            configuration: configuration,
            interceptor: Interceptor(adapters: [signer], retriers: [retry], interceptors: [auth]),
            eventMonitors: monitors)
        plain = Alamofire.Session(
            configuration: configuration, interceptor: Interceptor(adapters: [signer], retriers: [retry]),
            eventMonitors: monitors)
    }

    public func loadPopular(page: Int = 1) async {
        do {
            let movies = try await session.request(MovieAPI.popular(page: page)).validate()
                .serializingDecodable([Movie].self, automaticallyCancelling: true).value
            await model.setMovies(movies)
            await model.setBanner(nil)
        } catch {
            if let text = bannerText(for: error) { await model.setBanner(text) }
        }
    }

    public func rate(_ id: Int, stars: Int) async throws {
        _ = try await session.request(MovieAPI.rate(id: id, stars: stars)).validate()
            .serializingData(automaticallyCancelling: true).value
    }

    public func login(user: String, password: String) async throws -> Session {
        let signedIn = try await plain.request(MovieAPI.login(user: user, password: password)).validate()
            .serializingDecodable(Session.self, automaticallyCancelling: true).value
        try await storage.write(signedIn.accessToken, for: "access-token")
        auth.credential = OAuthCredential(accessToken: signedIn.accessToken)
        return signedIn
    }
}
