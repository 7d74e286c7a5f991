// The endpoints part of Examples/FirstHour, written with Alamofire 5.10 (a URLRequestConvertible
// router, as Alamofire's Advanced Usage guide shows). Not compiled: Alamofire is not among the
// packages this repository's machines can resolve. See README.md in this folder.
import Alamofire
import Foundation

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

public enum MovieAPI: URLRequestConvertible {
    case popular(page: Int)
    case movie(id: Int)
    case rate(id: Int, stars: Int)
    case login(user: String, password: String)

    nonisolated(unsafe) public static var baseURL = URL(string: "https://api.movies.test/v1")!

    var method: HTTPMethod {
        switch self {
        case .popular, .movie: .get
        case .rate, .login: .post
        }
    }

    var path: String {
        switch self {
        case .popular: "/movies/popular"
        case .movie(let id): "/movies/\(id)"
        case .rate(let id, _): "/movies/\(id)/rating"
        case .login: "/login"
        }
    }

    public func asURLRequest() throws -> URLRequest {
        let request = try URLRequest(url: Self.baseURL.appendingPathComponent(path), method: method)
        switch self {
        case .popular(let page): return try URLEncoding.queryString.encode(request, with: ["page": page])
        case .rate(_, let stars): return try JSONParameterEncoder.default.encode(["stars": stars], into: request)
        case .login(let user, let password):
            return try URLEncodedFormParameterEncoder.default.encode(["user": user, "password": password], into: request)
        case .movie: return request
        }
    }
}
