import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorTesting
import ConveyorTracing
import Foundation
import InMemoryTracing
import IntegrationsTestSupport
import Testing
import Tracing

/// An in-memory tracer that propagates W3C `traceparent` (as swift-otel does) and counts the
/// spans it started, so a test can tell that every span ended.
struct W3CTestTracer: Tracer {
    let base = InMemoryTracer(
        idGenerator: .init(
            nextTraceID: { W3CTestTracer.hex(UInt64.random(in: 1...UInt64.max)) + W3CTestTracer.hex(.random(in: 0...UInt64.max)) },
            nextSpanID: { W3CTestTracer.hex(UInt64.random(in: 1...UInt64.max)) }))
    let started = Counter()

    final class Counter: @unchecked Sendable {
        // @unchecked: `value` is only touched under `lock`.
        private let lock = NSLock()
        private var value = 0
        func increment() { lock.lock(); value += 1; lock.unlock() }
        var count: Int { lock.lock(); defer { lock.unlock() }; return value }
    }

    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Spans started and not ended yet.
    var openSpans: Int { started.count - base.finishedSpans.count }

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> InMemorySpan {
        started.increment()
        return base.startSpan(
            operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID, line: line)
    }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let span = context.inMemorySpanContext else { return }
        injector.inject("00-\(span.traceID)-\(span.spanID)-01", forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {}
}

/// The tracer the process bootstraps (once, for the suites that read `InstrumentationSystem`).
let bootstrappedTracer: W3CTestTracer = {
    let tracer = W3CTestTracer()
    InstrumentationSystem.bootstrap(tracer)
    return tracer
}()

struct SeenTraceparents: Decodable { let traceparent: [[String]] }

@Suite struct TracingBehaviorTests {
    let api = URL(string: "https://user:pa55-SECRET@api.test/v1")!

    func spans(_ tracer: InMemoryTracer) -> (request: FinishedInMemorySpan?, attempts: [FinishedInMemorySpan]) {
        let finished = tracer.finishedSpans
        return (finished.first { $0.kind == .internal }, finished.filter { $0.kind == .client })
    }

    @Test func aRequestGetsARequestSpanAndAClientSpanPerAttemptWithTheHTTPAttributes() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock) { TracingBehavior(tracer: tracer) }
        _ = try await client.send(Request<String>(path: "/movies", query: ["api_key": "apikey-SECRET"]))

