// The endpoints part of Examples/FirstHour, written with Moya 15 (a TargetType enum). Not
// compiled: Moya is not among the packages this repository's machines can resolve. See README.md
// in this folder.
import Foundation
import Moya

public struct Movie: Codable, Sendable, Equatable {
    public var id: Int
    public var title: String

    public init(id: Int, title: String) {
        self.id = id
        self.title = title
    }
}

public struct Session: Codable, Sendable, Equatable {
    public var accessToken: String

    public init(accessToken: String) { self.accessToken = accessToken }
}

public enum MovieAPI: TargetType {
    case popular(page: Int)
    case movie(id: Int)
    case rate(id: Int, stars: Int)
    case login(user: String, password: String)

    nonisolated(unsafe) public static var base = URL(string: "https://api.movies.test/v1")!

    public var baseURL: URL { Self.base }

    public var path: String {
        switch self {
        case .popular: "/movies/popular"
        case .movie(let id): "/movies/\(id)"
        case .rate(let id, _): "/movies/\(id)/rating"
        case .login: "/login"
        }
    }

    public var method: Moya.Method {
        switch self {
        case .popular, .movie: .get
        case .rate, .login: .post
        }
    }

    // `Moya.Task`: Moya's `Task` shadows Swift's.
    public var task: Moya.Task {
        switch self {
        case .popular(let page): .requestParameters(parameters: ["page": page], encoding: URLEncoding.queryString)
        case .movie: .requestPlain
        case .rate(_, let stars): .requestJSONEncodable(["stars": stars])
        case .login(let user, let password):
            .requestParameters(parameters: ["user": user, "password": password], encoding: URLEncoding.httpBody)
        }
    }

    public var headers: [String: String]? { ["User-Agent": "MovieKit/1.0", "Accept": "application/json"] }

    // 4xx and 5xx become errors, so Alamofire's retriers and authenticator see them.
    public var validationType: ValidationType { .successCodes }
}
