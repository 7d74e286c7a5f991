import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import Foundation
import IntegrationsTestSupport
import Testing

/// `AsyncHTTPClientTransport` keeps no cookies of its own, and a redirect target on another
/// origin cannot set one through `CookieBehavior`.
@Suite struct AsyncHTTPClientCookieTests {
    @Test func cookiesAreOnlyWhatTheClientsJarHoldsAndARedirectTargetCannotPlantOne() async throws {
        try await LocalServer.withServer { home in
            try await LocalServer.withServer { other in
                let jar = CookieJar()
                let client = try ahcClient(home) { CookieBehavior(jar: jar) }
                let plain = try ahcClient(home)
                _ = try await client.send(Request<Data>(path: "/set-cookie", query: ["cookie": "session=home; Path=/"]))
                let sent: Echo = try await client.send(Request<Echo>(path: "/echo"))
                #expect(sent.headers["cookie"] == "session=home")
                let unsent: Echo = try await plain.send(Request<Echo>(path: "/echo"))
                #expect(unsent.headers["cookie"] == nil)
                let target = other.url("/set-cookie?cookie=planted%3D1").absoluteString
                _ = try await client.send(Request<Data>(path: "/redirect", query: ["to": target]))
                #expect(jar.cookies.map(\.name) == ["session"])
            }
        }
    }

    /// A body taken as it arrives (a download, a stream, an event stream) hands its head to the
    /// behaviors when the connection drops after it; after a redirect to another origin, that
    /// head may not carry the target's `Set-Cookie` either (it reached `CookieBehavior` whole,
    /// and the cookie was stored for the origin asked).
    @Test func aRedirectTargetCannotPlantOneInAHeadWhoseBodyBrokeOff() async throws {
        try await LocalServer.withServer { home in
            try await LocalServer.withServer { other in
                let jar = CookieJar()
                let client = try ahcClient(home) { CookieBehavior(jar: jar) }
                let target = other.url("/fault/truncatedcookie").absoluteString
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("plant-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: file) }
                await #expect(throws: NetworkError.self) {
                    try await client.download(Request<Void>(path: "/redirect", query: ["to": target]), to: file)
                }
                #expect(jar.cookies.isEmpty, "\(jar.cookies.map(\.name))")
                await #expect(throws: NetworkError.self) {
                    let stream = try await client.stream(Request<Void>(path: "/redirect", query: ["to": target]))
                    for try await _ in stream.body {}
                }
                #expect(jar.cookies.isEmpty, "\(jar.cookies.map(\.name))")
                // The same head from its own origin sets it: the test can fail.
                let direct = try ahcClient(other) { CookieBehavior(jar: jar) }
                await #expect(throws: NetworkError.self) {
                    try await direct.download(Request<Void>(path: "/fault/truncatedcookie"), to: file)
                }
                #expect(jar.cookies.map(\.name) == ["planted"])
            }
        }
    }
}
