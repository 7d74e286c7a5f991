import ConveyorTestSupport
import ConveyorTransportConformance
import Foundation
import Testing

/// Runs a scenario of `test-child` (Tests/TestChild) in a process of its own: a test that measures
/// memory measures that process alone, and a platform trap fails that test instead of the run.
///
/// ```swift
/// let found = try #require(await TestChild.run(["log-preview"]))
/// #expect(found["leaked"] == "false")
/// ```
enum TestChild {
    /// Runs the child with `arguments` and returns its `result key=value` lines. Records an issue
    /// and returns `nil` when the child is missing, ends with a signal (its fatal line in the
    /// issue), exits with a failure, or outlives `bound`.
    static func run(
        _ arguments: [String], within bound: Duration = .seconds(240), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> [String: String]? {
        guard let executable = BuiltExecutable.url("test-child") else {
            Issue.record("test-child was not built next to the test binary", sourceLocation: sourceLocation)
            return nil
        }
        let ended: ChildProcess.Ended
        do {
            ended = try await ChildProcess.run(executable, arguments: arguments, within: bound)
        } catch {
            Issue.record("test-child did not start: \(error)", sourceLocation: sourceLocation)
            return nil
        }
        let errors = String(decoding: ended.standardError, as: UTF8.self)
        let scenario = arguments.first ?? ""
        switch ended.how {
        case .exit(0) where !ended.timedOut: break
        case .exit(let status):
            let bounded = ended.timedOut ? " after its \(bound)" : ""
            let message = "test-child \(scenario) exited with \(status)\(bounded): \(ChildProcess.fatalLine(in: errors))"
            Issue.record(Comment(rawValue: message), sourceLocation: sourceLocation)
            return nil
        case .signal(let signal):
            let bounded = ended.timedOut ? " when its \(bound) passed" : ""
            let message =
                "test-child \(scenario) ended with signal \(signal)\(ChildProcess.signalName(signal))\(bounded): "
                + ChildProcess.fatalLine(in: errors)
            Issue.record(Comment(rawValue: message), sourceLocation: sourceLocation)
            return nil
        }
        var found: [String: String] = [:]
        for line in String(decoding: ended.standardOutput, as: UTF8.self).split(separator: "\n")
        where line.hasPrefix("result ") {
            let pair = line.dropFirst("result ".count)
            guard let equals = pair.firstIndex(of: "=") else { continue }
            found[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        return found
    }
}

extension Dictionary where Key == String, Value == String {
    /// The value of `key` as a number, or `nil`.
    func number(_ key: String) -> Int? { self[key].flatMap { Int($0) } }
}
