public import Conveyor
import ConveyorConventions
import Foundation
public import Tracing

/// Traces every request by OpenTelemetry's HTTP client conventions, with
/// swift-distributed-tracing: a client span per attempt, under one span for the logical request,
/// and the attempt's context in its headers.
///
/// ```swift
/// import ConveyorTracing
///
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     TracingBehavior()      // InstrumentationSystem's tracer, bootstrapped by your app
/// }
/// ```
///
/// - **Spans:** the logical request gets a span of kind `.internal` (a child of the caller's
///   `ServiceContext.current`) from the moment its first attempt is ready until the outcome the
///   caller sees, so it spans retries and backoff waits. Each attempt that reaches this behavior
///   gets a span of kind `.client`, a child of the request's span, from the moment it leaves the
///   behavior until its response or error comes back: a 503 answered, waited for and resent is
///   one request span over two client spans. Spans are named after the method (`GET`), or
///   `HTTP` for a method the conventions do not know.
/// - **Attributes** (on both kinds): `http.request.method` (`_OTHER` for a method outside
///   RFC 9110's and `PATCH`, with `http.request.method_original`), `server.address`,
///   `server.port`, `url.full` (without user info, query or fragment, which may carry secrets),
///   `http.response.status_code`; on a client span, `http.request.resend_count` from the second
///   attempt on. **`error.type`** is the status code for a response with a status of 400 or
///   more, else the ``NetworkError`` kind's name (`timedOut`, `connectionFailed`…); such a span
///   has the error status, and records the error (its description has no secret).
/// - **Propagation:** every attempt carries *its* client span's context in its headers,
///   written by the tracer's `inject` (swift-otel writes W3C `traceparent` and `tracestate`),
///   replacing a header of the same name; and the transport runs with that context as
///   `ServiceContext.current`, so a span started below is its child.
/// - **Where:** the client span measures what happens inside the behavior: put it after
///   `CacheBehavior` and `DeduplicationBehavior` to have client spans only for what goes to the
///   network, before them to see every answer. `RetryBehavior` may sit anywhere: retries are
///   attempts.
public struct TracingBehavior: SendObserving, AttemptIntercepting, SuccessObserving, FailureObserving {
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

    /// The logical request's span.
    enum RequestSpanKey: RequestContextKey {
        static let defaultValue: (any Span)? = nil
    }

    /// Starts the logical request's span, once the first attempt is ready.
    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        let tracer = tracer ?? InstrumentationSystem.tracer
        let span = tracer.startSpan(
            HTTPClientConventions.spanName(request.method), context: ServiceContext.current ?? .topLevel,
            ofKind: .internal)
        span.updateAttributes { Self.describe(request, into: &$0) }
        context[RequestSpanKey.self] = span
    }

    /// Runs the attempt in a client span of its own, its context in the request's headers.
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext)
        async throws -> HTTPResponse
    {
        let tracer = tracer ?? InstrumentationSystem.tracer
        let parent = context[RequestSpanKey.self]?.context ?? ServiceContext.current ?? .topLevel
        let span = tracer.startSpan(HTTPClientConventions.spanName(request.method), context: parent, ofKind: .client)
        let attempt = context.attempt
        span.updateAttributes { attributes in
            Self.describe(request, into: &attributes)
            if attempt > 1 { attributes["http.request.resend_count"] = attempt - 1 }
        }
        var sent = request
        tracer.inject(span.context, into: &sent.headers, using: HeadersInjector())
        let outgoing = sent
        let outcome: Result<HTTPResponse, NetworkError> = await ServiceContext.withValue(span.context) {
            do throws(NetworkError) { return .success(try await next(outgoing)) } catch { return .failure(error) }
        }
        switch outcome {
        case .success(let response):
            Self.end(span, status: response.status, error: nil)
            return response
        case .failure(let error):
            // A head that arrived before the body broke off still gives the attempt a status.
            Self.end(span, status: error.responseHead?.status, error: error)
            throw error
        }
    }

    /// Ends the request's span with the response's status.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        guard let span = context[RequestSpanKey.self] else { return }
        Self.end(span, status: response.status, error: nil)
    }

    /// Ends the request's span with the error.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        guard let span = context[RequestSpanKey.self] else { return }
        Self.end(span, status: error.responseHead?.status, error: error)
    }

    /// Sets `span`'s outcome by the conventions and ends it.
    static func end(_ span: any Span, status: Int?, error: NetworkError?) {
        if let status { span.attributes["http.response.status_code"] = status }
        if let type = HTTPClientConventions.errorType(status: status, error: error) {
            span.attributes["error.type"] = type
            if let error { span.recordError(error) }
            span.setStatus(SpanStatus(code: .error))
        }
        span.end()
    }

    /// The request's attributes, without secrets.
    static func describe(_ request: HTTPRequest, into attributes: inout SpanAttributes) {
        let method = HTTPClientConventions.method(request.method)
        attributes["http.request.method"] = method.name
        if let original = method.original { attributes["http.request.method_original"] = original }
        if let server = HTTPClientConventions.server(of: Origin(request.url)) {
            attributes["server.address"] = server.address
            attributes["server.port"] = server.port
        }
        if let components = URLComponents(url: request.url, resolvingAgainstBaseURL: true) {
            var safe = URLComponents()
            safe.scheme = components.scheme
            safe.host = components.host
            safe.port = components.port
            safe.percentEncodedPath = components.percentEncodedPath
            if let full = safe.string { attributes["url.full"] = full }
        }
    }
}

/// Writes propagation fields into a request's headers, replacing a field of the same name.
struct HeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into headers: inout HTTPHeaders) {
        headers[key] = value
    }
}
