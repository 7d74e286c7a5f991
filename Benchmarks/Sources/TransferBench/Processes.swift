import Foundation

/// Why the benchmark stopped.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs a program (looked up on `PATH`) with its standard input empty, waits for it, and
/// returns its exit code and standard output.
func run(_ program: String, _ arguments: [String]) throws -> (exitCode: Int32, output: String) {
    let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-bench-\(UUID()).out")
    guard FileManager.default.createFile(atPath: outputFile.path, contents: nil) else {
        throw BenchError("could not create \(outputFile.path)")
    }
    defer { try? FileManager.default.removeItem(at: outputFile) }
    let output = try FileHandle(forWritingTo: outputFile)
    defer { try? output.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [program] + arguments
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = output
    try process.run()
    process.waitUntilExit()
    return (process.terminationStatus, (try? String(contentsOf: outputFile, encoding: .utf8)) ?? "")
}

/// Runs a program under `/usr/bin/time -f %M`, which reports the peak resident memory of that
/// program alone. (`wait4`'s own `ru_maxrss` would not do: a child spawned from this process
/// starts with this process's peak, a fork or a `posix_spawn` sharing its memory until `exec`.)
/// - Returns: The exit code, the standard output, and the peak in bytes (`nil` without
///   `/usr/bin/time`: then the program runs alone).
func runMeasured(_ program: String, _ arguments: [String]) throws -> (exitCode: Int32, output: String, peak: Int?) {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/time") else {
        let (exitCode, output) = try run(program, arguments)
        return (exitCode, output, nil)
    }
    let peakFile = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-bench-\(UUID()).rss")
    defer { try? FileManager.default.removeItem(at: peakFile) }
    let (exitCode, output) = try run("/usr/bin/time", ["-f", "%M", "-o", peakFile.path, program] + arguments)
    let text = (try? String(contentsOf: peakFile, encoding: .utf8)) ?? ""
    let kibibytes = text.split(whereSeparator: \.isNewline).last.flatMap {
        Int($0.trimmingCharacters(in: .whitespaces))
    }
    return (exitCode, output, kibibytes.map { $0 * 1024 })
}

