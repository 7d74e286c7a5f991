public import Conveyor
public import Logging

/// A ``LogSink`` that writes ``LoggingBehavior``'s lines to a swift-log `Logger`.
///
/// ```swift
/// import ConveyorLogging
/// import Logging
///
/// let logger = Logger(label: "com.example.api")
/// let client = NetworkClient(baseURL: api) {
///     LoggingBehavior(sink: SwiftLogSink(logger: logger))
/// }
/// ```
///
/// Levels map one to one: an attempt being sent is `.debug`, a success `.info`, a failure
/// `.error`; the logger's own level filters them. Lines arrive redacted (no credential header,
/// query secret or echoed token), so they are safe for any log handler.
public struct SwiftLogSink: LogSink {
    /// The logger lines go to.
    public let logger: Logger
    /// Metadata added to every line, for example `["component": "api-client"]`.
    public let metadata: Logger.Metadata

    /// Creates a sink.
    /// - Parameters:
    ///   - logger: The logger lines go to; its level decides which are written.
    ///   - metadata: Metadata added to every line.
    public init(logger: Logger, metadata: Logger.Metadata = [:]) {
        self.logger = logger
        self.metadata = metadata
    }

    /// Whether the logger writes failures at least (`.error` and below); when it writes nothing
    /// Conveyor builds no strings at all.
    public var isEnabled: Bool { logger.logLevel <= .error }

    /// Whether the logger writes `level`'s lines: with the logger at `.info`, the per-attempt
    /// `.debug` lines are never built.
    /// - Parameter level: The level of a line about to be built.
    public func accepts(_ level: LogEntry.Level) -> Bool { logger.logLevel <= Self.level(for: level) }

    /// Writes one line at the matching level.
    /// - Parameter entry: The redacted line.
    public func write(_ entry: LogEntry) {
        logger.log(level: Self.level(for: entry.level), "\(entry.message)", metadata: metadata.isEmpty ? nil : metadata)
    }

    /// swift-log's level for a Conveyor level.
    static func level(for level: LogEntry.Level) -> Logger.Level {
        switch level {
        case .debug: .debug
        case .info: .info
        case .error: .error
        }
    }
}
