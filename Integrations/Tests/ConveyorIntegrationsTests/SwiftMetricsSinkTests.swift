import Conveyor
import ConveyorMetrics
import ConveyorTesting
import CoreMetrics
import Foundation
import MetricsTestKit
import Testing

@Suite struct SwiftMetricsSinkTests {
    let api = URL(string: "https://api.test:8443")!

    @Test func anAttemptIsTimedByTheConventionsDimensions() async throws {
        let metrics = TestMetrics()
        let clock = ManualClock()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.handler { _ in
            clock.advance(by: .milliseconds(250))  // the exchange takes 250 ms on the injected clock
            return .text("ok")
        })
        let client = NetworkClient(baseURL: api, transport: mock) {
            MetricsBehavior(sink: SwiftMetricsSink(factory: metrics), clock: clock)
        }
        _ = try await client.send(Request<String>(method: .post, path: "/movies/42"))

        let dimensions = [
            ("http.request.method", "POST"), ("server.address", "api.test"), ("server.port", "8443"),
            ("http.response.status_code", "200"),
        ]
        #expect(try metrics.expectTimer("http.client.request.duration", dimensions).values == [250_000_000])
        #expect(metrics.timers.count == 1)  // one series; the path is not a dimension
    }

    @Test func everyAttemptIsRecordedWithItsOwnOutcome() async throws {
        let metrics = TestMetrics()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 2))
            MetricsBehavior(sink: SwiftMetricsSink(factory: metrics))
        }
        _ = try await client.send(Request<String>(path: "/flaky"))
        let base = [("http.request.method", "GET"), ("server.address", "api.test"), ("server.port", "8443")]
        let failed = base + [("http.response.status_code", "503"), ("error.type", "503")]
        #expect(try metrics.expectTimer("http.client.request.duration", failed).values.count == 1)
        #expect(try metrics.expectTimer("http.client.request.duration", base + [("http.response.status_code", "200")])
            .values.count == 1)
    }

    @Test func absentAttributesAreLeftOutAndUnknownMethodsAreOther() async throws {
        let metrics = TestMetrics()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.failure(URLError(.timedOut)), .text("ok"))
        let client = NetworkClient(baseURL: api, transport: mock) {
            MetricsBehavior(sink: SwiftMetricsSink(factory: metrics))
        }
        _ = try? await client.send(Request<Void>(path: "/slow"))
        _ = try await client.send(Request<String>(method: HTTPMethod(rawValue: "PURGE"), path: "/cache"))
        let base = [("server.address", "api.test"), ("server.port", "8443")]
        #expect(try metrics.expectTimer(
            "http.client.request.duration", [("http.request.method", "GET")] + base + [("error.type", "timedOut")]
        ).values.count == 1)
        #expect(try metrics.expectTimer(
            "http.client.request.duration",
            [("http.request.method", "_OTHER")] + base + [("http.response.status_code", "200")]
        ).values.count == 1)
        for timer in metrics.timers {
            #expect(!timer.dimensions.contains { $0.1 == "none" }, "\(timer.dimensions)")
        }
    }
}
