// Runs the "after" code of Docs/Migrating.md and checks that it does what the guide says. The types
// below are this file's own copies of the guide's, and nothing keeps them identical to the text: the
// guide's blocks themselves are type-checked by DocSnippetTests.
import ConveyorTesting
import Foundation
import Testing

protocol Spinning: Sendable {
    func show() async
    func hide() async
}

struct SpinnerBehavior: SendObserving, SuccessObserving, FailureObserving {
    let spinner: any Spinning
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async { await spinner.show() }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { await spinner.hide() }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { await spinner.hide() }
}

struct TenantBehavior: RequestModifying, RetryDeciding {
    let tenant: @Sendable () async -> String
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        request.headers["X-Tenant"] = await tenant()
    }
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        context.attempt < 3 && response?.status == 503 ? .retry(after: .seconds(1)) : .doNotRetry
    }
}

enum GitHub: Endpoint {
    case user(String)
    case createIssue(repo: String, title: String)

    var method: HTTPMethod {
        if case .createIssue = self { .post } else { .get }
    }
    var path: String {
        switch self {
        case .user(let name): "/users/\(name)"
        case .createIssue(let repo, _): "/repos/\(repo)/issues"
        }
    }
    var body: RequestBody {
        if case .createIssue(_, let title) = self { .json(["title": title]) } else { .none }
    }
}

struct User: Codable, Equatable, Sendable { var login: String }

enum Uploads: Endpoint {
    case poster(title: String, file: URL)

    var method: HTTPMethod { .post }
    var path: String { "/posters" }
    var body: RequestBody {
        switch self {
        case .poster(let title, let file):
            var form = MultipartForm()
            form.append(title, name: "title")  // a text field
            form.append(file: file, name: "poster")  // filename and type from the URL
            return .multipart(form)
        }
    }
}

private func upload(_ notes: Data, poster: URL, with client: NetworkClient) async throws(NetworkError) -> Movie {
    try await client.send(Uploads.poster(title: "Heat", file: poster))

    var form = MultipartForm()
    form.append("Heat", name: "title")
    form.append(notes, name: "notes", filename: "notes.json", contentType: "application/json")
    return try await client.send(Request(method: .post, path: "/movies", body: .multipart(form)))
}

actor CountingSpinner: Spinning {
    private(set) var visible = 0
    private(set) var shows = 0
    func show() { visible += 1; shows += 1 }
    func hide() { visible -= 1 }
}

@Suite struct MigratingGuideTests {
    let base = URL(string: "https://api.github.test")!

    @Test func spinnerPluginBecomesABalancedBehavior() async {
        let spinner = CountingSpinner()
        let mock = MockTransport()
        mock.enqueue(.status(200), .status(500))
        let client = NetworkClient(baseURL: base, transport: mock) { SpinnerBehavior(spinner: spinner) }
        try? await client.send(Request<Void>(path: "/a"))
        try? await client.send(Request<Void>(path: "/b"))
        #expect(await spinner.shows == 2)
        #expect(await spinner.visible == 0)
    }

    @Test func adapterAndRetrierBecomeModifyAndRetryDecision() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(503), .status(503), .status(200))
        let clock = ImmediateClock()
        let client = NetworkClient(baseURL: base, transport: mock, configuration: .init(clock: clock)) {
            TenantBehavior(tenant: { "acme" })
        }
        try await client.send(Request<Void>(path: "/x"))
        #expect(mock.requests.map { $0.headers["X-Tenant"] } == ["acme", "acme", "acme"])
        #expect(clock.sleeps == [.seconds(1), .seconds(1)])
    }

    @Test func authenticationInterceptorBecomesAuthTokenBehavior() async throws {
        let store = InMemoryTokenStore(token: "old") { _ in "new" }
        let mock = MockTransport()
        mock.stub(nil, "/user", reply: .handler { $0.headers["Authorization"] == "Bearer new" ? .json(User(login: "octocat")) : .status(401) })
        let client = NetworkClient(baseURL: base, transport: mock) { AuthTokenBehavior(tokens: store, refresher: store) }
        let user: User = try await client.get("/user")
        #expect(user == User(login: "octocat"))
    }

    @Test func targetTypeBecomesEndpointAndErrorsAreOneEnum() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/users/octocat", reply: .json(User(login: "octocat")))
        mock.stub(.post, "/repos/apple/swift/issues", reply: .status(201))
        mock.stub(.get, "/users/ghost", reply: .status(404))
        let client = NetworkClient(baseURL: base, transport: mock)
        let user: User = try await client.send(GitHub.user("octocat"))
        #expect(user.login == "octocat")
        try await client.send(GitHub.createIssue(repo: "apple/swift", title: "Bug"))
        #expect(try mock.requests[1].decodedBody(as: [String: String].self) == ["title": "Bug"])

        var caught = ""
        do {
            let _: User = try await client.send(GitHub.user("ghost"))
        } catch .notFound {
            caught = "notFound"
        } catch {
            switch error {
            case .decodingFailed: caught = "decodingFailed \(error.response?.body.count ?? 0)"
            default: caught = "\(error)"
            }
        }
        #expect(caught == "notFound")
    }

    @Test func multipartFormDataBecomesAMultipartForm() async throws {
        let poster = FileManager.default.temporaryDirectory.appendingPathComponent("poster-\(UUID()).png")
        try Data("PNG!".utf8).write(to: poster)
        defer { try? FileManager.default.removeItem(at: poster) }
        let mock = MockTransport()
        mock.enqueue(.status(201), .json(Movie(id: 7, title: "Heat")))
        let client = NetworkClient(baseURL: base, transport: mock)

        let movie = try await upload(Data("{}".utf8), poster: poster, with: client)

        #expect(movie == Movie(id: 7, title: "Heat"))
        #expect(mock.requests.map(\.url.path) == ["/posters", "/movies"])
        let bodies = mock.requests.map { String(decoding: $0.body ?? Data(), as: UTF8.self) }
        for (request, body) in zip(mock.requests, bodies) {
            let type = try #require(request.headers["Content-Type"])
            #expect(type.hasPrefix("multipart/form-data; boundary=conveyor-"))
            #expect(body.hasSuffix("\r\n--\(type.dropFirst("multipart/form-data; boundary=".count))--\r\n"))
        }
        #expect(bodies[0].contains("name=\"poster\"; filename=\"\(poster.lastPathComponent)\"\r\nContent-Type: image/png\r\n\r\nPNG!\r\n"))
        #expect(bodies[1].contains("name=\"notes\"; filename=\"notes.json\"\r\nContent-Type: application/json\r\n\r\n{}\r\n"))
    }
}
