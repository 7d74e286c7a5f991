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
    /// Counts the attempts (connections) of the requests it is on.
    struct Attempts: RequestModifying {
        actor Count {
            var value = 0
            func add() { value += 1 }
        }
        let count = Count()
        var name: String { "Attempts" }
        func modify(_ request: inout Conveyor.HTTPRequest, context: RequestContext) async throws { await count.add() }
    }

    /// The reconnect rule over AsyncHTTPClient, as `EventStreamReconnectServerTests` checks it on
    /// URLSession: a POST answer without ids is not sent again; a server that keeps closing after
    /// `retry: 0` ends the stream after five connections with `.connectionFailed`.
    @Test func aPostAnswerIsNotSentAgainAndAStormEnds() async throws {
        try await LocalServer.withServer { server in
            let attempts = Attempts()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient),
                configuration: .init(clock: ImmediateClock())
            ) { attempts }
            var seen: [String] = []
            var failure: NetworkError?
            do {
                let answer = Request<Data>(
                    method: .post, path: "/events", query: ["count": 2, "noids": 1],
                    body: .data(Data("{\"prompt\":\"hi\"}".utf8), contentType: "application/json"))
                for try await event in client.events(answer) { seen.append(event.data) }
            } catch let error as NetworkError {
                failure = error
            }
            #expect(seen == ["1", "2"])
            #expect(failure?.name == "notRetryable")
            #expect(await attempts.count.value == 1, "the POST was sent again")

            let storm = Attempts()
            let stormClient = NetworkClient(
                baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient),
                configuration: .init(clock: ImmediateClock())
            ) { storm }
            await #expect {
                for try await _ in stormClient.events(Request<Data>(path: "/events", query: ["empty": 1])) {}
            } throws: { ($0 as? NetworkError)?.name == "connectionFailed" }
            #expect(await storm.count.value == 5)
        }
    }

    /// One timeout model (contract rule 18), as `StreamTimeoutModelTests` checks it on
    /// URLSession: a live stream of 2.4 s lasts one connection whatever the client's per-attempt
    /// timeout (1 s) or the transport's `defaultTimeout` (1 s) say. Before, the transport's
    /// default idle timeout (60 s) or the request's deadline ended it.
    @Test(arguments: [true, false])
    func aLiveStreamIsTimedByItsIdleTimeoutAlone(clientTimeout: Bool) async throws {
        try await LocalServer.withServer { server in
            let attempts = Attempts()
            let client = NetworkClient(
                baseURL: server.baseURL,
                transport: try AsyncHTTPClientTransport(client: sharedHTTPClient, defaultTimeout: .seconds(1)),
                configuration: .init(timeout: clientTimeout ? .seconds(1) : nil)
            ) { attempts }
            var options = EventStreamOptions()
            options.idleTimeout = nil
            options.endMarker = "[DONE]"
            var seen: [String] = []
            for try await event in client.events(
                Request<Data>(path: "/events", query: ["count": 6, "interval": "0.4", "done": 1]), options: options)
            {
                seen.append(event.data)
            }
            #expect(seen == ["1", "2", "3", "4", "5", "6"])
            #expect(await attempts.count.value == 1, "the stream was cut and reconnected")
        }
    }

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
