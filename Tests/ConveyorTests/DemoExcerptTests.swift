import ConveyorTestSupport
import Foundation
import Testing

/// README's excerpt of what `swift run conveyor-demo` prints is what it prints: each line of the
/// excerpt (but `…`, which stands for lines left out) appears in the demo's output, in order.
/// Durations (`39 µs`) differ run to run, so any duration matches any other, whatever its unit: on a
/// loaded machine an attempt of 37 µs in the excerpt takes 1.2 ms (a CI run failed on that once).
@Suite struct DemoExcerptTests {
    static let readme = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("README.md")

    /// The lines of the block after "An excerpt of what the demo prints:".
    static func excerpt() throws -> [String] {
        let text = try String(contentsOf: readme, encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        let intro = try #require(lines.firstIndex { $0.hasPrefix("An excerpt of what the demo prints") })
        let open = try #require(lines[intro...].firstIndex { $0.hasPrefix("```") })
        let close = try #require(lines[(open + 1)...].firstIndex { $0.hasPrefix("```") })
        return Array(lines[(open + 1)..<close])
    }

    /// `line` with every duration (number and unit) replaced by `#`.
    static func normalized(_ line: String) -> String {
        line.replacingOccurrences(of: #"[0-9]+(\.[0-9]+)? (µs|ms)"#, with: "#", options: .regularExpression)
    }

    @Test func theReadmeExcerptIsWhatTheDemoPrints() async throws {
        let demo = try #require(BuiltExecutable.url("conveyor-demo"), "conveyor-demo was not built next to the tests")
        let process = Process()
        process.executableURL = demo
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Read and wait on a thread of its own: blocking one of the two cooperative threads for
        // the demo's run (25 s under the full suite) stalled every test in flight for as long.
        let (printed, status) = await withCheckedContinuation { (done: CheckedContinuation<(Data, Int32), Never>) in
            Thread.detachNewThread {
                let printed = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                done.resume(returning: (printed, process.terminationStatus))
            }
        }
        #expect(status == 0)

        let printedLines = String(decoding: printed, as: UTF8.self).components(separatedBy: "\n").map(Self.normalized)
        let wanted = try Self.excerpt().filter { $0 != "…" && !$0.isEmpty }.map(Self.normalized)
        #expect(wanted.count >= 20, "the excerpt has \(wanted.count) lines")
        var next = printedLines.startIndex
        for line in wanted {
            guard let found = printedLines[next...].firstIndex(of: line) else {
                Issue.record("README's demo excerpt has a line the demo does not print (after the lines matched so far): \(line)")
                return
            }
            next = found + 1
        }
    }

    @Test func aLineTheDemoDoesNotPrintIsFound() {
        // The check above can fail: a changed line is not in the demo's output.
        let printed = ["  ✔  GET /me                2         401 → 1 refresh → 200"].map(Self.normalized)
        #expect(printed.firstIndex(of: Self.normalized("  ✔  GET /me                2         401 → 2 refreshes → 200")) == nil)
        #expect(Self.normalized("  GET /v1/me #1 401 39 µs") == Self.normalized("  GET /v1/me #1 401 4.5 µs"))
        // A slow machine's millisecond matches the excerpt's microseconds; another status does not.
        #expect(Self.normalized("  GET /v1/me #1 401 39 µs") == Self.normalized("  GET /v1/me #1 401 1.2 ms"))
        #expect(Self.normalized("  GET /v1/me #1 401 39 µs") != Self.normalized("  GET /v1/me #1 200 39 µs"))
    }
}
