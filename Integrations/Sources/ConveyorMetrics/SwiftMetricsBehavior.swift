public import Conveyor
public import CoreMetrics

/// Records every logical request in swift-metrics: how many, how long, and how they failed, by
/// method, host, port and status.
///
/// ```swift
/// import ConveyorMetrics
///
/// let client = NetworkClient(baseURL: api) {
///     SwiftMetricsBehavior()                   // MetricsSystem's factory, bootstrapped by your app
/// }
/// ```
///
/// | metric | type | dimensions |
/// |---|---|---|
/// | `http.client.requests` | counter | method, host, port, status, `error.type` on failure |
/// | `http.client.request.duration` | timer (nanoseconds) | the same |
/// | `http.client.request.failures` | counter | method, host, port, status (`none` without a response), `error.type` |
/// | `http.client.request.retries` | counter | method, host, port: attempts after the first |
///
/// Dimension names follow OpenTelemetry's HTTP client conventions (`http.request.method`,
/// `server.address`, `server.port`, `http.response.status_code`, `error.type`). The path is
/// never a dimension: it would make one series per resource and may carry identifiers. A
/// duration runs from `beforeSend` (the first attempt is ready) to the outcome, so it includes
/// retries and backoff waits. Place the behavior first in the chain to see the outcome the caller
/// sees.
public struct SwiftMetricsBehavior: SendObserving, SuccessObserving, FailureObserving {
    /// The name used by opt-out and in errors.
    public let name: String
    /// Where metrics go.
    let factory: any MetricsFactory
    /// Starts a stopwatch on the injected clock.
    let startStopwatch: @Sendable () -> Stopwatch

    /// Creates the behavior.
    /// - Parameters:
    ///   - factory: Where metrics go; `MetricsSystem.factory` (what your app bootstrapped) by default.
    ///   - clock: The clock durations are measured on; inject a manual one in tests.
    ///   - name: The behavior's name, for opt-out; `"SwiftMetricsBehavior"` by default.
    public init<C: Clock>(
        factory: any MetricsFactory = MetricsSystem.factory, clock: C = ContinuousClock(), name: String? = nil
    ) where C.Duration == Duration {
        self.factory = factory
        self.name = name ?? "SwiftMetricsBehavior"
        self.startStopwatch = {
            let start = clock.now
            return Stopwatch { start.duration(to: clock.now) }
        }
    }

    /// The elapsed time since `beforeSend`.
    struct Stopwatch: Sendable {
        let elapsed: @Sendable () -> Duration
    }

    enum StopwatchKey: RequestContextKey {
        static let defaultValue: Stopwatch? = nil
    }

    /// Starts the request's stopwatch.
    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        context[StopwatchKey.self] = startStopwatch()
    }

    /// Records a success.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        record(request: response.request, status: response.status, error: nil, context: context)
    }

    /// Records a failure, with `error.type` the status code when a response had an error status
    /// (OpenTelemetry's rule), else the ``NetworkError`` kind's name.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        record(request: context.originalRequest, status: error.status, error: error, context: context)
    }

    private func record(request: HTTPRequest, status: Int?, error: NetworkError?, context: RequestContext) {
        let elapsed = context[StopwatchKey.self]?.elapsed() ?? .zero
        let origin = Origin(request.url)
        let target: [(String, String)] = [
            ("http.request.method", request.method.rawValue),
            ("server.address", origin?.host ?? "none"),
            ("server.port", origin.map { String($0.port) } ?? "none"),
        ]
        var dimensions = target
        dimensions.append(("http.response.status_code", status.map(String.init) ?? "none"))
        if let error { dimensions.append(("error.type", error.status.map(String.init) ?? error.name)) }

        Counter(label: "http.client.requests", dimensions: dimensions, factory: factory).increment()
        let (seconds, attoseconds) = elapsed.components
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        Timer(label: "http.client.request.duration", dimensions: dimensions, factory: factory)
            .recordNanoseconds(nanoseconds.overflow ? Int64.max : nanoseconds.partialValue + attoseconds / 1_000_000_000)
        if error != nil {
            Counter(label: "http.client.request.failures", dimensions: dimensions, factory: factory).increment()
        }
        if context.attempt > 1 {
            Counter(label: "http.client.request.retries", dimensions: target, factory: factory)
                .increment(by: context.attempt - 1)
        }
    }
}
