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

    /// Creates an entry.
    /// - Parameters:
    ///   - level: The level.
    ///   - message: The redacted line.
    public init(level: Level, message: String) {
        self.level = level
        self.message = message
    }
}

/// Where ``LoggingBehavior`` writes. A library never picks a logging backend; bridge to yours:
///
/// ```swift
/// import Logging   // swift-log
/// struct SwiftLogSink: LogSink {
///     let logger: Logger
///     var isEnabled: Bool { logger.logLevel <= .debug }
///     func write(_ entry: LogEntry) { logger.log(level: entry.level == .error ? .error : .debug, "\(entry.message)") }
/// }
/// ```
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
