public import ConveyorPipeline
import Foundation

/// One attempt as ``MetricsBehavior`` saw it: how long it took, how it ended, and the phases the
/// transport measured. It carries no header, query or body, so a sink may log it as it is.
public struct AttemptMetrics: Sendable, Hashable {
    /// The logical request the attempt belongs to.
    public let requestID: RequestID
    /// Which attempt this was, from 1.
    public let attempt: Int
    /// The attempt's method.
    public let method: HTTPMethod
    /// The scheme, host and port the attempt went to.
    public let origin: Origin?
    /// The URL's path, without query or fragment (they may carry secrets).
    public let path: String
    /// The response's status, when one arrived (whatever it was: a 500 is a status, not an error).
    public let status: Int?
    /// Why no response arrived: the ``NetworkError`` the attempt failed with.
    public let error: NetworkError?
    /// From the moment the attempt left ``MetricsBehavior`` until its response or error came back,
    /// on the behavior's clock.
    public let duration: Duration
    /// The phases and sizes the transport measured; `nil` when it measures none or a behavior
    /// inside ``MetricsBehavior`` answered.
    public let timings: TransferTimings?

    /// Creates metrics (for tests of a sink).
    /// - Parameters:
    ///   - requestID: The logical request.
    ///   - attempt: The attempt number.
    ///   - method: The method.
    ///   - origin: Where it went.
    ///   - path: The URL's path.
    ///   - status: The response's status.
    ///   - error: Why no response arrived.
    ///   - duration: How long the attempt took.
    ///   - timings: What the transport measured.
    public init(
        requestID: RequestID, attempt: Int, method: HTTPMethod, origin: Origin?, path: String, status: Int?,
        error: NetworkError?, duration: Duration, timings: TransferTimings?
    ) {
        self.requestID = requestID
        self.attempt = attempt
        self.method = method
        self.origin = origin
        self.path = path
        self.status = status
        self.error = error
        self.duration = duration
        self.timings = timings
    }

    /// Two metrics are equal when every field is; errors compare as ``NetworkError`` does.
    public static func == (lhs: AttemptMetrics, rhs: AttemptMetrics) -> Bool {
        lhs.requestID == rhs.requestID && lhs.attempt == rhs.attempt && lhs.method == rhs.method
            && lhs.origin == rhs.origin && lhs.path == rhs.path && lhs.status == rhs.status && lhs.error == rhs.error
            && lhs.duration == rhs.duration && lhs.timings == rhs.timings
    }

    /// Hashes the identifying fields, consistent with `==`.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(requestID)
        hasher.combine(attempt)
        hasher.combine(status)
        hasher.combine(duration)
    }
}

/// Where ``MetricsBehavior`` hands each attempt's metrics. Bridge it to your metrics backend; with
/// swift-metrics:
///
/// ```swift
/// struct AttemptTimer: MetricsSink {
///     func record(_ metrics: AttemptMetrics) {
///         let (seconds, attoseconds) = metrics.duration.components
///         CoreMetrics.Timer(label: "http.client.attempt.duration", dimensions: [("status", "\(metrics.status ?? 0)")])
///             .recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
///     }
/// }
/// ```
public protocol MetricsSink: Sendable {
    /// Records one attempt. Called on the request's task: return quickly.
    /// - Parameter metrics: The attempt.
    func record(_ metrics: AttemptMetrics)
}

/// Measures every attempt (retries each count) and hands the result to a ``MetricsSink``: the
/// duration on an injected clock, the outcome, and the phases and sizes the transport measured
/// (``TransferTimings``: time to first byte, DNS, connect and TLS on Apple platforms…).
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     MetricsBehavior(sink: PrintMetricsSink())   // last: it times the transport, not a cache
/// }
/// ```
///
/// It uses ``AttemptIntercepting/intercept(_:context:next:)``, so it measures what happens inside it:
/// put it last to time the transport itself, or before a cache to time what callers get.
public struct MetricsBehavior: AttemptIntercepting {
    /// The name used by opt-out and in errors.
    public let name: String
    let sink: any MetricsSink
    let stopwatch: @Sendable () -> @Sendable () -> Duration

    /// Creates the behavior.
    /// - Parameters:
    ///   - sink: Where each attempt's metrics go.
    ///   - clock: The clock durations are measured on; inject a manual one in tests.
    ///   - name: The behavior's name, for opt-out; the type's name by default.
    public init<C: Clock>(sink: any MetricsSink, clock: C = ContinuousClock(), name: String? = nil)
    where C.Duration == Duration {
        self.name = name ?? String(describing: Self.self)
        self.sink = sink
        self.stopwatch = {
            let start = clock.now
            return { start.duration(to: clock.now) }
        }
    }

    /// Times the attempt around `next` and records it, whatever the outcome.
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext)
        async throws -> HTTPResponse
    {
        let elapsed = stopwatch()
        do {
            let response = try await next(request)
            record(request, context: context, status: response.status, error: nil, elapsed(), response.timings)
            return response
        } catch {
            // A head that arrived before the body broke off still gives the attempt a status.
            record(request, context: context, status: error.responseHead?.status, error: error, elapsed(), nil)
            throw error
        }
    }

    private func record(
        _ request: HTTPRequest, context: RequestContext, status: Int?, error: NetworkError?, _ duration: Duration,
        _ timings: TransferTimings?
    ) {
        sink.record(
            AttemptMetrics(
                requestID: context.requestID, attempt: context.attempt, method: request.method,
                origin: Origin(request.url), path: request.url.path, status: status, error: error, duration: duration,
                timings: timings))
    }
}

/// Prints one line per attempt: `GET /movies #1 200 12.3 ms (first byte 10.1 ms)`.
public struct PrintMetricsSink: MetricsSink {
    /// Creates the sink.
    public init() {}

    /// Prints the attempt.
    public func record(_ metrics: AttemptMetrics) {
        print("[conveyor] \(Self.line(for: metrics))")
    }

    /// The line printed for an attempt.
    package static func line(for metrics: AttemptMetrics) -> String {
        var outcome = metrics.status.map(String.init) ?? metrics.error?.name ?? "?"
        // A failure after a head of 2xx/3xx (a stream that broke off) names both.
        if let status = metrics.status, status < 400, let error = metrics.error { outcome += " \(error.name)" }
        var line = "\(metrics.method) \(metrics.path) #\(metrics.attempt) \(outcome) \(milliseconds(metrics.duration))"
        if let firstByte = metrics.timings?.firstByte { line += " (first byte \(milliseconds(firstByte)))" }
        return line
    }

    /// `12.3 ms`, or `41 µs` below a millisecond.
    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let microseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        if microseconds < 1_000 { return "\(microseconds) µs" }
        let tenths = microseconds / 100
        return "\(tenths / 10).\(tenths % 10) ms"
    }
}
