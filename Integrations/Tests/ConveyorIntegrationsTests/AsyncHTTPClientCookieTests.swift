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
}
