import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Keeps every attempt's metrics.
final class CollectingSink: MetricsSink, @unchecked Sendable {
    // @unchecked: `recorded` is only touched under `lock`.
    private let lock = NSLock()
    private var recorded: [AttemptMetrics] = []
    func record(_ metrics: AttemptMetrics) {
        lock.lock()
        recorded.append(metrics)
        lock.unlock()
    }
    var all: [AttemptMetrics] {
        lock.lock()
        defer { lock.unlock() }
        return recorded
    }
}

@Suite struct MetricsBehaviorTests {
    let api = URL(string: "https://api.test/v1")!

    @Test func everyAttemptIsRecordedWithItsDurationAndOutcome() async throws {
        let sink = CollectingSink()
        let clock = ManualClock()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(
            .handler { _ in
                clock.advance(by: .milliseconds(40))
                return .status(503)
            },
            .handler { _ in
                clock.advance(by: .milliseconds(15))
                return .text("ok")
            })
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 2))
            MetricsBehavior(sink: sink, clock: clock)
        }
        _ = try await client.send(Request<String>(path: "/movies", query: ["api_key": "apikey-SECRET"]))
        let attempts = sink.all
        #expect(attempts.map(\.attempt) == [1, 2])
        #expect(attempts.map(\.status) == [503, 200])
        #expect(attempts.map(\.duration) == [.milliseconds(40), .milliseconds(15)])
        #expect(attempts.allSatisfy { $0.error == nil && $0.path == "/v1/movies" && $0.origin?.host == "api.test" })
        #expect(Set(attempts.map(\.requestID)).count == 1)
        #expect(!"\(attempts)".contains("SECRET"))
    }

    @Test func aFailedAttemptIsRecordedWithItsErrorAndTheErrorPassesOn() async throws {
        let sink = CollectingSink()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.failure(URLError(.timedOut)))
        let client = NetworkClient(baseURL: api, transport: mock) { MetricsBehavior(sink: sink) }
        await #expect(throws: NetworkError.timedOut) { try await client.send(Request<Void>(path: "/slow")) }
        #expect(sink.all.count == 1)
        #expect(sink.all.first?.error == .timedOut && sink.all.first?.status == nil)
    }

    @Test func anAnswerFromInsideHasNoTransportTimings() async throws {
        let sink = CollectingSink()
        let client = NetworkClient(baseURL: api, transport: MockTransport(baseURL: api)) {
            MetricsBehavior(sink: sink)
            Answering(status: 200, body: "memo")
        }
        _ = try await client.send(Request<String>(path: "/memo"))
        #expect(sink.all.count == 1 && sink.all.first?.timings == nil && sink.all.first?.status == 200)
    }

    @Test func theDefaultTransportMeasuresEachPhaseItSees() async throws {
        try await LocalServer.withServer { server in
            let sink = CollectingSink()
            let client = NetworkClient(baseURL: server.baseURL) { MetricsBehavior(sink: sink) }
            let body = Data(repeating: 7, count: 100_000)
            _ = try await client.send(Request<Data>(method: .post, path: "/echo", body: .data(body, contentType: nil)))
            _ = try await client.send(Request<Data>(path: "/bytes", query: ["count": 250_000]))
            let (post, get) = (sink.all[0], sink.all[1])
            let postTimings = try #require(post.timings)
            let getTimings = try #require(get.timings)
            #expect(postTimings.requestBodyBytes == 100_000)
            #expect(getTimings.requestBodyBytes == 0 && getTimings.responseBodyBytes == 250_000)
            for timings in [postTimings, getTimings] {
                let firstByte = try #require(timings.firstByte)
                #expect(firstByte > .zero && firstByte <= timings.complete)
            }
            let sent = try #require(postTimings.requestSent)  // FoundationNetworking reports it too
            #expect(sent <= postTimings.firstByte ?? .zero)
            #expect(get.duration >= getTimings.complete)
        }
    }

    @Test func thePrintSinkWritesOneShortLine() {
        let metrics = AttemptMetrics(
            requestID: RequestID(rawValue: 1), attempt: 2, method: .get, origin: Origin(api), path: "/v1/movies",
            status: 200, error: nil, duration: .microseconds(12_345),
            timings: TransferTimings(firstByte: .microseconds(10_100), complete: .microseconds(12_000), requestBodyBytes: 0, responseBodyBytes: 10))
        #expect(PrintMetricsSink.line(for: metrics) == "GET /v1/movies #2 200 12.3 ms (first byte 10.1 ms)")
    }

    @Test func theBehaviorKeepsTheContract() async {
        let sink = CollectingSink()
        let violations = await BehaviorContractCheck(MetricsBehavior(sink: sink)) { 0 }.run()
        #expect(violations.isEmpty, "\(violations)")
    }
}

/// Answers every attempt itself (a memo); the transport is never reached.
struct Answering: AttemptIntercepting {
    let status: Int
    let body: String
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        HTTPResponse(status: status, body: Data(body.utf8), request: request)
    }
}
