import Conveyor
import ConveyorMetrics
import ConveyorTesting
import CoreMetrics
import Foundation
import MetricsTestKit
import Testing

@Suite struct MetricsBehaviorTests {
    let api = URL(string: "https://api.test:8443")!

    @Test func aSuccessIsCountedAndTimedByMethodHostAndStatus() async throws {
        let metrics = TestMetrics()
        let clock = ManualClock()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.handler { _ in
            clock.advance(by: .milliseconds(250))  // the exchange takes 250 ms on the injected clock
            return .text("ok")
        })
        let client = NetworkClient(baseURL: api, transport: mock) { SwiftMetricsBehavior(factory: metrics, clock: clock) }
        _ = try await client.send(Request<String>(method: .post, path: "/movies"))

        let dimensions = [
            ("http.request.method", "POST"), ("server.address", "api.test"), ("server.port", "8443"),
            ("http.response.status_code", "200"),
        ]
        #expect(try metrics.expectCounter("http.client.requests", dimensions).totalValue == 1)
        #expect(try metrics.expectTimer("http.client.request.duration", dimensions).values == [250_000_000])
        #expect(throws: (any Error).self) { try metrics.expectCounter("http.client.request.failures", dimensions) }
    }

    @Test func failuresCarryTheErrorTypeAndTheStatusWhenThereIsOne() async throws {
        let metrics = TestMetrics()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(404), .failure(URLError(.timedOut)))
        let client = NetworkClient(baseURL: api, transport: mock) { SwiftMetricsBehavior(factory: metrics) }
        _ = try? await client.send(Request<Void>(path: "/missing"))
        _ = try? await client.send(Request<Void>(path: "/slow"))

        let base = [("http.request.method", "GET"), ("server.address", "api.test"), ("server.port", "8443")]
        let notFound = base + [("http.response.status_code", "404"), ("error.type", "404")]
        let timedOut = base + [("http.response.status_code", "none"), ("error.type", "timedOut")]
        #expect(try metrics.expectCounter("http.client.request.failures", notFound).totalValue == 1)
        #expect(try metrics.expectCounter("http.client.request.failures", timedOut).totalValue == 1)
        #expect(try metrics.expectCounter("http.client.requests", timedOut).totalValue == 1)
        #expect(try metrics.expectTimer("http.client.request.duration", notFound).values.count == 1)
    }

    @Test func retriesAreCountedOncePerRequest() async throws {
        let metrics = TestMetrics()
        let mock = MockTransport(baseURL: api)
        mock.enqueue(.status(503), .status(503), .text("ok"))
        let client = NetworkClient(
            baseURL: api, transport: mock, configuration: .init(clock: ImmediateClock())
        ) {
            SwiftMetricsBehavior(factory: metrics)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3))
        }
        _ = try await client.send(Request<String>(path: "/flaky"))
        let target = [("http.request.method", "GET"), ("server.address", "api.test"), ("server.port", "8443")]
        #expect(try metrics.expectCounter("http.client.request.retries", target).totalValue == 2)
        #expect(try metrics.expectCounter("http.client.requests", target + [("http.response.status_code", "200")]).totalValue == 1)
    }
}
