import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Cookies through real transports: a jar per client, scoped to the client's origin, never set by
/// a redirect target on another origin, and part of the cache's identity.
@Suite struct CookieBehaviorTests {
    func login(_ client: NetworkClient, as who: String) async throws {
        _ = try await client.send(Request<Data>(path: "/set-cookie", query: ["cookie": "session=\(who); Path=/"]))
    }

    func cookie(_ client: NetworkClient, path: String = "/echo") async throws -> String? {
        let echo: Echo = try await client.send(Request<Echo>(path: path))
        return echo.headers["cookie"]
    }

    @Test func eachClientSendsOnlyTheCookiesItsOwnJarReceived() async throws {
        try await LocalServer.withServer { server in
            let alice = NetworkClient(baseURL: server.baseURL) { CookieBehavior() }
            let bob = NetworkClient(baseURL: server.baseURL) { CookieBehavior() }
            let nobody = NetworkClient(baseURL: server.baseURL)
            try await login(alice, as: "alice")
            try await login(bob, as: "bob")
            #expect(try await cookie(alice) == "session=alice")
            #expect(try await cookie(bob) == "session=bob")
            #expect(try await cookie(nobody) == nil)
        }
    }

    @Test func cookiesStayWithTheirOriginAndARedirectTargetCannotSetThem() async throws {
        try await LocalServer.withServer { home in
            try await LocalServer.withServer { other in
                let jar = CookieJar()
                let client = NetworkClient(baseURL: home.baseURL) { CookieBehavior(jar: jar) }
                try await login(client, as: "home")
                // An absolute URL on another origin: no cookie goes, none is taken.
                let elsewhere: Echo = try await client.send(Request<Echo>(path: other.url("/echo").absoluteString))
                #expect(elsewhere.headers["cookie"] == nil)
                _ = try await client.send(
                    Request<Data>(path: other.url("/set-cookie?cookie=stolen%3D1").absoluteString))
                #expect(jar.cookies.map(\.name) == ["session"])
                // A redirect from home to the other origin, which sets a cookie: not kept, and
                // home's cookie was not sent there.
                let target = other.url("/set-cookie?cookie=planted%3D1").absoluteString
                _ = try await client.send(
                    Request<Data>(path: "/redirect", query: ["to": target]))
                #expect(jar.cookies.map(\.name) == ["session"], "\(jar.cookies)")
            }
        }
    }

    /// A body taken as it arrives (a download, a stream) hands its head to the behaviors when the
    /// connection drops after it; after a redirect to another origin, that head carries no
    /// `Set-Cookie` either: a redirect the session follows (a 302) or one the transport follows
    /// itself (a 307 with a body, on Linux), where the head reached `CookieBehavior` whole.
    @Test func aRedirectTargetCannotSetOneInAHeadWhoseBodyBrokeOff() async throws {
        try await LocalServer.withServer { home in
            try await LocalServer.withServer { other in
                let jar = CookieJar()
                let client = NetworkClient(baseURL: home.baseURL) { CookieBehavior(jar: jar) }
                let target = other.url("/fault/truncatedcookie").absoluteString
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("plant-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: file) }
                for status in ["302", "307"] {
                    let request = Request<Void>(
                        method: .post, path: "/redirect", query: ["to": target, "status": status],
                        body: .data(Data("hello".utf8), contentType: "text/plain"))
                    await #expect(throws: NetworkError.self) { try await client.download(request, to: file) }
                    #expect(jar.cookies.isEmpty, "\(status): \(jar.cookies.map(\.name))")
                    await #expect(throws: NetworkError.self) {
                        for try await _ in try await client.stream(request).body {}
                    }
                    #expect(jar.cookies.isEmpty, "\(status): \(jar.cookies.map(\.name))")
                }
                // The same head from its own origin sets it: the test can fail.
                let direct = NetworkClient(baseURL: other.baseURL) { CookieBehavior(jar: jar) }
                await #expect(throws: NetworkError.self) {
                    try await direct.download(Request<Void>(path: "/fault/truncatedcookie"), to: file)
                }
                #expect(jar.cookies.map(\.name) == ["planted"])
            }
        }
    }

    @Test func theCacheNeverServesOneSessionsAnswerToAnother() async throws {
        try await LocalServer.withServer { server in
            let cache = CacheBehavior()
            let aliceJar = CookieJar()
            let bobJar = CookieJar()
            // One cache shared by two clients (one storage), each with its own jar.
            let alice = NetworkClient(baseURL: server.baseURL) { CookieBehavior(jar: aliceJar); cache }
            let bob = NetworkClient(baseURL: server.baseURL) { CookieBehavior(jar: bobJar); cache }
            try await login(alice, as: "alice")
            try await login(bob, as: "bob")
            struct Seen: Decodable { var count: Int; var cookie: String? }
            let me = Request<Seen>(path: "/cache/cookie-me", query: ["cc": "private, max-age=60"])
            let first = try await alice.send(me)
            let again = try await alice.send(me)
            let second = try await bob.send(me)
            #expect(first.cookie == "session=alice")
            #expect(second.cookie == "session=bob", "bob was served alice's answer")
            #expect(again.count == first.count, "alice's own answer should come from the cache (one entry per URL: bob's replaces it)")
        }
    }
}
