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

/// Fails the first attempt's preparation, after `TracingBehavior` has started its span.
struct FailingModify: RequestModifying {
    struct Refused: Error {}
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws { throw Refused() }
}

@Suite struct TracingBehaviorTests {
    let api = URL(string: "https://user:pa55-SECRET@api.test/v1")!

    @Test func aRequestGetsAClientSpanWithTheHTTPAttributesAndPropagatesIt() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock) { TracingBehavior(tracer: tracer) }
        _ = try await client.send(Request<String>(path: "/movies", query: ["api_key": "apikey-SECRET"]))

        let spans = tracer.finishedSpans
        #expect(spans.count == 1)
        let span = try #require(spans.first)
        #expect(span.operationName == "GET")
        #expect(span.kind == .client)
        #expect(span.attributes.get("http.request.method") == .string("GET"))
        #expect(span.attributes.get("server.address") == .string("api.test"))
        #expect(span.attributes.get("server.port") == .int64(443))
        #expect(span.attributes.get("url.full") == .string("https://api.test/v1/movies"))
        #expect(span.attributes.get("http.response.status_code") == .int64(200))
        #expect(span.status == nil)
        let sent = try #require(mock.requests.first)
        #expect(sent.headers[InMemoryTracer.traceIDKey] == span.traceID)
        #expect(sent.headers[InMemoryTracer.spanIDKey] == span.spanID)
    }

    @Test func theSpanIsAChildOfTheCallersSpan() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock) { TracingBehavior(tracer: tracer) }
        try await tracer.withSpan("load screen") { _ in
            _ = try await client.send(Request<String>(path: "/movies"))
        }
        let request = try #require(tracer.finishedSpans.first { $0.operationName == "GET" })
        let parent = try #require(tracer.finishedSpans.first { $0.operationName == "load screen" })
        #expect(request.traceID == parent.traceID)
        #expect(request.parentSpanID == parent.spanID)
    }

    @Test func aFailureEndsTheSpanWithTheErrorAndItsStatus() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(404))
        let client = NetworkClient(baseURL: api, transport: mock) { TracingBehavior(tracer: tracer) }
        _ = try? await client.send(Request<Void>(path: "/missing"))
        let span = try #require(tracer.finishedSpans.first)
        #expect(span.status?.code == .error)
        #expect(span.attributes.get("error.type") == .string("404"))
        #expect(span.attributes.get("http.response.status_code") == .int64(404))
        #expect(span.errors.count == 1)
    }

    @Test func retriesShareOneSpanAndEachAttemptCarriesItsContext() async throws {
        let tracer = InMemoryTracer()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .status(503), .text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())) {
            TracingBehavior(tracer: tracer)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3))
        }
        _ = try await client.send(Request<String>(path: "/flaky"))
        let span = try #require(tracer.finishedSpans.first)
        #expect(tracer.finishedSpans.count == 1)
        #expect(span.attributes.get("http.request.resend_count") == .int64(2))
        #expect(mock.requests.count == 3)
        #expect(mock.requests.allSatisfy { $0.headers[InMemoryTracer.spanIDKey] == span.spanID })
    }

    @Test func aRequestThatIsNeverSentStillEndsItsSpan() async throws {
        let tracer = W3CTestTracer()
        let client = NetworkClient(baseURL: api, transport: MockTransport(baseURL: api)) {
            TracingBehavior(tracer: tracer)
            FailingModify()
        }
        _ = try? await client.send(Request<Void>(path: "/never"))
        #expect(tracer.openSpans == 0)
        let span = try #require(tracer.base.finishedSpans.first)
        #expect(span.attributes.get("error.type") == .string("notSent"))
    }

    @Test func theBehaviorKeepsTheContract() async {
        let tracer = W3CTestTracer()
        let violations = await BehaviorContractCheck(TracingBehavior(tracer: tracer)) { tracer.openSpans }.run()
        #expect(violations.isEmpty, "\(violations)")
    }

    @Test func aW3CTraceparentReachesARealServer() async throws {
        let tracer = W3CTestTracer()
        try await LocalServer.withServer { server in
            let client = NetworkClient(
                baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)
            ) { TracingBehavior(tracer: tracer) }
            let echo = try await client.send(Request<Echo>(path: "/echo"))
            let span = try #require(tracer.base.finishedSpans.first)
            let traceparent = try #require(echo.headers["traceparent"])
            #expect(traceparent == "00-\(span.traceID)-\(span.spanID)-01")
            #expect(traceparent.wholeMatch(of: /00-[0-9a-f]{32}-[0-9a-f]{16}-01/) != nil)
        }
    }
}
