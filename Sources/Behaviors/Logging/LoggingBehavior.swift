public import ConveyorPipeline

/// Logs one line per attempt and one per outcome, with secrets redacted. Off by default:
/// with a disabled sink it builds no strings and costs next to nothing.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     AuthTokenBehavior(tokens: keychain)
///     LoggingBehavior(sink: PrintLogSink(), bodyPreviewLimit: 512)   // register it last
/// }
/// // [conveyor] → #3 POST https://api.test/login?client=ios attempt 1 [Authorization: ***, Content-Type: application/json]
/// // [conveyor] ← #3 200 after 1 attempt(s), 18 bytes
/// ```
///
/// Register it **last**: its `modify` hook runs after the other behaviors' and logs each attempt
/// as it will be sent. Credential headers (``SensitiveHeaders``), URL user info
/// and the ``Redactor``'s headers, query items and body fields show as `***`. Every secret value
/// the request carried (credential headers, cookies, user info, hidden query items and body
/// fields) is also scrubbed from every later line, in every encoding a server may echo it in
/// (JSON-escaped, percent- or form-encoded), and a preview never ends in part of one. Previews
/// read at most `bodyPreviewLimit` + 4 KiB of a body, whatever its size.
///
/// Only the lines the sink accepts (``LogSink/accepts(_:)``) are built: attempts are `.debug`,
/// successes `.info`, failures `.error`. A sink that drops `.debug` pays nothing per attempt.
public struct LoggingBehavior: RequestModifying, SuccessObserving, FailureObserving {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String

    /// Credential values this request sent, scrubbed from every later line (a server may echo them).
    enum SentSecrets: RequestContextKey { static let defaultValue: [String] = [] }
    /// How long the request has taken, from its first attempt's preparation.
    enum Elapsed: RequestContextKey { static let defaultValue: (@Sendable () -> Duration)? = nil }

    /// Where lines go.
    package let sink: any LogSink
    /// What to hide.
    package let redactor: Redactor
    /// Bytes of request/response body to show; 0 (the default) shows none.
    package let bodyPreviewLimit: Int
    /// Whether request headers are logged.
    package let logsHeaders: Bool
    /// Starts a stopwatch on the injected clock.
    let stopwatch: @Sendable () -> @Sendable () -> Duration
    /// The scrubbers of the last sets of secrets the requests carried: one token, one scrubber.
    let scrubbers = SecretScrubberCache()

    /// Creates the behavior.
    /// - Parameters:
    ///   - sink: Where lines go.
    ///   - redactor: What to hide.
    ///   - bodyPreviewLimit: Bytes of body to show; 0 shows none.
    ///   - logsHeaders: Whether request headers are logged.
    ///   - clock: The clock `conveyor.duration_ms` is measured on; inject a manual one in tests.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default. Give two behaviors of one type different names to leave one out.
    public init<C: Clock>(
        sink: any LogSink, redactor: Redactor = Redactor(), bodyPreviewLimit: Int = 0, logsHeaders: Bool = true,
        clock: C = ContinuousClock(), name: String? = nil
    ) where C.Duration == Duration {
        self.name = name ?? String(describing: Self.self)
        self.sink = sink
        self.redactor = redactor
        self.bodyPreviewLimit = max(0, bodyPreviewLimit)
        self.logsHeaders = logsHeaders
        self.stopwatch = {
            let start = clock.now
            return { start.duration(to: clock.now) }
        }
    }

