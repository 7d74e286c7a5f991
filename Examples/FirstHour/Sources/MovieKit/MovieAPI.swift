import Conveyor
import Foundation

/// A movie, as the API sends it.
public struct Movie: Codable, Sendable, Equatable {
    public var id: Int
    public var title: String

    public init(id: Int, title: String) {
        self.id = id
        self.title = title
    }
}

/// A signed-in session.
public struct Session: Codable, Sendable, Equatable {
    public var accessToken: String

    public init(accessToken: String) { self.accessToken = accessToken }
}

/// The API's endpoints, Moya-style (README: "Enum endpoints").
public enum MovieAPI: Endpoint, EndpointExclusions {
    case popular(page: Int)
    case movie(id: Int)
    case rate(id: Int, stars: Int)
    case login(user: String, password: String)

    public var method: HTTPMethod {
        switch self {
        case .popular, .movie: .get
        case .rate, .login: .post
        }
    }

    public var path: String {
        switch self {
        case .popular: "/movies/popular"
        case .movie(let id): "/movies/\(id)"
        case .rate(let id, _): "/movies/\(id)/rating"
        case .login: "/login"
        }
    }

    public var query: QueryParameters {
        if case .popular(let page) = self { ["page": page] } else { [:] }
    }

    public var body: RequestBody {
        switch self {
        case .rate(_, let stars): .json(["stars": stars])
        case .login(let user, let password): .form(["user": user, "password": password])
        default: .none
        }
    }

    /// Signing in sends no token (Docs/Authentication.md: the refresh call and login leave auth out).
    public var exclusions: [BehaviorExclusion] {
        if case .login = self { [.type(AuthTokenBehavior.self)] } else { [] }
    }
}
