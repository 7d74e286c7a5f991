import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Transports share nothing by default: no process-wide cookie jar, no hidden URL cache, no
/// credential storage; a credential set below the pipeline is refused.
@Suite struct SharedStateTests {
    struct Echo: Decodable {
        var headers: [String: String]
    }

    static let transports: [(String, @Sendable () -> URLSessionTransport)] = [
        ("shared", { URLSessionTransport.shared }),
        ("new default", { URLSessionTransport() }),
        ("new ephemeral", { URLSessionTransport(configuration: .ephemeral) }),
    ]

    @Test(arguments: 0..<3)
    func aCookieOneClientReceivedIsNeverSentByAnother(_ index: Int) async throws {
        try await LocalServer.withServer { server in
            let (name, make) = Self.transports[index]
            let alice = NetworkClient(baseURL: server.baseURL, transport: make())
            let bob = NetworkClient(baseURL: server.baseURL, transport: make())
            let secret = "session=alice-\(UUID().uuidString); Path=/"
            _ = try await alice.send(
                Request<Data>(path: "/set-cookie", query: ["cookie": secret]))
            for (who, client) in [("alice", alice), ("bob", bob)] {
                let echo: Echo = try await client.send(Request<Echo>(path: "/echo"))
                #expect(echo.headers["cookie"] == nil, "\(name): \(who) sent a cookie the session kept")
            }
        }
    }

    @Test func noTransportKeepsAProcessWideCookieJarCacheOrCredentialStore() {
        for (name, make) in Self.transports {
            let configuration = make().session.configuration
            #expect(configuration.urlCache == nil, "\(name)")
            #expect(configuration.httpCookieStorage == nil, "\(name)")
            #expect(configuration.httpShouldSetCookies == false, "\(name)")
            #expect(configuration.urlCredentialStorage == nil, "\(name)")
        }
        // The caller's configuration is left as it is.
        let mine = URLSessionConfiguration.default
        _ = URLSessionTransport(configuration: mine)
        #expect(mine.httpCookieStorage != nil)
    }

    @Test(arguments: ["Authorization", "cookie", "X-API-Key"])
    func aCredentialInTheSessionsAdditionalHeadersIsRefused(_ header: String) async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = [header: "session-secret-value", "User-Agent": "fine"]
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9")!, transport: URLSessionTransport(configuration: configuration))
        do {
            _ = try await client.send(Request<Data>(path: "/echo"))
            Issue.record("a session-level \(header) was accepted")
        } catch {
            guard case .invalidRequest = error, let reason = error.reason else {
                Issue.record("expected .invalidRequest, got \(error)")
                return
            }
            #expect(reason.lowercased().contains(header.lowercased()))
            #expect(!"\(error)".contains("session-secret-value"))
        }
    }

    @Test func otherAdditionalHeadersStillArrive() async throws {
        try await LocalServer.withServer { server in
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpAdditionalHeaders = ["X-App-Version": "7"]
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: configuration))
            let echo: Echo = try await client.send(Request<Echo>(path: "/echo"))
            #expect(echo.headers["x-app-version"] == "7")
        }
    }
}