    /// Logs the attempt as it will be sent.
    public func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        guard sink.isEnabled else { return }
        let logsAttempts = sink.accepts(.debug)
        // The stopwatch times every line's `conveyor.duration_ms`; a sink that takes no line
        // gets none started (it cost a closure and a context value: 1,700 instructions, 3 mallocs).
        if context.attempt == 1, logsAttempts || sink.accepts(.info) || sink.accepts(.error) {
            context[Elapsed.self] = stopwatch()
        }
        guard logsAttempts else { return }
        let secrets = collectSecrets(of: request, context: context)
        let scrubber = scrubbers.scrubber(for: secrets)
        var line = "→ \(context.requestID) \(request.method) \(redactor.redact(request.url)) attempt \(context.attempt)"
        if logsHeaders && !request.headers.isEmpty {
            line += " [" + request.headers.map { "\($0.name): \(redactor.value(of: $0, sensitive: request.sensitiveHeaders))" }.joined(separator: ", ") + "]"
        }
        if let body = request.body, bodyPreviewLimit > 0 {
            line += " body: "
                + redactor.preview(
                    body, contentType: request.headers["Content-Type"], limit: bodyPreviewLimit, scrubber: scrubber)
        }
        sink.write(
            LogEntry(
                level: .debug, message: redactor.scrub(line, scrubber: scrubber),
                metadata: metadata(of: request, context: context, scrubber: scrubber)))
    }

    /// Logs the success.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        guard sink.accepts(.info) else { return }
        let sent = sink.accepts(.debug) ? context[SentSecrets.self] : collectSecrets(of: response.request, context: context)
        let scrubber = scrubbers.scrubber(for: sent)
        var line = "← \(context.requestID) \(response.status) after \(context.attempt) attempt(s), \(response.body.count) bytes"
        if bodyPreviewLimit > 0 && !response.body.isEmpty {
            line += " body: "
                + redactor.preview(
                    response.body, contentType: response.headers["Content-Type"], limit: bodyPreviewLimit,
                    scrubber: scrubber)
        }
        var metadata = metadata(of: response.request, context: context, scrubber: scrubber)
        metadata["http.response.status_code"] = String(response.status)
        metadata["http.response.body.size"] = String(response.body.count)
        sink.write(LogEntry(level: .info, message: redactor.scrub(line, scrubber: scrubber), metadata: metadata))
    }

    /// Logs the failure (the error's description never contains secrets).
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        guard sink.accepts(.error) else { return }
        let secrets =
            sink.accepts(.debug)
            ? context[SentSecrets.self]
            : error.response.map { collectSecrets(of: $0.request, context: context) } ?? context[SentSecrets.self]
        var line = "✕ \(context.requestID) failed after \(context.attempt) attempt(s): \(error)"
        let refusal = context.retryRefusal
        if let refusal { line += " (not retried: the retry budget for \(refusal.origin.host) is spent)" }
        let scrubber = scrubbers.scrubber(for: secrets)
        var metadata = metadata(of: error.response?.request ?? context.originalRequest, context: context, scrubber: scrubber)
        if refusal != nil { metadata["conveyor.retry.refused"] = "budget" }
        if let status = error.responseHead?.status {
            metadata["http.response.status_code"] = String(status)
            metadata["error.type"] = status >= 400 ? String(status) : error.name
        } else {
            metadata["error.type"] = error.name
        }
        sink.write(LogEntry(level: .error, message: redactor.scrub(line, scrubber: scrubber), metadata: metadata))
    }

    /// The facts every line carries (``LogEntry/metadata``), redacted as the line is.
    private func metadata(of request: HTTPRequest, context: RequestContext, scrubber: SecretScrubber) -> [String: String] {
        // Room for every key a line adds (14 at most): a dictionary that grows rehashes them all.
        var metadata = [String: String](minimumCapacity: 14)
        metadata["conveyor.request_id"] = String(context.requestID.rawValue)
        metadata["conveyor.attempt"] = String(context.attempt)
        metadata["http.request.method"] = request.method.rawValue
        metadata["url.full"] = redactor.scrub(redactor.redact(request.url), scrubber: scrubber)
        if let origin = Origin(request.url) {
            metadata["server.address"] = origin.host
            metadata["server.port"] = String(origin.port)
        }
        if let elapsed = context[Elapsed.self] { metadata["conveyor.duration_ms"] = Self.milliseconds(elapsed()) }
        if let paced = context.pacedFor { metadata["conveyor.ratelimit.waited_ms"] = Self.milliseconds(paced) }
        if let hedges = context.hedgeReport {
            metadata["conveyor.hedge.sent"] = String(hedges.sent)
            if hedges.won { metadata["conveyor.hedge.won"] = "true" }
            if hedges.refused { metadata["conveyor.hedge.refused"] = "budget" }
            if hedges.cancelled > 0 { metadata["conveyor.hedge.cancelled"] = String(hedges.cancelled) }
        }
        return metadata
    }

    /// `12.345`: milliseconds with three decimals (a duration past `Int64`'s microseconds, or
    /// below zero, is clamped instead of trapping).
    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let scaled = max(0, seconds).multipliedReportingOverflow(by: 1_000_000)
        let total = scaled.partialValue.addingReportingOverflow(max(0, attoseconds) / 1_000_000_000_000)
        let microseconds = scaled.overflow || total.overflow ? Int64.max : total.partialValue
        let fraction = String(microseconds % 1_000)
        return "\(microseconds / 1_000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// The secrets every attempt so far carried, `request`'s added: collected per attempt when
    /// `.debug` lines are built, and from the request as sent when only the outcome is logged.
    private func collectSecrets(of request: HTTPRequest, context: RequestContext) -> [String] {
        context.update(SentSecrets.self) { known in
            for value in redactor.secretValues(in: request) where !known.contains(value) { known.append(value) }
            return known
        }
    }
}
