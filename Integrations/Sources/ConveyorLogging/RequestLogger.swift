public import Conveyor
public import Logging

/// Hands a request's `Logger` to what runs below it — AsyncHTTPClient above all — with the
/// request's identity as metadata, so its lines join Conveyor's.
///
/// ```swift
/// let client = NetworkClient(baseURL: api, transport: try AsyncHTTPClientTransport(client: http)) {
///     LoggingBehavior(sink: SwiftLogSink(logger: logger))
///     RequestLoggerBehavior(logger: logger)   // AsyncHTTPClient logs with conveyor.request_id
/// }
/// ```
///
/// For each attempt, ``RequestLogger/current`` is `logger` with `conveyor.request_id` and
/// `conveyor.attempt` (the keys ``SwiftLogSink`` writes) while the rest of the chain and the
/// transport run. `AsyncHTTPClientTransport` passes it to AsyncHTTPClient's `execute`, whose
/// connection-pool and request lines then carry them.
public struct RequestLoggerBehavior: AttemptIntercepting {
    /// The name used by opt-out and in errors.
    public let name: String
    /// The logger handed down.
    public let logger: Logger

    /// Creates the behavior.
    /// - Parameters:
    ///   - logger: The logger handed down; its level decides what the transport logs.
    ///   - name: The behavior's name, for opt-out; `"RequestLoggerBehavior"` by default.
    public init(logger: Logger, name: String? = nil) {
        self.logger = logger
        self.name = name ?? "RequestLoggerBehavior"
    }

    /// Runs the rest of the attempt with the request's logger as ``RequestLogger/current``.
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext)
        async throws -> HTTPResponse
    {
        var logger = logger
        logger[metadataKey: "conveyor.request_id"] = "\(context.requestID.rawValue)"
        logger[metadataKey: "conveyor.attempt"] = "\(context.attempt)"
        return try await RequestLogger.$current.withValue(logger) { try await next(request) }
    }
}

/// The logger of the attempt running in this task, set by ``RequestLoggerBehavior``.
public enum RequestLogger {
    /// The attempt's logger, with its request's metadata; `nil` outside one, or when no
    /// ``RequestLoggerBehavior`` is in the chain.
    @TaskLocal public static var current: Logger?
}
