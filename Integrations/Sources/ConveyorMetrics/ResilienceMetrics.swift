public import Conveyor
import ConveyorConventions
public import CoreMetrics

/// Records the decisions of Conveyor's overload mechanisms in swift-metrics: pass its methods as
/// the mechanisms' `onChange`.
///
/// ```swift
/// import ConveyorMetrics
///
/// let metrics = ResilienceMetrics()   // MetricsSystem's factory, bootstrapped by your app
/// let breaker = CircuitBreaker(onChange: metrics.circuitChanged)
/// let limiter = ConcurrencyLimiter(onChange: metrics.limitChanged)
/// ```
///
/// | metric | type | dimensions |
/// |---|---|---|
/// | `conveyor.circuit.state` | gauge: 0 closed, 1 half-open, 2 open, 3 isolated | `server.address`, `server.port` |
/// | `conveyor.circuit.transitions` | counter | `server.address`, `server.port`, `conveyor.circuit.state` (`closed`, `half_open`, `open`, `isolated`) |
/// | `conveyor.concurrency.limit` | gauge: the origin's limit | `server.address`, `server.port` |
///
/// The dimensions are the servers' only, as ``SwiftMetricsSink``'s: the series stay bounded by the
/// origins a client talks to. A request a mechanism refused is one of ``SwiftMetricsSink``'s
/// attempts with `error.type` `circuitOpen` or `rateLimited` when ``MetricsBehavior`` sits before
/// the mechanism; a retry the budget refused is in `LoggingBehavior`'s line
/// (`conveyor.retry.refused`), as is the time the rate limiter held a request
/// (`conveyor.ratelimit.waited_ms`).
public struct ResilienceMetrics: Sendable {
    /// Where metrics go.
    let factory: any MetricsFactory

    /// Creates the recorder.
    /// - Parameter factory: Where metrics go; `MetricsSystem.factory` (what your app bootstrapped) by default.
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// Records a circuit's new state: for `CircuitBreaker(onChange:)`.
    /// - Parameters:
    ///   - origin: The circuit's origin.
    ///   - state: Its new state.
    public func circuitChanged(_ origin: Origin, _ state: CircuitBreaker.State) {
        let (code, name): (Int, String) =
            switch state {
            case .closed: (0, "closed")
            case .halfOpen: (1, "half_open")
            case .open: (2, "open")
            case .isolated: (3, "isolated")
            }
        let server = Self.dimensions(of: origin)
        Gauge(label: "conveyor.circuit.state", dimensions: server, factory: factory).record(code)
        Counter(
            label: "conveyor.circuit.transitions", dimensions: server + [("conveyor.circuit.state", name)],
            factory: factory
        ).increment()
    }

    /// Records an origin's new concurrency limit: for `ConcurrencyLimiter(onChange:)`.
    /// - Parameters:
    ///   - origin: The origin.
    ///   - limit: Its new limit.
    public func limitChanged(_ origin: Origin, _ limit: Int) {
        Gauge(label: "conveyor.concurrency.limit", dimensions: Self.dimensions(of: origin), factory: factory)
            .record(limit)
    }

    /// The server's dimensions, by the conventions.
    static func dimensions(of origin: Origin) -> [(String, String)] {
        guard let server = HTTPClientConventions.server(of: origin) else { return [] }
        return [("server.address", server.address), ("server.port", String(server.port))]
    }
}
