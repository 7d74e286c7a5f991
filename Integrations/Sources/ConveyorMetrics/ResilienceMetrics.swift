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
/// What the mechanisms decided for each request (a retry the budget refused, the time the rate
/// limiter held it, the hedges sent, won, refused and cancelled) is recorded by ``ResilienceMetricsBehavior``,
/// from the request's `RequestContext.resilienceReport`:
///
/// | metric | type | recorded when |
/// |---|---|---|
/// | `conveyor.retry.refused` | counter | the budget refused a retry or reconnect |
/// | `conveyor.ratelimit.waited` | timer | `RateLimitBehavior` held the request back (how long, in all) |
/// | `conveyor.hedge.sent` | counter | `HedgingBehavior` sent hedges (by how many) |
/// | `conveyor.hedge.won` | counter | a hedge gave the answer the request kept |
/// | `conveyor.hedge.refused` | counter | the budget refused a hedge |
/// | `conveyor.hedge.cancelled` | counter | attempts of a hedged request cancelled in flight (by how many) |
///
/// The dimensions are the servers' only, as ``SwiftMetricsSink``'s: the series stay bounded by the
/// origins a client talks to. A request a mechanism refused is one of ``SwiftMetricsSink``'s
/// attempts with `error.type` `circuitOpen` or `rateLimited` when ``MetricsBehavior`` sits before
/// the mechanism.
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

    /// Records what the overload mechanisms did for one request (nothing when they did nothing).
    /// - Parameters:
    ///   - report: The request's `RequestContext.resilienceReport`.
    ///   - origin: The origin the request went to.
    public func requestEnded(_ report: ResilienceReport, origin: Origin?) {
        guard
            report.retryRefused || report.pacedFor > .zero || report.hedgesSent > 0 || report.hedgeRefused
                || report.hedgesCancelled > 0
        else {
            return
        }
        let server = origin.map(Self.dimensions(of:)) ?? []
        if report.retryRefused {
            Counter(label: "conveyor.retry.refused", dimensions: server, factory: factory).increment()
        }
        if report.pacedFor > .zero {
            let (seconds, attoseconds) = report.pacedFor.components
            let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
            Timer(label: "conveyor.ratelimit.waited", dimensions: server, factory: factory)
                .recordNanoseconds(nanoseconds.overflow ? .max : nanoseconds.partialValue &+ attoseconds / 1_000_000_000)
        }
        if report.hedgesSent > 0 {
            Counter(label: "conveyor.hedge.sent", dimensions: server, factory: factory).increment(by: report.hedgesSent)
        }
        if report.hedgeWon {
            Counter(label: "conveyor.hedge.won", dimensions: server, factory: factory).increment()
        }
        if report.hedgeRefused {
            Counter(label: "conveyor.hedge.refused", dimensions: server, factory: factory).increment()
        }
        if report.hedgesCancelled > 0 {
            Counter(label: "conveyor.hedge.cancelled", dimensions: server, factory: factory)
                .increment(by: report.hedgesCancelled)
        }
    }

    /// The server's dimensions, by the conventions.
    static func dimensions(of origin: Origin) -> [(String, String)] {
        guard let server = HTTPClientConventions.server(of: origin) else { return [] }
        return [("server.address", server.address), ("server.port", String(server.port))]
    }
}

/// Records, for every request of the chain it is in, what the overload mechanisms decided (see
/// ``ResilienceMetrics``): place it anywhere in the chain; it reads the request's
/// `RequestContext.resilienceReport` once the request has ended.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     ResilienceMetricsBehavior()
///     CombinedRequestBehavior.standardResilience()
/// }
/// ```
public struct ResilienceMetricsBehavior: SuccessObserving, FailureObserving {
    /// Where the decisions go.
    public let metrics: ResilienceMetrics

    /// Creates the behavior.
    /// - Parameter metrics: Where the decisions go; `MetricsSystem.factory` by default.
    public init(_ metrics: ResilienceMetrics = ResilienceMetrics()) {
        self.metrics = metrics
    }

    /// Records the ended request's report.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        metrics.requestEnded(context.resilienceReport, origin: Origin(context.originalRequest.url))
    }

    /// Records the ended request's report.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        metrics.requestEnded(context.resilienceReport, origin: Origin(context.originalRequest.url))
    }
}
