import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import Foundation
import IntegrationsTestSupport
import Testing

/// One `HTTPClient` for the whole suite, shut down by nobody: the process ends with the tests.
/// (A client per test would cost an event-loop group's threads each.)
let sharedHTTPClient = HTTPClient(
    eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())

func ahcClient(
    _ server: LocalServer, timeout: Duration? = nil, maximumRedirects: Int = 10, maxResponseSize: Int? = 64 << 20,
    sensitiveHeaders: SensitiveHeaders = .standard,
    @RequestBehaviorBuilder behaviors: () -> [any RequestBehavior] = { [] }
) throws -> NetworkClient {
    NetworkClient(
        baseURL: server.baseURL,
        transport: try AsyncHTTPClientTransport(client: sharedHTTPClient, maximumRedirects: maximumRedirects),
        configuration: .init(timeout: timeout, maxResponseSize: maxResponseSize, sensitiveHeaders: sensitiveHeaders),
        behaviors: behaviors)
}

struct Echo: Decodable, Sendable {
    let method: String
    let path: String
    let headers: [String: String]
    let body: String
}

/// Signals when a request is about to be sent.
struct SignalBeforeSend: SendObserving {
    let signal: AsyncStream<Void>.Continuation
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async { signal.yield() }
}

@Suite struct AsyncHTTPClientTransportTests {
    @Test func aClientThatFollowsRedirectsItselfIsRefusedWithTheFix() throws {
        let following = HTTPClient(eventLoopGroupProvider: .singleton)  // follows redirects by default
        defer { try? following.syncShutdown() }
        do {
            _ = try AsyncHTTPClientTransport(client: following)
            Issue.record("expected a SetupError")
        } catch {
            #expect(error.description.contains("redirectConfiguration: .disallow"))
        }
        #expect(throws: Never.self) { try AsyncHTTPClientTransport(client: sharedHTTPClient) }
    }

    @Test func methodsHeadersAndBodiesRoundTrip() async throws {
        try await LocalServer.withServer { server in
            let client = try ahcClient(server)
            var request = Request<Echo>(method: .put, path: "/echo", body: .data(Data("häy".utf8), contentType: "text/plain"))
            request.headers.add(name: "X-Twice", value: "a")
            request.headers.add(name: "X-Twice", value: "b")
            let echo = try await client.send(request)
            #expect(echo.method == "PUT")
            #expect(echo.body == "häy")
            #expect(echo.headers["x-twice"] == "a, b")
            #expect(echo.headers["content-type"] == "text/plain")

            let response = try await client.send(Request<HTTPResponse>(path: "/text"))
            #expect(String(decoding: response.body, as: UTF8.self) == "héllo wörld")
            #expect(response.headers["content-type"] == "text/plain; charset=utf-8")
            let bytes = try await client.send(Request<Data>(path: "/bytes", query: ["count": 300_000]))
            #expect(bytes == Data((0..<300_000).map { UInt8($0 % 256) }))
        }
    }

