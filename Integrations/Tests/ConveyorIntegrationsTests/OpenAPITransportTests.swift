import Conveyor
import ConveyorAsyncHTTPClient
@testable import ConveyorOpenAPI
import ConveyorTesting
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import IntegrationsTestSupport
import OpenAPIRuntime
import Testing
import TestServerAPI

/// The client swift-openapi-generator wrote from Sources/TestServerAPI/openapi.yaml, sent through
/// Conveyor (`ConveyorTransport`) against the local test server.
@Suite(.timeLimit(.minutes(2))) struct OpenAPITransportTests {
    enum Kind: String, CaseIterable, Sendable { case urlSession, asyncHTTPClient }

    static func conveyor(
        _ server: LocalServer, over kind: Kind = .urlSession, clock: ImmediateClock = ImmediateClock(),
        @RequestBehaviorBuilder behaviors: () -> [any RequestBehavior] = { [] }
    ) throws -> NetworkClient {
        let transport: any HTTPTransport =
            kind == .urlSession
            ? URLSessionTransport(configuration: .ephemeral) : try AsyncHTTPClientTransport(client: sharedHTTPClient)
        return NetworkClient(
            baseURL: server.baseURL, transport: transport, configuration: .init(clock: clock), behaviors: behaviors)
    }

    static func api(
        _ conveyor: NetworkClient, operations: [String: OperationOptions] = [:], revealing: Set<String> = [],
        middlewares: [any ClientMiddleware] = []
    ) -> Client {
        Client(
            serverURL: conveyor.baseURL,
            transport: ConveyorTransport(client: conveyor, operations: operations, revealingResponseHeaders: revealing),
            middlewares: middlewares)
    }

    /// A unique name per test run, so server-side counters start at zero.
    static func unique(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8))" }

    /// Counts refreshes and hands out `valid`.
    final class Refreshes: Sendable {
        let count = Box(0)
        func refresh() -> String {
            count.withLock { $0 += 1 }
            return "valid"
        }
    }

    @Test func a401IsRefreshedOnceAndTheGeneratedClientGetsTheDocumented200() async throws {
        try await LocalServer.withServer { server in
            let refreshes = Refreshes()
            let store = InMemoryTokenStore(token: "expired") { _ in refreshes.refresh() }
            let api = Self.api(try Self.conveyor(server) { AuthTokenBehavior(tokens: store, refresher: store) })
            let output = try await api.checkAuth(query: .init(token: "valid"))
            #expect(try output.ok.body.json.ok == true)
            #expect(refreshes.count.withLock { $0 } == 1)
        }
    }

    @Test func a401ThatRefreshingCannotFixIsTheDocumentedCaseNotAThrow() async throws {
        try await LocalServer.withServer { server in
            let store = InMemoryTokenStore(token: "expired") { _ in "still-wrong" }
            let api = Self.api(try Self.conveyor(server) { AuthTokenBehavior(tokens: store, refresher: store) })
            let output = try await api.checkAuth(query: .init(token: "valid"))
            #expect(try output.unauthorized.body.json.ok == false)
        }
    }

    @Test(arguments: Kind.allCases)
    func a503IsRetriedAfterItsRetryAfterAndMiddlewaresRunOnce(kind: Kind) async throws {
        try await LocalServer.withServer { server in
            let clock = ImmediateClock()
            let recorder = HookRecorder()
            let middleware = CountingMiddleware()
            let spy = HeaderSpy()
            let conveyor = try Self.conveyor(server, over: kind, clock: clock) {
                RetryBehavior(.exponentialBackoff(maxAttempts: 4, jitter: .none))
                RecordingBehavior("inner", recorder: recorder)
                spy
            }
            let api = Self.api(conveyor, middlewares: [middleware])
            let name = Self.unique("oapi-flaky")
            let output = try await api.getFlaky(
                path: .init(name: name), query: .init(failures: 2, status: 503, retryAfter: "3"))
            #expect(try output.ok.body.json.attempts == 3)
            #expect(clock.sleeps == [.seconds(3), .seconds(3)])  // the server's Retry-After
            #expect(middleware.calls.withLock { $0 } == 1)  // a retry never runs a middleware again
            #expect(recorder.hooks(of: "inner").filter { $0 == .beforeSend }.count == 1)
            #expect(recorder.hooks(of: "inner").filter { $0 == .additionalHeaders }.count == 3)
            // Each attempt carried what the middleware added.
            #expect(spy.values.withLock { $0 } == ["1", "1", "1"])
        }
    }

    @Test func aCachedOperationIsAnsweredWithoutTheServer() async throws {
        try await LocalServer.withServer { server in
            let api = Self.api(try Self.conveyor(server) { CacheBehavior() })
            let name = Self.unique("oapi-cache")
            for _ in 0..<3 {
                let output = try await api.getCached(path: .init(name: name), query: .init(cc: "max-age=60"))
                #expect(try output.ok.body.json.count == 1)
            }
            let count = try await api.getCacheCount(path: .init(name: name))
            #expect(try count.ok.body.json.count == 1)
        }
    }

    @Test func oneOperationOptsOutOfAuthAnotherAddsABehaviorAndEveryBehaviorSeesTheOperation() async throws {
        try await LocalServer.withServer { server in
            let seen = Box<[String]>([])
            let conveyor = try Self.conveyor(server) {
                OperationReader(seen: seen)
                AuthTokenBehavior(tokens: InMemoryTokenStore(token: "valid"))
            }
            let api = Self.api(
                conveyor,
                operations: [
                    Operations.echo.id: OperationOptions(
                        behaviors: [HeadersBehavior(["X-Operation-Extra": "yes"])],
                        exclusions: [.type(AuthTokenBehavior.self)])
                ])
            let echo = try await api.echo(body: .json(.init(message: "hi"))).ok.body.json
            #expect(echo.headers.additionalProperties["authorization"] == nil)
            #expect(echo.headers.additionalProperties["x-operation-extra"] == "yes")
            #expect(echo.method == "POST")
            #expect(echo.body.contains("\"message\""))
            let auth = try await api.checkAuth(query: .init(token: "valid"))
            #expect(try auth.ok.body.json.ok == true)
            #expect(seen.withLock { $0 } == ["echo", "checkAuth"])
        }
    }

    @Test func aServerURLOtherThanTheClientsBaseURLIsUsedAsWritten() async throws {
        try await LocalServer.withServer { server in
            let conveyor = try Self.conveyor(server) { AuthTokenBehavior(tokens: InMemoryTokenStore(token: "valid")) }
            // The same origin, written with a trailing slash: the URL is built from it, not from
            // the client's base URL, and the token still goes (same origin).
            let slashed = try #require(URL(string: server.baseURL.absoluteString + "/"))
            #expect(slashed != conveyor.baseURL)
            let api = Client(serverURL: slashed, transport: ConveyorTransport(client: conveyor))
            let echo = try await api.echo(body: .json(.init(message: "hi"))).ok.body.json
            #expect(echo.path == "/echo")
            #expect(echo.headers.additionalProperties["authorization"] == "Bearer valid")
        }
    }

    @Test func anUndocumentedStatusIsReturnedNotThrown() async throws {
        try await LocalServer.withServer { server in
            let api = Self.api(try Self.conveyor(server))
            let output = try await api.getStatus(path: .init(code: 418))
            guard case .undocumented(let status, let payload) = output else {
                Issue.record("expected undocumented, got \(output)")
                return
            }
            #expect(status == 418)
            let body = try await String(collecting: #require(payload.body), upTo: 1024)
            #expect(body.contains("418"))
        }
    }

    @Test(arguments: Kind.allCases)
    func aBinaryResponseStreamsWithItsLength(kind: Kind) async throws {
        try await LocalServer.withServer { server in
            let recorder = HookRecorder()
            let api = Self.api(try Self.conveyor(server, over: kind) { RecordingBehavior("r", recorder: recorder) })
            let size = 24 << 20
            let body = try await api.downloadBytes(query: .init(bytes: Int64(size))).ok.body.binary
            #expect(body.length == .known(Int64(size)))
            #expect(body.iterationBehavior == .single)
            var count = 0
            var chunks = 0
            var wrong = 0
            var outcomeWhileReading: [RequestHook] = []
            for try await chunk in body {
                if chunks == 0 { outcomeWhileReading = recorder.hooks(of: "r").filter { $0 == .afterSuccess } }
                for byte in chunk where byte != 0 { wrong += 1 }
                count += chunk.count
                chunks += 1
            }
            #expect(count == size)
            #expect(wrong == 0)
            #expect(chunks > 1)
            // The generated call returned before the body ended: it was not buffered first.
            #expect(outcomeWhileReading.isEmpty)
            try await waitFor { recorder.hooks(of: "r").contains(.afterSuccess) }
        }
    }

    @Test(arguments: Kind.allCases)
    func anUploadStreamsWithAndWithoutALength(kind: Kind) async throws {
        try await LocalServer.withServer { server in
            let api = Self.api(try Self.conveyor(server, over: kind))
            let chunk = [UInt8](repeating: 7, count: 64 << 10)
            let count = 64
            let digest = "c756100d738b97b9535069044e02c5a92cb0f62c4aecd7a92016feb1192d2f6f"  // 4 MiB of 0x07
            for known in [true, false] {
                let (stream, continuation) = AsyncStream<HTTPBody.ByteChunk>.makeStream()
                let feeder = Task {
                    for _ in 0..<count { continuation.yield(chunk[...]) }
                    continuation.finish()
                }
                let body = HTTPBody(
                    stream, length: known ? .known(Int64(count * chunk.count)) : .unknown, iterationBehavior: .single)
                let result = try await api.uploadBytes(query: .init(key: nil), body: .binary(body)).ok.body.json
                await feeder.value
                #expect(result.bytes == Int64(count * chunk.count))
                #expect(result.sha256 == digest)
                // URLSession uploads a body of unknown length from a temporary copy, with its length.
                #expect(result.chunked == (!known && kind == .asyncHTTPClient))
                #expect(result.contentType == "application/octet-stream")
            }
        }
    }

    @Test func cancellingAWaitingCallEndsItWithCancelledAndBalancedHooks() async throws {
        try await LocalServer.withServer { server in
            let recorder = HookRecorder()
            let conveyor = try Self.conveyor(server) { RecordingBehavior("r", recorder: recorder) }
            let api = Self.api(conveyor)
            let name = Self.unique("oapi-held")
            let call = Task { try await api.getHeld(path: .init(name: name)) }
            // Wait (bounded) until the server holds the request.
            let plain = try Self.conveyor(server)
            try await waitFor {
                let hits: Components.Schemas.Hits? = try? await plain.get("/held/\(name)/hits")
                return (hits?.hits ?? 0) >= 1
            }
            call.cancel()
            let result = await call.result
            _ = try await Self.api(plain).releaseHeld(path: .init(name: name))
            guard case .failure(let error) = result else {
                Issue.record("a cancelled call succeeded")
                return
            }
            let underlying = (error as? ClientError)?.underlyingError ?? error
            #expect((underlying as? NetworkError)?.name == "cancelled")
            try await waitFor { recorder.hooks(of: "r").contains(.afterFailure) }
            #expect(recorder.hooks(of: "r").filter { $0 == .beforeSend }.count == 1)
            #expect(recorder.hooks(of: "r").filter { $0 == .afterFailure }.count == 1)
            #expect(!recorder.hooks(of: "r").contains(.afterSuccess))
        }
    }

    @Test func aConnectionFailureIsAClientErrorWrappingTheNetworkError() async throws {
        let conveyor = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:1")!, transport: URLSessionTransport(configuration: .ephemeral))
        let api = Self.api(conveyor)
        do {
            _ = try await api.getStatus(path: .init(code: 200))
            Issue.record("a request to a closed port succeeded")
        } catch let error as ClientError {
            #expect(error.operationID == Operations.getStatus.id)
            #expect((error.underlyingError as? NetworkError)?.name == "connectionFailed")
        }
    }

    @Test func noSecretInAnyRenderingOfTheGeneratedClientsError() async throws {
        try await LocalServer.withServer { server in
            let token = "tok-3f9a-SECRET"
            let conveyor = try Self.conveyor(server) { AuthTokenBehavior(tokens: InMemoryTokenStore(token: token)) }
            // The body lacks the `session` the document promises: decoding fails, and the
            // generated client renders the request and response in its ClientError.
            let api = Self.api(conveyor)
            let renderings = await Self.renderings { try await api.setCookie(query: .init(cookie: "sid=abc")) }
            #expect(!renderings.isEmpty)
            for text in renderings {
                #expect(!text.contains(token))
                #expect(!text.lowercased().contains("set-cookie:"))
                #expect(!text.lowercased().contains("authorization"))
            }
            // Named, a sensitive response header reaches the generated client (and its renderings).
            let revealing = Self.api(conveyor, revealing: ["set-cookie"])
            let revealed = await Self.renderings { try await revealing.setCookie(query: .init(cookie: "sid=abc")) }
            #expect(!revealed.isEmpty)
            #expect(revealed.first?.lowercased().contains("set-cookie: sid=abc") == true)
        }
    }

    /// Every way a test or a log would print the error `call` throws.
    static func renderings<Output>(of call: () async throws -> Output) async -> [String] {
        do {
            _ = try await call()
            return []
        } catch {
            return [
                String(describing: error), String(reflecting: error), error.localizedDescription,
                (error as? ClientError).map { String(describing: $0.underlyingError) } ?? "",
            ]
        }
    }
}

