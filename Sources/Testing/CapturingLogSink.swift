public import Conveyor
import ConveyorPipeline

/// A ``Conveyor/LogSink`` that keeps every line ``Conveyor/LoggingBehavior`` writes, for tests
/// that read the log: what was logged, at which level, and that no secret is in it.
///
/// ```swift
/// let sink = CapturingLogSink()
/// let client = NetworkClient(baseURL: baseURL, transport: mock) {
///     AuthTokenBehavior(tokens: InMemoryTokenStore(token: "secret-token"))
///     LoggingBehavior(sink: sink)
/// }
/// _ = try await client.send(Request<Void>(path: "/me"))
/// #expect(sink.entries.map(\.level) == [.debug, .info])
/// #expect(!sink.text.contains("secret-token"))
/// ```
///
/// A custom sink needs ``Conveyor/LogSink/isEnabled`` and ``Conveyor/LogSink/write(_:)``;
/// ``Conveyor/LogSink/accepts(_:)`` is optional (this one implements it to take only `levels`).
public final class CapturingLogSink: LogSink, Sendable {
    private let levels: Set<LogEntry.Level>
    private let lines = Locked<[LogEntry]>([])

    /// Creates a sink that keeps the lines of `levels` (every level by default).
    /// - Parameter levels: The levels the sink accepts; ``Conveyor/LoggingBehavior`` builds no
    ///   other line.
    public init(levels: Set<LogEntry.Level> = [.debug, .info, .error]) {
        self.levels = levels
    }

    /// Whether the sink accepts any level.
    public var isEnabled: Bool { !levels.isEmpty }

    /// Whether `level` is one of the sink's levels.
    /// - Parameter level: The level of a line about to be built.
    public func accepts(_ level: LogEntry.Level) -> Bool { levels.contains(level) }

    /// Keeps `entry`.
    /// - Parameter entry: The line.
    public func write(_ entry: LogEntry) { lines.withLock { $0.append(entry) } }

    /// The lines written so far, oldest first.
    public var entries: [LogEntry] { lines.withLock { $0 } }

    /// Every line's message and metadata values (`key=value`), one per line: everything a
    /// structured log backend would store, to search for a secret.
    public var text: String {
        entries.flatMap { entry in
            [entry.message] + entry.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        }.joined(separator: "\n")
    }

    /// Forgets every line.
    public func reset() { lines.withLock { $0.removeAll() } }
}
