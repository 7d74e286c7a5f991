public import Conveyor
public import Logging

/// A ``LogSink`` that writes ``LoggingBehavior``'s entries to a swift-log `Logger`, in swift-log's
/// style: a stable message and the facts as metadata.
///
/// ```swift
/// import ConveyorLogging
/// import Logging
///
/// let logger = Logger(label: "com.example.api")
/// let client = NetworkClient(baseURL: api) {
///     LoggingBehavior(sink: SwiftLogSink(logger: logger))
/// }
/// // debug: HTTP request succeeded conveyor.request_id=3 conveyor.attempt=1 http.request.method=GET
/// //        http.response.status_code=200 server.address=api.example.com conveyor.duration_ms=18.204 …
/// ```
///
/// - **Messages** never change with the request: `HTTP request attempt`, `HTTP request succeeded`,
///   `HTTP request failed`. What varies is metadata (``LogEntry/metadata``: `conveyor.request_id`,
///   `conveyor.attempt`, `http.request.method`, `server.address`, `server.port`, `url.full`,
///   `http.response.status_code`, `error.type`, `conveyor.duration_ms`…), so a log backend can
///   index and query it. With `includesLine`, the human line (`→ #3 GET https://… [headers]`)
///   is added as `conveyor.line`.
/// - **Levels** follow the swift-server guidance for libraries: an attempt is `.trace`, an outcome
///   `.debug`, a failure too — the caller receives the error and decides whether it deserves more
///   (change ``Levels`` if your service wants them higher). The logger's own level filters them,
///   and an entry the logger would drop is never built.
/// - Everything arrives redacted (no credential header, query secret or echoed token), in the
///   message and in every metadata value, so it is safe for any log handler.
public struct SwiftLogSink: LogSink {
    /// The swift-log level of each kind of entry.
    public struct Levels: Sendable, Hashable {
        /// An attempt about to be sent; `.trace` by default.
        public var attempt: Logger.Level
        /// A request that succeeded; `.debug` by default.
        public var success: Logger.Level
        /// A request that failed (the caller receives the error as well); `.debug` by default.
        public var failure: Logger.Level

        /// Creates levels.
        /// - Parameters:
        ///   - attempt: An attempt about to be sent.
        ///   - success: A request that succeeded.
        ///   - failure: A request that failed.
        public init(attempt: Logger.Level = .trace, success: Logger.Level = .debug, failure: Logger.Level = .debug) {
            self.attempt = attempt
            self.success = success
            self.failure = failure
        }
    }

    /// The logger entries go to.
    public let logger: Logger
    /// Metadata added to every entry, for example `["component": "api-client"]`.
    public let metadata: Logger.Metadata
    /// The level of each kind of entry.
    public let levels: Levels
    /// Whether the human line is added as `conveyor.line`.
    public let includesLine: Bool

    /// Creates a sink.
    /// - Parameters:
    ///   - logger: The logger entries go to; its level decides which are written.
    ///   - metadata: Metadata added to every entry.
    ///   - levels: The level of each kind of entry; the swift-server library guidance by default.
    ///   - includesLine: Whether the human line is added as `conveyor.line` (off by default).
    public init(logger: Logger, metadata: Logger.Metadata = [:], levels: Levels = Levels(), includesLine: Bool = false) {
        self.logger = logger
        self.metadata = metadata
        self.levels = levels
        self.includesLine = includesLine
    }

    /// Whether the logger writes any kind of entry; when it writes none, Conveyor builds nothing.
    public var isEnabled: Bool { logger.logLevel <= max(levels.attempt, levels.success, levels.failure) }

    /// Whether the logger writes `level`'s entries: with the logger at `.debug`, the per-attempt
    /// `.trace` entries are never built.
    /// - Parameter level: The level of an entry about to be built.
    public func accepts(_ level: LogEntry.Level) -> Bool { logger.logLevel <= self.level(for: level) }

    /// Writes one entry: its stable message, its metadata, this sink's metadata.
    /// - Parameter entry: The redacted entry.
    public func write(_ entry: LogEntry) {
        var all = metadata
        for (key, value) in entry.metadata { all[key] = .string(value) }
        if includesLine { all["conveyor.line"] = .string(entry.message) }
        logger.log(level: level(for: entry.level), "\(Self.message(for: entry.level))", metadata: all)
    }

    /// The stable message of each kind of entry.
    static func message(for level: LogEntry.Level) -> String {
        switch level {
        case .debug: "HTTP request attempt"
        case .info: "HTTP request succeeded"
        case .error: "HTTP request failed"
        }
    }

    /// swift-log's level for a kind of entry.
    func level(for level: LogEntry.Level) -> Logger.Level {
        switch level {
        case .debug: levels.attempt
        case .info: levels.success
        case .error: levels.failure
        }
    }
}
