// The endpoints part of Examples/FirstHour, written with Get 2.2 (typed `Request` values from
// functions, as Get's README shows). Not compiled: Get is not among the packages this repository's
// machines can resolve. See README.md in this folder.
import Foundation
import Get

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

public enum MovieAPI {
    public static func popular(page: Int) -> Request<[Movie]> {
        Request(path: "/movies/popular", query: [("page", String(page))])
    }

    public static func movie(id: Int) -> Request<Movie> { Request(path: "/movies/\(id)") }

    public static func rate(id: Int, stars: Int) -> Request<Void> {
        Request(path: "/movies/\(id)/rating", method: .post, body: ["stars": stars])
    }

    /// Get encodes bodies as JSON; a form body is built by hand and sent as `Data`.
    public static func login(user: String, password: String) -> Request<Session> {
        var form = URLComponents()
        form.queryItems = [URLQueryItem(name: "user", value: user), URLQueryItem(name: "password", value: password)]
        let body = Data((form.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B").utf8)
        return Request(
            path: "/login", method: .post, body: body,
            headers: ["Content-Type": "application/x-www-form-urlencoded"])
    }

    /// Paths that go without a token.
    static let signedOutPaths: Set<String> = ["/login"]
}
