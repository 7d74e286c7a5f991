@testable import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One timeout model (contract rule 18): an event stream is timed by its idle timeout alone, on
/// the client's clock, on every transport; the request's per-attempt timeout and a transport's
/// default (FoundationNetworking's 60 s) never end it. Before: `idleTimeout = nil` with a client
/// timeout of 1 s cut every connection at 1 s, and URLSession cut a quiet-but-alive stream at
/// 60 s whatever `idleTimeout` said (it set no `timeoutInterval` for a request without a timeout).
@Suite struct StreamTimeoutModelTests {
    /// Counts the attempts (connections) of the requests it is on.
    struct Attempts: RequestModifying {
        let count = Locked(0)
        var name: String { "Attempts" }
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws { count.withLock { $0 += 1 } }
    }

    @Test func anEngineTimedAttemptGetsNoURLSessionTimeoutOfItsOwn() {
        var request = HTTPRequest(method: .get, url: URL(string: "http://127.0.0.1:9/s")!)
        request.timeout = .seconds(1)
        #expect(ConveyorClientSend.urlRequest(for: request, timesOutWhenIdle: true).timeoutInterval >= 365 * 24 * 3600)
        #expect(ConveyorClientSend.urlRequest(for: request).timeoutInterval == 2)  // the backstop: 1 s + 1
        request.timeout = nil
        #expect(ConveyorClientSend.urlRequest(for: request, timesOutWhenIdle: true).timeoutInterval > 60)
    }

    /// A stream that lasts 2.4 s, an event every 0.4 s, behind a client whose per-attempt timeout
    /// is 1 s: one connection with no idle limit, and one with an idle limit of 30 s (far above the
    /// 0.4 s between events even under the thread sanitizer, where a 3 s limit was once passed).
    @Test(arguments: [nil, Duration.seconds(30)])
    func aLiveStreamOutlastsTheClientsTimeoutOnOneConnection(idle: Duration?) async throws {
        try await LocalServer.withServer { server in
            let attempts = Attempts()
            // A 1 s total timeout too: an event stream has none (its idle timeout applies).
            var configuration = NetworkClient.Configuration(timeout: .seconds(1))
            configuration.totalTimeout = .seconds(1)
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(), configuration: configuration
            ) { attempts }
            var options = EventStreamOptions()
            options.idleTimeout = idle
            options.endMarker = "[DONE]"
            var seen: [String] = []
            for try await event in client.events(
                Request<Data>(path: "/events", query: ["count": 6, "interval": "0.4", "done": 1]), options: options)
            {
                seen.append(event.data)
            }
            #expect(seen == ["1", "2", "3", "4", "5", "6"])
            #expect(attempts.count.withLock { $0 } == 1, "the stream was cut and reconnected")
        }
    }
}

/// The reconnect rule against the local server over URLSession (AsyncHTTPClient:
/// `AsyncHTTPClientEventStreamTests`): a POST answer without ids that the server ends is not
/// sent again, and a server that keeps closing after `retry: 0` ends the stream after
/// `maxConsecutiveFailures` connections with `.connectionFailed` (FoundationNetworking's empty
/// reply, `URLError(.badServerResponse)`, included).
@Suite struct EventStreamReconnectServerTests {
    @Test func aPostAnswerIsNotSentAgainAndAStormEnds() async throws {
        try await LocalServer.withServer { server in
            let attempts = StreamTimeoutModelTests.Attempts()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(), configuration: .init(clock: ImmediateClock())
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
            #expect(attempts.count.withLock { $0 } == 1, "the POST was sent again")

            let storm = StreamTimeoutModelTests.Attempts()
            let stormClient = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(), configuration: .init(clock: ImmediateClock())
            ) { storm }
            await #expect {
                for try await _ in stormClient.events(Request<Data>(path: "/events", query: ["empty": 1])) {}
            } throws: { ($0 as? NetworkError)?.name == "connectionFailed" }
            #expect(storm.count.withLock { $0 } == 5)
        }
    }
}
