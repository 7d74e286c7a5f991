public import ConveyorPipeline
public import Foundation

/// Live, record or replay: one switch for a client's transport, read from the environment (a
/// UI test's launch environment, a scheme's, CI's).
///
/// ```swift
/// // APP_HAR unset: the network. "record:/tmp/login.har": the network, recorded.
/// // "replay:/path/login.har": the recording, offline ("replay-lenient:…" in any order).
/// let client = NetworkClient(
///     baseURL: URL(string: "https://api.example.com")!,
///     transport: try HARMode(environmentVariable: "APP_HAR").transport(wrapping: URLSessionTransport.shared))
/// ```
public enum HARMode: Sendable, Hashable {
    /// The wrapped transport, nothing recorded.
    case live
    /// The wrapped transport, every exchange recorded to this file.
    case record(URL)
    /// Answers from this file, nothing sent. Every transport this mode makes in a process is
    /// one replay of the file (as every recorder of one file adds to it): the clients of an app
    /// that were recorded together replay together, strict order kept per origin.
    case replay(URL, HARReplayTransport.Mode)

    /// The mode a variable of `environment` names: unset or empty for ``live``,
    /// `record:<path>`, `replay:<path>` (strict) or `replay-lenient:<path>`.
    /// - Parameters:
    ///   - variable: The variable's name.
    ///   - environment: The environment; the process's by default.
    /// - Throws: ``HARFileError`` for any other value.
    public init(
        environmentVariable variable: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        guard let value = environment[variable], !value.isEmpty else {
            self = .live
            return
        }
        let (kind, path) = (value.prefix { $0 != ":" }, value.drop { $0 != ":" }.dropFirst())
        guard !path.isEmpty else {
            throw HARFileError(description: "\(variable) must be record:<path>, replay:<path> or replay-lenient:<path>")
        }
        let file = URL(fileURLWithPath: String(path))
        switch kind {
        case "record": self = .record(file)
        case "replay": self = .replay(file, .strict)
        case "replay-lenient": self = .replay(file, .lenient)
        default:
            throw HARFileError(description: "\(variable) must be record:<path>, replay:<path> or replay-lenient:<path>")
        }
    }

    /// The transport for this mode.
    /// - Parameter live: The transport that sends, for ``live`` and ``record(_:)``.
    /// - Returns: `live`, `live` recorded by a ``HARRecordingTransport``, or the process's
    ///   ``HARReplayTransport`` of the file (the same one for every client, until the file's
    ///   bytes change).
    /// - Throws: ``HARFileError`` when a replay's file cannot be read.
    public func transport(wrapping live: any HTTPTransport) throws -> any HTTPTransport {
        switch self {
        case .live: live
        case .record(let file): HARRecordingTransport(wrapping: live, recorder: HARRecorder(file: file))
        case .replay(let file, let mode): try HARReplayTransport.shared(contentsOf: file, mode: mode)
        }
    }
}