/// Counts its calls and adds `X-Middleware: 1`.
struct CountingMiddleware: ClientMiddleware {
    let calls = Box(0)
    func intercept(
        _ request: HTTPTypes.HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPTypes.HTTPRequest, HTTPBody?, URL) async throws -> (HTTPTypes.HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPTypes.HTTPResponse, HTTPBody?) {
        calls.withLock { $0 += 1 }
        var request = request
        request.headerFields[HTTPField.Name("X-Middleware")!] = "1"
        return try await next(request, body, baseURL)
    }
}

/// Records each attempt's `X-Middleware` value.
struct HeaderSpy: HeaderAdding {
    let values = Box<[String]>([])
    func additionalHeaders(for request: Conveyor.HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        values.withLock { $0.append(request.headers["X-Middleware"] ?? "none") }
        return [:]
    }
}

/// A value behind a lock.
final class Box<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Records `context.openAPIOperationID` in its first hook.
struct OperationReader: SendObserving {
    let seen: Box<[String]>
    func beforeSend(_ request: Conveyor.HTTPRequest, context: RequestContext) async {
        seen.withLock { $0.append(context.openAPIOperationID ?? "none") }
    }
}

/// Waits until `condition` holds, 10 s at most (then fails the test).
func waitFor(_ condition: () async -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while !(await condition()) {
        guard ContinuousClock.now < deadline else {
            Issue.record("the condition did not hold within 10 s")
            return
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// Which operations' responses `.automatic` buffers: those that accept JSON or text only.
@Suite struct OpenAPIAcceptTests {
    @Test(arguments: [
        (nil, true), ("application/json", true), ("Application/JSON; charset=utf-8", true),
        ("application/problem+json", true), ("text/plain, application/json;q=0.5", true), ("", true), (" , ", true),
        ("application/octet-stream", false), ("application/json, application/octet-stream", false),
        ("application/jsonx", false), ("text", false), ("*/*", false), ("multipart/form-data", false),
        ("application/x-www-form-urlencoded", true), ("\tTEXT/EVENT-STREAM\t", false), ("text/html", true),
    ] as [(String?, Bool)])
    func acceptsTextual(accept: String?, textual: Bool) {
        #expect(ConveyorTransport.acceptsTextual(accept) == textual)
    }
}
