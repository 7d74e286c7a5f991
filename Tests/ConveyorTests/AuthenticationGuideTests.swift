import ConveyorTesting
import Foundation
import Testing

// Docs/Authentication.md, "Access and refresh tokens, refreshed through the same client", and the
// test Docs/Testing.md shows with it ("Two requests get 401 at once: one refresh"), run. The store
// is a copy of the guide's, which DocSnippetTests type-checks as written.

struct TokenPair: Codable, Sendable {
    var accessToken: String
    var refreshToken: String
}

actor TokenPairStore: TokenProvider, TokenRefresher {
    private var pair: TokenPair?
    private var client: NetworkClient?

    init(pair: TokenPair?) { self.pair = pair }

    /// Called once, right after the client is made.
    func use(_ client: NetworkClient) { self.client = client }

    func currentToken() async throws -> String? { pair?.accessToken }

    func refreshToken(replacing expiredToken: String?) async throws -> String {
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

@Suite struct AuthenticationGuideTests {
    @Test func twoRequestsThatGet401ShareOneRefresh() async throws {
        let base = URL(string: "https://api.test/v1")!
        let mock = MockTransport(baseURL: base)
        mock.stub(.post, "/oauth/token", reply: .json(TokenPair(accessToken: "fresh", refreshToken: "r2")))
        mock.stub(.get, "/me", reply: .handler { request in
            request.headers["Authorization"] == "Bearer fresh" ? .json(["name": "Ada"]) : .status(401)
        })
        let store = TokenPairStore(pair: TokenPair(accessToken: "expired", refreshToken: "r1"))
        let client = NetworkClient(baseURL: base, transport: mock) {
            AuthTokenBehavior(tokens: store, refresher: store)
        }
        await store.use(client)

        async let first: [String: String] = client.get("/me")
        async let second: [String: String] = client.get("/me")
        let names = try await [first["name"], second["name"]]

        #expect(names == ["Ada", "Ada"])
        let refreshes = mock.requests.filter { $0.url.path == "/v1/oauth/token" }
        #expect(refreshes.count == 1)
        // The refresh call carried the refresh token and no access token.
        #expect(refreshes.first?.headers["Authorization"] == nil)
        #expect(refreshes.first?.bodyText?.contains("refresh_token=r1") == true)
        // Each /me: a 401 with the expired token, then a 200 with the fresh one.
        let me = mock.requests.filter { $0.url.path == "/v1/me" }.map { $0.headers["Authorization"] ?? "" }
        #expect(me.sorted() == ["Bearer expired", "Bearer expired", "Bearer fresh", "Bearer fresh"])
    }

    @Test func aRefusedRefreshTokenEndsTheSessionAsUnauthorized() async {
        let base = URL(string: "https://api.test/v1")!
        let mock = MockTransport(baseURL: base)
        mock.stub(.post, "/oauth/token", reply: .status(400))
        mock.stub(.get, "/me", reply: .status(401))
        let store = TokenPairStore(pair: TokenPair(accessToken: "expired", refreshToken: "revoked"))
        let client = NetworkClient(baseURL: base, transport: mock) {
            AuthTokenBehavior(tokens: store, refresher: store)
        }
        await store.use(client)
        await #expect(throws: NetworkError.unauthorized) {
            let _: [String: String] = try await client.get("/me")
        }
    }
}
