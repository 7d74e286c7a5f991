// Names the ```swift blocks of README.md and Docs/*.md use without declaring them.
//
// Not part of any target. DocSnippetTests compiles this file into a module, DocSnippetPrelude,
// that every block imports implicitly. A block's own declarations shadow these, and this module
// re-exports nothing: a block sees Conveyor, Foundation or Testing only through its imports
// (or those of the page's earlier blocks, see Docs/Testing.md). Nothing here ever runs.
public import ConveyorTesting
public import Foundation

// README.md: the quick start and what follows it.
public struct Movie: Codable, Sendable {
    public var id: Int
    public var title: String
}
public struct Session: Codable, Sendable {}
public let client = NetworkClient(baseURL: URL(string: "https://api.example.com/v1")!)
public let keychain = InMemoryTokenStore(token: "token")
public let sessionRefresher = InMemoryTokenStore(token: nil) { _ in "new token" }
public let user = "user"
public let password = "password"
public func showLogin() {}
public func showRetryBanner() {}
public func show(_ error: NetworkError) {}

// Docs/Testing.md
public let mock = MockTransport()
/// The transport the "Test your own transport" section checks (the page declares its own first).
public struct MyTransport: HTTPTransport {
    public init() {}
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        HTTPResponse(status: 200, request: request)
    }
}
extension Bundle {
    /// What SwiftPM generates for a target with resources.
    public static var module: Bundle { .main }
}

// Docs/WritingABehavior.md: the opt-out example excludes the page's first behavior.
public struct APIKeyBehavior: HeaderAdding {
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders { [:] }
}

// Docs/Migrating.md
public let api = URL(string: "https://api.example.com")!
public let savedToken: String? = "token"
public struct AuthAPI: Sendable {
    public func refresh(_ expiredToken: String?) async throws -> String { "new token" }
}
public let authAPI = AuthAPI()
public struct User: Codable, Sendable {
    public var login: String
}
/// The page's `GitHub` endpoint, for the errors example after it.
public enum GitHub: Endpoint {
    case user(String)
    public var path: String {
        switch self {
        case .user(let name): "/users/\(name)"
        }
    }
}

// Large transfers (README quick start).
public let trailerFile = FileManager.default.temporaryDirectory.appendingPathComponent("trailer.mp4")
public let posterFile = FileManager.default.temporaryDirectory.appendingPathComponent("poster.jpg")

// Docs/Authentication.md's access-and-refresh token store, for Testing.md's 401 test.
public struct TokenPair: Codable, Sendable {
    public var accessToken: String
    public var refreshToken: String
    public init(accessToken: String, refreshToken: String) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
    }
}

public actor TokenPairStore: TokenProvider, TokenRefresher {
    private var pair: TokenPair?
    private var client: NetworkClient?

    public init(pair: TokenPair?) { self.pair = pair }

    /// Called once, right after the client is made.
    public func use(_ client: NetworkClient) { self.client = client }

    public func currentToken() async throws -> String? { pair?.accessToken }

    public func refreshToken(replacing expiredToken: String?) async throws -> String {
        guard let client, let refreshToken = pair?.refreshToken else { throw NetworkError.unauthorized }
        // Without AuthTokenBehavior: the refresh call carries no access token, and never waits on
        // the refresh it is part of.
        let request = Request<TokenPair>(
            method: .post, path: "/oauth/token",
            body: .form(["grant_type": "refresh_token", "refresh_token": refreshToken])
        ).excluding(.type(AuthTokenBehavior.self))
        let fresh = try await client.send(request)
        pair = fresh  // saved where currentToken() reads, before returning
        return fresh.accessToken
    }
}