    @Test func statusesComeBackAsTheClientsErrors() async throws {
        try await LocalServer.withServer { server in
            let client = try ahcClient(server)
            await #expect(throws: NetworkError.notFound) {
                try await client.send(Request<Void>(path: "/status/404"))
            }
            let empty = try await client.send(Request<HTTPResponse>(path: "/empty"))
            #expect(empty.status == 204 && empty.body.isEmpty)
        }
    }

    @Test func aSubSecondTimeoutEndsASlowRequest() async throws {
        try await LocalServer.withServer { server in
            let client = try ahcClient(server, timeout: .milliseconds(300))
            let start = ContinuousClock.now
            await #expect(throws: NetworkError.timedOut) {
                try await client.send(Request<Void>(path: "/slow", query: ["seconds": 120]))
            }
            let elapsed = ContinuousClock.now - start
            // Fired at the timeout, long before the server's 120 s answer (half of it is the bound:
            // a loaded 2-core CI machine has delayed a 300 ms timer by 10 s of wall time).
            #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(60), "took \(elapsed)")
        }
    }

    @Test func theTransportsOwnDeadlineEndsAnAttemptWithoutAClientTimeout() async throws {
        try await LocalServer.withServer { server in
            let transport = try AsyncHTTPClientTransport(client: sharedHTTPClient, defaultTimeout: .milliseconds(300))
            let request = HTTPRequest(url: server.url("/fault/stall"))
            await #expect(throws: NetworkError.timedOut) { try await transport.send(request) }
        }
    }

    /// Without a request timeout, `defaultTimeout` is an idle timeout (as `URLSession`'s), not a
    /// deadline for the whole attempt: a body that keeps coming takes as long as it takes, in a
    /// response or a download; a silence longer than it ends the attempt.
    @Test func withoutARequestTimeoutTheDefaultIsAnIdleTimeout() async throws {
        try await LocalServer.withServer { server in
            let transport = try AsyncHTTPClientTransport(client: sharedHTTPClient, defaultTimeout: .milliseconds(700))
            // 24 bytes 100 ms apart: 2.4 s in all, never 700 ms without a byte.
            let steady = try await transport.send(HTTPRequest(url: server.url("/trickle?bytes=24&interval=0.1&head=0")))
            #expect(steady.body == Data(repeating: UInt8(ascii: "x"), count: 24))

            let client = NetworkClient(baseURL: server.baseURL, transport: transport)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("idle-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: file) }
            let request = Request<Void>(path: "/trickle", query: ["bytes": 24, "interval": "0.1", "head": 0])
            _ = try await client.download(request, to: file)
            #expect(try Data(contentsOf: file) == Data(repeating: UInt8(ascii: "x"), count: 24))

            // The head, one byte, then 5 s of silence.
            let start = ContinuousClock.now
            await #expect(throws: NetworkError.timedOut) {
                try await transport.send(HTTPRequest(url: server.url("/trickle?bytes=3&interval=5&head=0")))
            }
            #expect(ContinuousClock.now - start < .seconds(4.5), "took \(ContinuousClock.now - start)")
        }
    }

    @Test func cancellingEndsTheCallAtOnce() async throws {
        try await LocalServer.withServer { server in
            let (sent, signal) = AsyncStream<Void>.makeStream()
            let client = try ahcClient(server) { SignalBeforeSend(signal: signal) }
            let task = Task { try await client.send(Request<Void>(path: "/slow", query: ["seconds": 120])) }
            for await _ in sent { break }
            let start = ContinuousClock.now
            task.cancel()
            let result = await task.result
            #expect(ContinuousClock.now - start < .seconds(60))  // the server answers after 120 s
            #expect(throws: NetworkError.cancelled) { try result.get() }
        }
    }

    @Test func aGigabyteBodyStopsAtTheLimit() async throws {
        try await LocalServer.withServer { server in
            let client = try ahcClient(server, maxResponseSize: 8 << 20)
            await #expect(throws: NetworkError.responseTooLarge(limit: 8 << 20)) {
                try await client.send(Request<Data>(path: "/stream"))
            }
        }
    }

    @Test func aConnectionRefusedIsAConnectionFailure() async throws {
        let server = try await LocalServer.start()
        let url = server.baseURL
        await server.stopAndWait()
        let transport = try AsyncHTTPClientTransport(client: sharedHTTPClient, defaultTimeout: .seconds(20))
        let start = ContinuousClock.now
        do {
            _ = try await transport.send(HTTPRequest(url: url.appendingPathComponent("echo")))
            Issue.record("expected an error")
        } catch let error as NetworkError {
            guard case .connectionFailed = error else {
                Issue.record("expected connectionFailed, got \(error) after \(ContinuousClock.now - start)")
                return
            }
        }
        // Not after AsyncHTTPClient's connect timeout (10 s) of retried attempts: the bound sits
        // just under it, leaving room for a loaded machine.
        #expect(ContinuousClock.now - start < .seconds(9))
    }

    /// AsyncHTTPClient fails a request made after the client shut down without calling its
    /// delegate: the transport notices that the delegate was let go of, and watches the task.
    @Test func aRequestAfterTheClientShutDownFailsAtOnce() async throws {
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())
        try await http.shutdown()
        let transport = try AsyncHTTPClientTransport(client: http)
        let url = URL(string: "http://127.0.0.1:9/echo")!
        var upload = HTTPRequest(method: .post, url: url)
        upload.body = Data("body".utf8)
        for request in [HTTPRequest(url: url), upload] {
            let ended = await withinTimeLimit(seconds: hangBound) { () -> NetworkError? in
                do {
                    _ = try await transport.send(request)
                    return nil
                } catch {
                    return error as? NetworkError
                }
            }
            guard case .transportFailed? = ended ?? nil else {
                Issue.record("\(request.method): expected transportFailed, got \(String(describing: ended))")
                continue
            }
        }
    }

    @Test func serverFaultsAreErrorsNotTruncatedSuccesses() async throws {
        try await LocalServer.withServer { server in
            let transport = try AsyncHTTPClientTransport(client: sharedHTTPClient, defaultTimeout: .seconds(20))
            for fault in ["truncated", "midheaders", "garbage"] {
                do {
                    let response = try await transport.send(HTTPRequest(url: server.url("/fault/\(fault)")))
                    Issue.record("\(fault): expected an error, got \(response)")
                } catch let error as NetworkError {
                    switch error {
                    case .connectionFailed, .transportFailed: break
                    default: Issue.record("\(fault): unexpected \(error)")
                    }
                }
            }
        }
    }

    @Test func redirectsAreCappedAndCrossOriginOnesLoseEveryCredential() async throws {
        try await LocalServer.withServer { server in
            try await LocalServer.withServer { other in
                let client = try ahcClient(
                    server, maximumRedirects: 3, sensitiveHeaders: .standard.adding(["X-Integrations-Secret"]))
                await #expect(throws: NetworkError.tooManyRedirects) { try await client.send(Request<Void>(path: "/loop")) }

                var request = Request<Echo>(path: "/redirect", query: ["to": other.url("/echo").absoluteString, "status": 307])
                request.method = .post
                request.body = .data(Data("kept".utf8), contentType: "text/plain")
                for (name, value) in [
                    ("Authorization", "Bearer tok-3f9a-SECRET"), ("Cookie", "cookie-77-SECRET"),
                    ("X-API-Key", "apikey-SECRET"), ("X-Integrations-Secret", "real-SECRET"), ("X-Plain", "visible"),
                ] {
                    request.headers[name] = value
                }
                let crossOrigin = try await client.send(request)
                #expect(crossOrigin.method == "POST" && crossOrigin.body == "kept")
                #expect(crossOrigin.headers["x-plain"] == "visible")
                for name in ["authorization", "cookie", "x-api-key", "x-integrations-secret"] {
                    #expect(crossOrigin.headers[name] == nil, "\(name) reached another origin")
                }

                request.query = ["to": "/echo", "status": 303]
                let sameOrigin = try await client.send(request)
                #expect(sameOrigin.method == "GET" && sameOrigin.body.isEmpty)
                #expect(sameOrigin.headers["authorization"] == "Bearer tok-3f9a-SECRET")
            }
        }
    }

    @Test func aCancellationStormFinishesEveryRequest() async throws {
        let watchdog = Watchdog(seconds: 240, "the AsyncHTTPClient cancellation storm")
        defer { watchdog.disarm() }
        try await LocalServer.withServer { server in
            let client = try ahcClient(server, timeout: .seconds(60))
            var generator = SplitMix64(state: 0x5EED)
            let outcomes = await withTaskGroup(of: String.self) { group in
                for index in 0..<300 {
                    let cancelAfter = Int(generator.next() % 600)
                    // Fast, streaming and slow answers, so cancellations race with every stage.
                    let path = ["/echo", "/bytes?count=200000", "/slow?seconds=\(0.1 * Double(index % 4))"][index % 3]
                    let task = Task { () -> String in
                        do throws(NetworkError) {
                            _ = try await client.send(Request<Data>(path: path))
                            return "success"
                        } catch .cancelled {
                            return "cancelled"
                        } catch {
                            return "unexpected \(error)"
                        }
                    }
                    // Cancellation arrives from another thread at a random moment, as it does
                    // when a user leaves a screen.
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(cancelAfter)) { task.cancel() }
                    group.addTask { await task.value }
                }
                return await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(outcomes.count == 300)
            #expect(outcomes.allSatisfy { $0 == "success" || $0 == "cancelled" }, "\(Set(outcomes))")
            print("STORM AsyncHTTPClient: \(outcomes.filter { $0 == "success" }.count) succeeded, \(outcomes.filter { $0 == "cancelled" }.count) cancelled")
            #expect(outcomes.contains("cancelled"))
        }
    }
}
