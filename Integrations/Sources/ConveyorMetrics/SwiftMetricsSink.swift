public import Conveyor
import ConveyorConventions
public import CoreMetrics

/// A ``MetricsSink`` that records ``MetricsBehavior``'s attempts in swift-metrics, by
/// OpenTelemetry's HTTP client conventions.
///
/// ```swift
/// import ConveyorMetrics
///
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     MetricsBehavior(sink: SwiftMetricsSink())   // MetricsSystem's factory, bootstrapped by your app
/// }
/// ```
///
/// | metric | type | dimensions |
/// |---|---|---|
/// | `http.client.request.duration` | timer (nanoseconds; seconds preferred for display) | `http.request.method`, `server.address`, `server.port`, `http.response.status_code`, `error.type` |
///
/// - **Per HTTP request**, as the conventions define the metric: every attempt is recorded, so a
///   503 that was retried and then answered with 200 is two recordings, one with
///   `http.response.status_code=503 error.type=503` and one with `200`. The duration is the
///   attempt's, on ``MetricsBehavior``'s clock (its backoff waits are not in it).
/// - **Dimensions** are left out when they have no value (no status when no response came, no
///   `error.type` on a success); `http.request.method` is `_OTHER` for a method outside RFC 9110's
///   and `PATCH`; `error.type` is the status code for a status of 400 or more, else the
///   ``NetworkError`` kind's name. The path is never a dimension: it would make one series per
///   resource and may carry identifiers, so the number of series stays bounded by methods,
///   servers, statuses and error kinds.
/// - Where ``MetricsBehavior`` sits decides what is timed: last, the transport; before a cache,
///   what callers get (a hit is then a short request with its status).
public struct SwiftMetricsSink: MetricsSink {
    /// Where metrics go.
    let factory: any MetricsFactory

    /// Creates the sink.
    /// - Parameter factory: Where metrics go; `MetricsSystem.factory` (what your app bootstrapped) by default.
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// Records the attempt's duration with its dimensions.
    /// - Parameter metrics: The attempt.
    public func record(_ metrics: AttemptMetrics) {
        let timer = Timer(
            label: "http.client.request.duration", dimensions: Self.dimensions(of: metrics), factory: factory)
        let (seconds, attoseconds) = metrics.duration.components
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        timer.recordNanoseconds(nanoseconds.overflow ? Int64.max : nanoseconds.partialValue + attoseconds / 1_000_000_000)
    }

    /// The attempt's dimensions, by the conventions, absent ones left out.
    static func dimensions(of metrics: AttemptMetrics) -> [(String, String)] {
        var dimensions = [("http.request.method", HTTPClientConventions.method(metrics.method).name)]
        if let server = HTTPClientConventions.server(of: metrics.origin) {
            dimensions.append(("server.address", server.address))
            dimensions.append(("server.port", String(server.port)))
        }
        if let status = metrics.status { dimensions.append(("http.response.status_code", String(status))) }
        if let type = HTTPClientConventions.errorType(status: metrics.status, error: metrics.error) {
            dimensions.append(("error.type", type))
        }
        return dimensions
    }
}
