import ConveyorTesting
import Foundation
import Testing

/// An enum API, as users write with Moya's TargetType.
enum MovieAPI: Endpoint, EndpointExclusions {
    case popular(page: Int)
    case rate(id: Int, stars: Int)
    case login(user: String)

    var method: HTTPMethod {
        switch self {
        case .popular: .get
        case .rate, .login: .post
        }
    }
    var path: String {
        switch self {
        case .popular: "/movies/popular"
        case .rate(let id, _): "/movies/\(id)/rating"
        case .login: "/login"
        }
    }
    var query: QueryParameters {
        if case .popular(let page) = self { ["page": page] } else { [:] }
    }
    var body: RequestBody {
        switch self {
        case .rate(_, let stars): .json(["stars": stars])
        case .login(let user): .form(["user": user])
        case .popular: .none
        }
    }
    var exclusions: [BehaviorExclusion] {
        if case .login = self { [.named("auth")] } else { [] }
    }
}

struct Movie: Codable, Equatable, Sendable { var id: Int; var title: String }

@Suite struct EndpointTests {
    struct Auth: HeaderAdding {
        var name: String { "auth" }
        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            ["Authorization": "Bearer t"]
        }
    }

    @Test func enumEndpointsBuildTypedRequests() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/movies/popular", query: ["page": "2"], reply: .json([Movie(id: 1, title: "Heat")]))
        mock.stub(.post, "/movies/7/rating", reply: .status(204))
        mock.stub(.post, "/login", reply: .status(200))
        let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:1")!, transport: mock) { Auth() }

        let movies: [Movie] = try await client.send(MovieAPI.popular(page: 2))
        #expect(movies == [Movie(id: 1, title: "Heat")])
        try await client.send(MovieAPI.rate(id: 7, stars: 5))
        try await client.send(MovieAPI.login(user: "ann"))

        let sent = mock.requests
        #expect(try sent[1].decodedBody(as: [String: Int].self) == ["stars": 5])
        #expect(sent.map { $0.headers["Authorization"] } == ["Bearer t", "Bearer t", nil])
        #expect(sent[2].bodyText == "user=ann")
    }

    /// An endpoint that declares `EndpointBehaviors` brings its behaviors to every request it
    /// makes, after the client's; one that declares both protocols gets both.
    enum AdminAPI: Endpoint, EndpointBehaviors, EndpointExclusions {
        case users, audit
        var path: String { self == .users ? "/admin/users" : "/admin/audit" }
        var behaviors: [any RequestBehavior] { [HeadersBehavior(["X-Admin": "1"])] }
        var exclusions: [BehaviorExclusion] { self == .audit ? [.named("auth")] : [] }
    }

    /// Named like the protocol's property, on an endpoint that does not declare it: an ordinary
    /// property, which nothing reads (Endpoint's documented rule).
    enum UndeclaredAPI: Endpoint {
        case users
        var path: String { "/users" }
        var behaviors: [any RequestBehavior] { [HeadersBehavior(["X-Admin": "1"])] }
    }

    @Test func declaredEndpointBehaviorsAndExclusionsApply() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/admin/users", reply: .status(204))
        mock.stub(.get, "/admin/audit", reply: .status(204))
        mock.stub(.get, "/users", reply: .status(204))
        let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:1")!, transport: mock) { Auth() }

        try await client.send(AdminAPI.users)
        try await client.send(AdminAPI.audit)
        try await client.send(UndeclaredAPI.users)

        let sent = mock.requests
        #expect(sent.map { $0.headers["X-Admin"] } == ["1", "1", nil])
        #expect(sent.map { $0.headers["Authorization"] } == ["Bearer t", nil, "Bearer t"])
        #expect(AdminAPI.users.request(as: Data.self).behaviors.map(\.name) == ["HeadersBehavior"])
        #expect(UndeclaredAPI.users.request(as: Data.self).behaviors.isEmpty)
    }
}

/// A view model that depends on the protocol, not the concrete client.
struct MoviesViewModel {
    let client: any NetworkClientProtocol
    func titles() async throws(NetworkError) -> [String] {
        let movies: [Movie] = try await client.get("/movies")
        return movies.map(\.title)
    }
}

/// A fake client implements one method.
struct FakeClient: NetworkClientProtocol {
    let movies: [Movie]
    func send<Output>(_ request: Request<Output>) async throws(NetworkError) -> Output {
        guard request.path == "/movies", let output = movies as? Output else { throw .unacceptableStatus(
            HTTPResponse(status: 404, request: HTTPRequest(url: URL(string: "http://fake")!))) }
        return output
    }
}

@Suite struct FakeClientTests {
    @Test func aViewModelCanBeTestedWithAFakeClient() async throws {
        let model = MoviesViewModel(client: FakeClient(movies: [Movie(id: 1, title: "Alien")]))
        #expect(try await model.titles() == ["Alien"])
    }
}
