import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorTesting
import Foundation
import IntegrationsTestSupport
import Testing

/// Event streams over AsyncHTTPClient against the local server, as the root package's
/// `EventStreamTests` runs them over URLSession: 300 numbered events over about a hundred
/// connections that drop at random bytes, with a token that expires half-way.
@Suite struct AsyncHTTPClientEventStreamTests {
    @Test(arguments: [UInt64(4), 5])
    func survivesAHundredDropsAndOneRefresh(seed: UInt64) async throws {
        try await LocalServer.withServer { server in
            let refreshes = Refreshes()
            let store = InMemoryTokenStore(token: "t") { _ in
                await refreshes.count()
                return "t2"
            }
            let recorder = HookRecorder()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient),
                configuration: .init(clock: ImmediateClock())
            ) {
                RecordingBehavior("R", recorder: recorder)
                AuthTokenBehavior(tokens: store, refresher: store)
            }
            let request = Request<Data>(path: "/events", query: ["count": 300, "seed": Int(seed), "token": "t", "rotate_at": 150])
            var numbers: [Int] = []
            for try await event in client.events(request) {
                numbers.append(Int(event.data) ?? -1)
                #expect(event.id == event.data)
            }
            #expect(numbers == Array(1...300), "seed \(seed)")
            #expect(await refreshes.total == 1)
            #expect(recorder.events.filter { $0.hook == .modify }.count >= 100)
            #expect(recorder.hooks(of: "R").filter { $0 == .beforeSend }.count == 1)
            #expect(recorder.hooks(of: "R").filter { $0 == .afterSuccess }.count == 1)
            #expect(recorder.hooks(of: "R").filter { $0 == .afterFailure }.isEmpty)
        }
    }

    /// The server as a sticky load balancer (a reconnect without the cookie its streams set is
    /// refused): the cookie of a connection that dropped after its head goes with the reconnect.
    @Test func aCookieSetByADroppedConnectionGoesWithTheReconnect() async throws {
        try await LocalServer.withServer { server in
            let jar = CookieJar()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient),
                configuration: .init(clock: ImmediateClock())
            ) {
                CookieBehavior(jar: jar)
            }
            let request = Request<Data>(path: "/events", query: ["count": 40, "seed": 9, "sticky": 1])
            var numbers: [Int] = []
            for try await event in client.events(request) { numbers.append(Int(event.data) ?? -1) }
            #expect(numbers == Array(1...40))
            #expect(jar.header(for: server.baseURL.appendingPathComponent("events")) == "node=a")
        }
    }
}

/// Counts the token refreshes.
actor Refreshes {
    var total = 0
    func count() { total += 1 }
}
