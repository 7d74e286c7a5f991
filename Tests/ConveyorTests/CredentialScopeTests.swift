import Conveyor
import ConveyorTesting
import ConveyorTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// contract rule 11: a credential goes only to the origins it is scoped to, and no redirect
/// carries it to another one. Each kind of credential a user can configure is tried, against two
/// real servers on different ports (different origins).
@Suite struct CredentialScopeTests {
    /// A way to attach a credential, and the header it ends up in.
    struct Kind: CustomTestStringConvertible, Sendable {
        let name: String
        let header: String
        let value: String
        let make: @Sendable (_ allowed: [URL]) -> any RequestBehavior
        var testDescription: String { name }
    }

    static let kinds: [Kind] = [
        Kind(name: "bearer token", header: "Authorization", value: "Bearer tok-3f9a-SECRET") { allowed in
            AuthTokenBehavior(tokens: InMemoryTokenStore(token: "tok-3f9a-SECRET"), allowedOrigins: allowed)
        },
        Kind(name: "custom auth header", header: "X-Auth-Token", value: "tok-3f9a-SECRET") { allowed in
            AuthTokenBehavior(
                tokens: InMemoryTokenStore(token: "tok-3f9a-SECRET"), header: .custom("X-Auth-Token"), allowedOrigins: allowed)
        },
        Kind(name: "custom auth header of the user's", header: "X-Session-Ticket", value: "tok-3f9a-SECRET") { allowed in
            AuthTokenBehavior(
                tokens: InMemoryTokenStore(token: "tok-3f9a-SECRET"), header: .custom("X-Session-Ticket"),
                allowedOrigins: allowed)
        },
        Kind(name: "X-API-Key", header: "X-API-Key", value: "apikey-SECRET") { allowed in
            HeadersBehavior(["X-API-Key": "apikey-SECRET"], allowedOrigins: allowed)
        },
        Kind(name: "header marked sensitive", header: "X-Tenant-Secret", value: "pa55-SECRET") { allowed in
            HeadersBehavior(["X-Tenant-Secret": "pa55-SECRET"], sensitive: ["X-Tenant-Secret"], allowedOrigins: allowed)
        },
        Kind(name: "cookie", header: "Cookie", value: "session=cookie-77-SECRET") { allowed in
            HeadersBehavior(["Cookie": "session=cookie-77-SECRET"], allowedOrigins: allowed)
        },
    ]

    func client(_ base: LocalServer, _ kind: Kind, allowed: [URL] = []) -> NetworkClient {
        NetworkClient(baseURL: base.baseURL, transport: URLSessionTransport(configuration: .ephemeral)) {
            kind.make(allowed)
            HeadersBehavior(["X-Public": "visible"])  // not a credential: goes everywhere
        }
    }

    /// Runs `check` for every kind against one pair of servers (a test that starts two servers
    /// per kind adds a dozen processes and sessions to a parallel run, and noise to the memory
    /// tests).
    func forEveryKind(_ check: (Kind, _ origin: LocalServer, _ other: LocalServer) async throws -> Void) async throws {
        try await LocalServer.withServer { origin in
            try await LocalServer.withServer { other in
                for kind in Self.kinds { try await check(kind, origin, other) }
            }
        }
    }

    @Test func aCrossOriginRedirectLeavesEveryKindOfCredentialBehind() async throws {
        try await forEveryKind { kind, origin, other in
            let client = client(origin, kind)
            let away = try await client.send(
                Request<Echo>(path: "/redirect", query: ["to": other.url("/echo").absoluteString]))
            #expect(away.headers["host"] == "127.0.0.1:\(other.port)")
            #expect(away.headers[kind.header.lowercased()] == nil, "\(kind.header) followed the redirect")
            #expect(away.headers["x-public"] == "visible")
            let home = try await client.send(Request<Echo>(path: "/redirect", query: ["to": "/echo"]))
            #expect(home.headers[kind.header.lowercased()] == kind.value)
        }
    }

    @Test func anAbsoluteURLToAnotherOriginGoesWithoutAnyKindOfCredential() async throws {
        try await forEveryKind { kind, origin, other in
            let elsewhere = other.url("/echo?page=2").absoluteString
            let away = try await client(origin, kind).send(Request<Echo>(path: elsewhere))
            #expect(away.headers[kind.header.lowercased()] == nil, "\(kind.header) went to another origin")
            #expect(away.headers["x-public"] == "visible")
            // An absolute URL on the base origin is the base origin.
            let home = try await client(origin, kind).send(Request<Echo>(path: origin.url("/echo").absoluteString))
            #expect(home.headers[kind.header.lowercased()] == kind.value)
            // Listed origins get it.
            let listed = try await client(origin, kind, allowed: [other.baseURL]).send(Request<Echo>(path: elsewhere))
            #expect(listed.headers[kind.header.lowercased()] == kind.value)
        }
    }

