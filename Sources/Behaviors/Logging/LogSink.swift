/// One line written by ``LoggingBehavior``.
public struct LogEntry: Sendable, Hashable {
    /// How important the line is.
    public enum Level: String, Sendable, Hashable, Comparable {
        /// An attempt is being sent.
        case debug
        /// A request succeeded.
        case info
        /// A request failed.
        case error

        /// `debug < info < error`.
        public static func < (lhs: Level, rhs: Level) -> Bool {
            let order: [Level] = [.debug, .info, .error]
            return (order.firstIndex(of: lhs) ?? 0) < (order.firstIndex(of: rhs) ?? 0)
        }
    }

    /// The level.
    public let level: Level
    /// The line, already redacted.
    public let message: String
    /// The line's facts, one value per key, already redacted, for a structured log:
    ///
    /// | key | on | value |
    /// |---|---|---|
    /// | `conveyor.request_id` | every line | the logical request's number (`RequestID`) |
    /// | `conveyor.attempt` | every line | the attempt, from 1 (on an outcome, the last one) |
    /// | `http.request.method` | every line | the method |
    /// | `server.address`, `server.port` | every line | where the request went |
    /// | `url.full` | every line | the URL, user info and redacted query items as `***` |
    /// | `http.response.status_code` | success; failure with a response | the status |
    /// | `http.response.body.size` | success | the body's bytes |
    /// | `error.type` | failure | the status code for a status of 400 or more, else the ``NetworkError`` kind's name |
    /// | `conveyor.duration_ms` | every line | from the first attempt's preparation to this line (on an outcome, the request's duration), on the behavior's clock |
    ///
    /// No header, cookie, body or secret query value is ever a value here.
    public let metadata: [String: String]

    /// Creates an entry.
    /// - Parameters:
    ///   - level: The level.
    ///   - message: The redacted line.
    ///   - metadata: The line's redacted facts.
    public init(level: Level, message: String, metadata: [String: String] = [:]) {
        self.level = level
        self.message = message
        self.metadata = metadata
    }
}

/// Where ``LoggingBehavior`` writes. A library never picks a logging backend; bridge to yours:
///
/// ```swift
/// import Logging   // swift-log
/// struct SwiftLogSink: LogSink {
///     let logger: Logger
///     var isEnabled: Bool { logger.logLevel <= .debug }
///     func write(_ entry: LogEntry) {
///         logger.debug("\(entry.message)", metadata: entry.metadata.mapValues { .string($0) })
///     }
/// }
/// ```
///
/// (ConveyorIntegrations' `SwiftLogSink` is such a sink, with swift-log's conventions.)
///
/// With OSLog: `func write(_ entry: LogEntry) { logger.debug("\(entry.message, privacy: .public)") }`
/// (the message is already redacted).
public protocol LogSink: Sendable {
    /// Whether anything is written. When `false`, ``LoggingBehavior`` builds no strings at all.
    var isEnabled: Bool { get }
    /// Whether lines of `level` are written. ``LoggingBehavior`` builds only the lines a sink
    /// accepts: a sink that drops `.debug` costs nothing for the per-attempt line (no redaction,
    /// no preview). By default, ``isEnabled`` for every level.
    /// - Parameter level: The level of a line about to be built.
    func accepts(_ level: LogEntry.Level) -> Bool
    /// Writes one line.
    /// - Parameter entry: The line.
    func write(_ entry: LogEntry)
}

extension LogSink {
    /// ``isEnabled``, for every level.
    /// - Parameter level: The level of a line about to be built.
    public func accepts(_ level: LogEntry.Level) -> Bool { isEnabled }
}

/// Prints each line to standard output.
public struct PrintLogSink: LogSink {
    /// Creates the sink.
    public init() {}
    /// Always `true`.
    public var isEnabled: Bool { true }
    /// Prints `[conveyor] message`.
    public func write(_ entry: LogEntry) { print("[conveyor] \(entry.message)") }
}
