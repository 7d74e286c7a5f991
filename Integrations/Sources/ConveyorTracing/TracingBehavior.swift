public import Conveyor
import Foundation
public import Tracing

/// Starts a client span for every logical request and propagates its context in the request's
/// headers, with swift-distributed-tracing.
///
/// ```swift
/// import ConveyorTracing
///
/// let client = NetworkClient(baseURL: api) {
///     TracingBehavior()      // InstrumentationSystem's tracer, bootstrapped by your app
/// }
/// ```
///
/// - **Span:** one per logical request, named after the method (`GET`), of kind `.client`, a
///   child of the caller's `ServiceContext.current`. It starts when the first attempt is prepared
///   and ends with the outcome the caller sees, so it spans retries and backoff waits.
/// - **Attributes** (OpenTelemetry's HTTP client conventions): `http.request.method`,
///   `server.address`, `server.port`, `url.full` (without user info, query or fragment, which may
///   carry secrets), `http.response.status_code`, `http.request.resend_count` when an attempt
///   was retried, `error.type` on failure (the status code for a response with an error status, as OpenTelemetry asks, else the ``NetworkError`` kind's name). A failure also records the
///   error (its description has no secret) and sets the span's status to error.
/// - **Propagation:** every attempt carries the span's context in its headers, written by the
///   tracer's `inject` (swift-otel writes W3C `traceparent` and `tracestate`). A header a
///   behavior or the request set under the same name is replaced.
/// - A first attempt that never goes out (a later behavior throws while preparing it) still
///   ends its span, with the error `notSent`.
public struct TracingBehavior: RequestModifying, SuccessObserving, FailureObserving {
    /// The name used by opt-out and in errors.
    public let name: String
    /// The tracer, or `nil` for `InstrumentationSystem.tracer`, read per request so that a
    /// later bootstrap is honoured.
    let tracer: (any Tracer)?

    /// Creates the behavior.
    /// - Parameters:
    ///   - tracer: The tracer; `InstrumentationSystem.tracer` (what your app bootstrapped) by default.
    ///   - name: The behavior's name, for opt-out; `"TracingBehavior"` by default.
    public init(tracer: (any Tracer)? = nil, name: String? = nil) {
        self.tracer = tracer
        self.name = name ?? "TracingBehavior"
    }

    enum SpanKey: RequestContextKey {
        static let defaultValue: RequestSpan? = nil
    }

    /// Starts the span on the first attempt and injects its context into every attempt.
    public func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        let tracer = tracer ?? InstrumentationSystem.tracer
        let span = context.update(SpanKey.self) { stored -> RequestSpan in
            if let stored { return stored }
            let started = RequestSpan(tracer.startSpan(
                request.method.rawValue, context: ServiceContext.current ?? .topLevel, ofKind: .client))
            stored = started
            return started
        }
        if context.attempt == 1 {
            span.setAttributes(Self.attributes(of: request))
        } else {
            span.setAttributes(["http.request.resend_count": .int64(Int64(context.attempt - 1))])
        }
        tracer.inject(span.context, into: &request.headers, using: HeadersInjector())
    }

    /// Ends the span with the response's status.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        context[SpanKey.self]?.end(status: response.status, error: nil)
    }

    /// Ends the span with the error.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        context[SpanKey.self]?.end(status: error.status, error: error)
    }

    /// The request's attributes, without secrets.
    static func attributes(of request: HTTPRequest) -> SpanAttributes {
        var attributes: SpanAttributes = ["http.request.method": .string(request.method.rawValue)]
        if let components = URLComponents(url: request.url, resolvingAgainstBaseURL: true) {
            if let host = components.host { attributes["server.address"] = SpanAttribute.string(host) }
            if let origin = Origin(request.url) { attributes["server.port"] = SpanAttribute.int64(Int64(origin.port)) }
            var safe = URLComponents()
            safe.scheme = components.scheme
            safe.host = components.host
            safe.port = components.port
            safe.percentEncodedPath = components.percentEncodedPath
            if let full = safe.string { attributes["url.full"] = SpanAttribute.string(full) }
        }
        return attributes
    }
}

/// Writes propagation fields into a request's headers, replacing a field of the same name.
struct HeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into headers: inout HTTPHeaders) {
        headers[key] = value
    }
}

/// A request's span: ended exactly once, by the outcome or, if the request was never sent, when
/// the request's context goes away.
final class RequestSpan: Sendable {
    private let span: any Span
    private let ended = NSLock()
    // `nonisolated(unsafe)`: only read and written under `ended`.
    nonisolated(unsafe) private var isEnded = false

    init(_ span: any Span) { self.span = span }

    var context: ServiceContext { span.context }

    func setAttributes(_ attributes: SpanAttributes) {
        attributes.forEach { name, value in span.attributes[name] = value }
    }

    func end(status: Int?, error: NetworkError?) {
        guard markEnded() else { return }
        if let status { span.attributes["http.response.status_code"] = SpanAttribute.int64(Int64(status)) }
        if let error {
            span.attributes["error.type"] = SpanAttribute.string(error.status.map(String.init) ?? error.name)
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
        }
        span.end()
    }

    private func markEnded() -> Bool {
        ended.lock()
        defer { ended.unlock() }
        guard !isEnded else { return false }
        isEnded = true
        return true
    }

    deinit {
        guard markEnded() else { return }
        span.attributes["error.type"] = SpanAttribute.string("notSent")
        span.setStatus(SpanStatus(code: .error, message: "the request was not sent"))
        span.end()
    }
}