        let (request, attempts) = spans(tracer)
        #expect(tracer.finishedSpans.count == 2)
        let parent = try #require(request)
        let span = try #require(attempts.first)
        for span in [parent, span] {
            #expect(span.operationName == "GET")
            #expect(span.attributes.get("http.request.method") == .string("GET"))
            #expect(span.attributes.get("server.address") == .string("api.test"))
            #expect(span.attributes.get("server.port") == .int64(443))
            #expect(span.attributes.get("url.full") == .string("https://api.test/v1/movies"))
            #expect(span.attributes.get("http.response.status_code") == .int64(200))
            #expect(span.attributes.get("error.type") == nil)
            #expect(span.status == nil)
        }
        #expect(span.parentSpanID == parent.spanID)
        #expect(span.traceID == parent.traceID)
        #expect(span.attributes.get("http.request.resend_count") == nil)
        let sent = try #require(mock.requests.first)
        #expect(sent.headers[InMemoryTracer.traceIDKey] == span.traceID)
        #expect(sent.headers[InMemoryTracer.spanIDKey] == span.spanID)
    }

    @Test func theRequestSpanIsAChildOfTheCallersSpan() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock) { TracingBehavior(tracer: tracer) }
        try await tracer.withSpan("load screen") { _ in
            _ = try await client.send(Request<String>(path: "/movies"))
        }
        let request = try #require(spans(tracer).request)
        let parent = try #require(tracer.finishedSpans.first { $0.operationName == "load screen" })
        #expect(request.traceID == parent.traceID)
        #expect(request.parentSpanID == parent.spanID)
    }

    @Test func anErrorStatusFailsTheSpansWithTheStatusAsErrorType() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(404))
        let client = NetworkClient(baseURL: api, transport: mock) { TracingBehavior(tracer: tracer) }
        _ = try? await client.send(Request<Void>(path: "/missing"))
        let (request, attempts) = spans(tracer)
        for span in [try #require(request), try #require(attempts.first)] {
            #expect(span.status?.code == .error)
            #expect(span.attributes.get("error.type") == .string("404"))
            #expect(span.attributes.get("http.response.status_code") == .int64(404))
        }
        #expect(request?.errors.count == 1)  // the request failed with unacceptableStatus
        #expect(attempts.first?.errors.isEmpty == true)  // the attempt got a response
    }

    @Test func aTransportErrorIsTheErrorTypeOfItsAttempt() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.failure(URLError(.timedOut)))
        let client = NetworkClient(baseURL: api, transport: mock) { TracingBehavior(tracer: tracer) }
        _ = try? await client.send(Request<Void>(path: "/slow"))
        let attempt = try #require(spans(tracer).attempts.first)
        #expect(attempt.attributes.get("error.type") == .string("timedOut"))
        #expect(attempt.attributes.get("http.response.status_code") == nil)
        #expect(attempt.errors.count == 1)
        #expect(attempt.status?.code == .error)
    }

    @Test func eachResendIsAClientSpanOfItsOwnCarryingItsOwnContext() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .status(503), .text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())) {
            TracingBehavior(tracer: tracer)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3))
        }
        _ = try await client.send(Request<String>(path: "/flaky"))
        let (request, attempts) = spans(tracer)
        let parent = try #require(request)
        #expect(attempts.count == 3)
        #expect(attempts.map { $0.attributes.get("http.request.resend_count") } == [nil, .int64(1), .int64(2)])
        #expect(attempts.map { $0.attributes.get("http.response.status_code") } == [.int64(503), .int64(503), .int64(200)])
        #expect(attempts.map { $0.attributes.get("error.type") } == [.string("503"), .string("503"), nil])
        #expect(attempts.allSatisfy { $0.parentSpanID == parent.spanID && $0.traceID == parent.traceID })
        #expect(parent.attributes.get("http.response.status_code") == .int64(200))
        #expect(parent.status == nil)
        #expect(mock.requests.map { $0.headers[InMemoryTracer.spanIDKey] } == attempts.map(\.spanID))
    }

    /// An event stream's connection that drops after its head: its span has the status the head
    /// carried and the error that ended it; the reconnect gets a span of its own.
    @Test func aDroppedStreamConnectionKeepsItsStatusBesideItsError() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(
            .events("retry: 0\n", "id: 1\ndata: one\n\n", end: .failure(URLError(.networkConnectionLost))),
            .status(204))
        let client = NetworkClient(baseURL: api, transport: mock) { TracingBehavior(tracer: tracer) }
        var seen: [String] = []
        for try await event in client.events(Request<Data>(path: "/feed")) { seen.append(event.data) }
        #expect(seen == ["one"])
        let attempts = spans(tracer).attempts
        #expect(attempts.count == 2)
        let dropped = try #require(attempts.first)
        #expect(dropped.attributes.get("http.response.status_code") == .int64(200))
        #expect(dropped.attributes.get("error.type") == .string("connectionFailed"))
        #expect(dropped.status?.code == .error)
        #expect(attempts.last?.attributes.get("http.response.status_code") == .int64(204))
        #expect(attempts.last?.attributes.get("error.type") == nil)
    }

    @Test func anUnknownMethodIsOtherWithItsOriginal() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock) { TracingBehavior(tracer: tracer) }
        _ = try await client.send(Request<String>(method: HTTPMethod(rawValue: "PURGE"), path: "/cache"))
        for span in tracer.finishedSpans {
            #expect(span.operationName == "HTTP")
            #expect(span.attributes.get("http.request.method") == .string("_OTHER"))
            #expect(span.attributes.get("http.request.method_original") == .string("PURGE"))
        }
        #expect(tracer.finishedSpans.count == 2)
    }

    @Test func theBehaviorKeepsTheContract() async {
        let tracer = W3CTestTracer()
        let violations = await BehaviorContractCheck(TracingBehavior(tracer: tracer)) { tracer.openSpans }.run()
        #expect(violations.isEmpty, "\(violations)")
    }

    @Test func anAsyncHTTPClientWithATracerOfItsOwnIsRefusedWithTheFix() throws {
        var configuration = AsyncHTTPClientTransport.configuration()
        configuration.tracing.tracer = W3CTestTracer()
        let traced = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        defer { try? traced.syncShutdown() }
        #expect {
            _ = try AsyncHTTPClientTransport(client: traced)
        } throws: { error in
            "\(error)".contains("tracing.tracer = nil")
        }
        configuration.tracing.tracer = NoOpTracer()  // what AsyncHTTPClient picks with nothing bootstrapped
        let quiet = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        defer { try? quiet.syncShutdown() }
        _ = try AsyncHTTPClientTransport(client: quiet)
    }

    /// End to end, with a tracer bootstrapped as an app does: the server sees exactly one trace
    /// context per attempt, each attempt's own, and every span is in the caller's trace.
    @Test(arguments: ["AsyncHTTPClient", "URLSession"])
    func overARealServerEachAttemptCarriesExactlyItsOwnContextInOneTrace(transportName: String) async throws {
        let tracer = bootstrappedTracer
        try await LocalServer.withServer { server in
            let transport: any HTTPTransport =
                transportName == "URLSession"
                ? URLSessionTransport() : try AsyncHTTPClientTransport(client: sharedHTTPClient)
            let client = NetworkClient(
                baseURL: server.baseURL, transport: transport, configuration: .init(clock: ImmediateClock())
            ) {
                RetryBehavior(.exponentialBackoff(maxAttempts: 2))
                TracingBehavior()  // InstrumentationSystem's tracer
            }
            let name = "trace-\(transportName)-\(UInt32.random(in: 0...UInt32.max))"
            let rootID = try await InstrumentationSystem.tracer.withSpan("test root") { root in
                _ = try await client.send(Request<Data>(path: "/flaky/\(name)"))
                return root.context.inMemorySpanContext?.spanID
            }
            let seen = try await NetworkClient(baseURL: server.baseURL, transport: transport)
                .send(Request<SeenTraceparents>(path: "/flaky/\(name)/seen"))

            let finished = tracer.base.finishedSpans
            let root = try #require(finished.first { $0.spanID == rootID })
            let request = try #require(finished.first { $0.parentSpanID == root.spanID && $0.kind == .internal })
            let attempts = finished.filter { $0.parentSpanID == request.spanID && $0.kind == .client }
            #expect(attempts.count == 2)
            #expect(([request] + attempts).allSatisfy { $0.traceID == root.traceID })
            #expect(seen.traceparent == attempts.map { ["00-\($0.traceID)-\($0.spanID)-01"] })
            #expect(attempts.map { $0.attributes.get("http.response.status_code") } == [.int64(503), .int64(200)])
            #expect(attempts.last?.attributes.get("server.port") == .int64(Int64(server.port)))
        }
    }
}