    /// Points every request at another origin in `modify`, after the credential behaviors
    /// decided from the caller's URL (a mirror, a region switch gone wrong).
    struct Repoint: RequestModifying {
        let target: URL
        var name: String { "Repoint" }
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
            var components = URLComponents(url: request.url, resolvingAgainstBaseURL: false)
            components?.port = target.port
            if let moved = components?.url { request.url = moved }
        }
    }

    /// The scope is enforced on the request as it is sent. Before: a `modify` hook that moved the
    /// request to another origin carried every credential there (the scope was decided from the
    /// caller's URL, before `modify` ran, and never again).
    @Test func aModifyHookThatChangesTheOriginSendsNoCredentialThere() async throws {
        try await forEveryKind { kind, origin, other in
            let client = NetworkClient(baseURL: origin.baseURL, transport: URLSessionTransport(configuration: .ephemeral)) {
                kind.make([])
                HeadersBehavior(["X-Public": "visible"])
                Repoint(target: other.baseURL)
            }
            let moved = try await client.send(Request<Echo>(path: "/echo", headers: ["Proxy-Authorization": "Basic cHc6cHc="]))
            #expect(moved.headers["host"] == "127.0.0.1:\(other.port)")
            #expect(moved.headers[kind.header.lowercased()] == nil, "\(kind.header) went where modify sent it")
            #expect(moved.headers["proxy-authorization"] == nil, "the caller's own credential went there too")
            #expect(moved.headers["x-public"] == "visible")
            // A hook that keeps the origin keeps the credential.
            let same = NetworkClient(baseURL: origin.baseURL, transport: URLSessionTransport(configuration: .ephemeral)) {
                kind.make([])
                Repoint(target: origin.baseURL)
            }
            let home = try await same.send(Request<Echo>(path: "/echo"))
            #expect(home.headers[kind.header.lowercased()] == kind.value)
        }
    }

    /// An `intercept` member that hands `next` a request for another origin: the same rule.
    @Test func anInterceptMemberThatChangesTheOriginSendsNoCredentialThere() async throws {
        struct Elsewhere: AttemptIntercepting {
            var name: String { "Elsewhere" }
            func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
                -> HTTPResponse
            {
                var moved = request
                moved.url = URL(string: "https://mirror.example/echo")!
                return try await next(moved)
            }
        }
        let mock = MockTransport()
        mock.stub(.get, "/echo", reply: .rawJSON("{}"))
        let client = NetworkClient(baseURL: URL(string: "https://api.example")!, transport: mock) {
            AuthTokenBehavior(tokens: InMemoryTokenStore(token: "tok-3f9a-SECRET"))
            Elsewhere()
        }
        _ = try await client.send(Request<Data>(path: "/echo"))
        #expect(mock.requests.first?.url.host == "mirror.example")
        #expect(mock.requests.first?.headers["Authorization"] == nil)
    }

    /// A name a user adds is sensitive for that client's requests only: the transport sees it on
    /// every request (to strip it on a cross-origin redirect), the request's renderings hide it,
    /// and another client, which did not add it, is unchanged (no process-wide list).
    @Test func aUserCanAddASensitiveNameToOneClient() async throws {
        #expect(!SensitiveHeaders.standard.contains("X-Invented-Name"))
        let mock = MockTransport()
        mock.stub(nil, "/x", reply: .status(200))
        let base = URL(string: "https://api.test")!
        let added = NetworkClient(
            baseURL: base, transport: mock, configuration: .init(sensitiveHeaders: .standard.adding(["x-invented-name"])))
        let plain = NetworkClient(baseURL: base, transport: mock)
        let request = Request<Void>(path: "/x", headers: ["X-Invented-Name": "hunter2-SECRET", "Accept": "*/*"])
        try await added.send(request)
        try await plain.send(request)
        let (fromAdded, fromPlain) = (mock.requests[0], mock.requests[1])
        #expect(fromAdded.sensitiveHeaders.contains("X-Invented-Name"))
        #expect(!fromPlain.sensitiveHeaders.contains("X-Invented-Name"))
        var dumped = ""
        dump(fromAdded, to: &dumped)
        #expect(!dumped.contains("hunter2") && dumped.contains("*/*"))
        #expect(!fromAdded.curlCommand().contains("hunter2"))
        // A behavior that declares a name makes it sensitive for its client alone, too.
        let declaring = NetworkClient(baseURL: base, transport: mock) {
            HeadersBehavior(["X-Other-Name": "p4ss-SECRET"], sensitive: ["X-Other-Name"])
        }
        try await declaring.send(Request<Void>(path: "/x"))
        #expect(mock.requests[2].sensitiveHeaders.contains("X-Other-Name"))
        try await plain.send(Request<Void>(path: "/x"))
        #expect(!mock.requests[3].sensitiveHeaders.contains("X-Other-Name"))
    }

    @Test func originsCompareSchemeHostAndDefaultPort() throws {
        let url = { (text: String) in try #require(URL(string: text)) }
        #expect(Origin(try url("https://API.test/v1")) == Origin(try url("https://api.test:443/other")))
        #expect(Origin(try url("http://api.test")) != Origin(try url("https://api.test")))
        #expect(Origin(try url("https://api.test:8443")) != Origin(try url("https://api.test")))
        #expect(Origin(try url("https://api.test.evil.example")) != Origin(try url("https://api.test")))
    }
}
