// Large transfers over loopback, Conveyor against curl, in the same run, on the same server and
// the same file: a download of `/blob?bytes=N` (1 GiB by default) to a file, and an upload of a
// file of N bytes to `/upload`, from Tests/Server/server.py on 127.0.0.1.
// Run from the repository root:
//   swift run --package-path Benchmarks -c release transfer-bench [--bytes N] [--rounds R]
//
// Every transfer runs in a child process, spawned the same way for both sides:
// - Conveyor: this executable again (`--child download|upload …`): NetworkClient.download(_:to:)
//   and a `.file` upload body, on the default URLSessionTransport and on AsyncHTTPClientTransport
//   (both stream: nothing of the body is held in memory). The child reports the
//   transfer's wall time and its peak resident memory growth (VmHWM at the end minus VmRSS
//   before, after a one-byte warm-up transfer and a reset of the peak).
// - curl: `curl -s -o FILE URL` and `curl -s -X POST -T FILE URL` (-T streams from the file);
//   its time is its own `%{time_total}`, its peak RSS what `/usr/bin/time -f %M` reports (n/a
//   without it), its growth that peak minus the peak of a one-byte curl download. A download's
//   time also counts `sync FILE` run right after it: Conveyor reports a download only once its
//   file is on disk (fsync), so curl is measured with the same durability.
// Each download's size and sampled bytes (byte i is i % 256) are checked, and each upload's
// byte count and SHA-256 as the server computed them (against sha256sum of the file).
// Each transfer prints a line as it ends; then a markdown table. With R rounds the order of the
// two sides flips every round, and the table shows the median time and the largest growth, and for
// each Conveyor row its time over curl's in the same round: the median of those ratios and their
// range. Exits 1 when Conveyor's peak RSS growth reaches 50 MB in either
// direction (the acceptance bound), 2 when a transfer fails or delivers wrong bytes.
import BenchSupport
import Foundation

let megabyte = 1_000_000.0
/// The acceptance bound on Conveyor's peak resident memory growth per transfer.
let growthBound = 50_000_000

let arguments = Array(CommandLine.arguments.dropFirst())

if arguments.first == "--child" {
    guard arguments.count == 6, let base = URL(string: arguments[2]), let bytes = Int(arguments[3]) else {
        FileHandle.standardError.write(
            Data("usage: transfer-bench --child download|upload URL BYTES FILE urlsession|ahc\n".utf8))
        exit(2)
    }
    do {
        try await runChild(
            direction: arguments[1], base: base, bytes: bytes, file: URL(fileURLWithPath: arguments[4]),
            transport: arguments[5])
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("transfer-bench child: \(error)\n".utf8))
        exit(1)
    }
}

/// The value after `name` on the command line, if any.
func option(_ name: String) -> Int? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return Int(arguments[index + 1])
}

/// One measured transfer.
struct Measurement {
    var seconds: Double
    /// Peak resident memory growth over the transfer, in bytes (`nil` when not measured).
    var growth: Int?
    /// The process's peak resident memory during the transfer, in bytes (`nil` when not measured).
    var processPeak: Int?
}

/// Writes `bytes` bytes of the blob pattern (byte i is i % 256) to `file`, 1 MiB at a time.
func writeSource(_ file: URL, bytes: Int) throws {
    let block = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0) })
    guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
        throw BenchError("could not create \(file.path)")
    }
    let handle = try FileHandle(forWritingTo: file)
    defer { try? handle.close() }
    var written = 0
    while written < bytes {
        let part = min(block.count, bytes - written)
        try handle.write(contentsOf: part == block.count ? block : block.prefix(part))
        written += part
    }
}

/// Checks a downloaded file's size and the bytes at a few offsets (byte i is i % 256); removes it.
func verifyDownload(_ file: URL, bytes: Int, by side: String) throws {
    defer { try? FileManager.default.removeItem(at: file) }
    let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)?.intValue
    guard size == bytes else { throw BenchError("\(side) downloaded \(size ?? -1) bytes, not \(bytes)") }
    let handle = try FileHandle(forReadingFrom: file)
    defer { try? handle.close() }
    var offsets = [0, 1, 255, 256, 65_535, 65_536, bytes / 3, bytes / 2, bytes - 1]
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    for _ in 0..<24 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        offsets.append(Int(state >> 33) % max(bytes, 1))
    }
    for offset in offsets where offset >= 0 && offset < bytes {
        try handle.seek(toOffset: UInt64(offset))
        guard let byte = try handle.read(upToCount: 1)?.first, byte == UInt8(truncatingIfNeeded: offset) else {
            throw BenchError("\(side)'s download has a wrong byte at offset \(offset)")
        }
    }
}

/// Checks the server's account of an upload.
func verifyUpload(_ reply: UploadReply?, bytes: Int, sha256 expected: String, by side: String) throws {
    guard let reply, reply.bytes == bytes, reply.sha256 == expected else {
        throw BenchError(
            "\(side)'s upload arrived as \(reply.map { "\($0.bytes) bytes, sha256 \($0.sha256)" } ?? "nothing")")
    }
}

/// Runs curl with `arguments` plus `-w %{time_total}`; returns its time and peak RSS.
func curl(_ arguments: [String]) throws -> (seconds: Double, peak: Int?) {
    let finished = try runMeasured("curl", ["-s", "-S", "--fail", "-w", "%{time_total}"] + arguments)
    guard finished.exitCode == 0, let seconds = Double(finished.output.trimmingCharacters(in: .whitespacesAndNewlines))
    else {
        throw BenchError("curl \(arguments.joined(separator: " ")) exited with \(finished.exitCode)")
    }
    return (seconds, finished.peak)
}

/// curl's growth: its peak over that of a one-byte download.
func curlMeasurement(seconds: Double, peak: Int?, baseline: Int?) -> Measurement {
    Measurement(
        seconds: seconds, growth: peak.flatMap { peak in baseline.map { max(0, peak - $0) } }, processPeak: peak)
}

/// Runs a Conveyor scenario in a child process (this executable with `--child`).
func conveyor(_ direction: String, base: URL, bytes: Int, file: URL, transport: String) throws -> (
    Measurement, ChildReport
) {
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    let finished = try run(me, ["--child", direction, base.absoluteString, String(bytes), file.path, transport])
    guard finished.exitCode == 0, let line = finished.output.split(separator: "\n").last,
        let report = try? JSONDecoder().decode(ChildReport.self, from: Data(line.utf8))
    else {
        throw BenchError("the Conveyor \(direction) exited with \(finished.exitCode)")
    }
    let measurement = Measurement(
        seconds: report.seconds, growth: max(0, report.peakAfter - report.residentBefore), processPeak: report.peakAfter
    )
    return (measurement, report)
}

let bytes = option("--bytes") ?? 1 << 30
let rounds = max(1, option("--rounds") ?? 1)
guard bytes > 0 else {
    print("usage: transfer-bench [--bytes N] [--rounds R]")
    exit(2)
}

let began = ContinuousClock.now
let (server, port) = try startTestServer()
let base = URL(string: "http://127.0.0.1:\(port)")!
let blobURL = "http://127.0.0.1:\(port)/blob?bytes=\(bytes)"
let uploadURL = "http://127.0.0.1:\(port)/upload"
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-bench-\(UUID())")

/// The scenarios in table order: each direction's Conveyor rows (URLSession, AsyncHTTPClient),
/// then its curl row.
let labels = [
    "download, Conveyor `client.download(_:to:)` on URLSession",
    "download, Conveyor `client.download(_:to:)` on AsyncHTTPClient", "download, curl `-o file`, then `sync file`",
    "upload, Conveyor `.file` body on URLSession", "upload, Conveyor `.file` body on AsyncHTTPClient",
    "upload, curl `-X POST -T file`",
]
/// Which scenarios are Conveyor's (the growth bound applies to them).
let conveyorScenarios: Set<Int> = [0, 1, 3, 4]
var results = Array(repeating: [Measurement](), count: labels.count)
/// Each scenario's time in each round it ran, for the per-round ratios.
var secondsByRound = Array(repeating: [Int: Double](), count: labels.count)
/// The transfers that failed or delivered wrong bytes.
var errors: [String] = []

let source = directory.appendingPathComponent("source.bin")
let expectedSHA256: String
let curlBaseline: Int?
do {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    try writeSource(source, bytes: bytes)
    expectedSHA256 = try sha256(of: source)
    curlBaseline = try curl(["-o", "/dev/null", "http://127.0.0.1:\(port)/blob?bytes=1"]).peak
} catch {
    print("transfer-bench: \(error)")
    try? FileManager.default.removeItem(at: directory)
    exit(2)
}

/// One transfer of each scenario, checked; in table order.
let transfers: [() throws -> Measurement] = [
    { try conveyorDownload(transport: "urlsession") },
    { try conveyorDownload(transport: "ahc") },
    {
        let file = directory.appendingPathComponent("download-curl.bin")
        let (seconds, peak) = try curl(["-o", file.path, blobURL])
        // The same durability as Conveyor's: the file on disk before the download counts as done.
        let syncStarted = ContinuousClock.now
        guard try run("/usr/bin/env", ["sync", file.path]).exitCode == 0 else { throw BenchError("sync failed") }
        let synced = ContinuousClock.now - syncStarted
        let syncSeconds = Double(synced.components.seconds) + Double(synced.components.attoseconds) / 1e18
        print(String(format: "  (curl's sync: %.2f s of %.2f s)", syncSeconds, seconds + syncSeconds))
        try verifyDownload(file, bytes: bytes, by: "curl")
        return curlMeasurement(seconds: seconds + syncSeconds, peak: peak, baseline: curlBaseline)
    },
    { try conveyorUpload(transport: "urlsession") },
    { try conveyorUpload(transport: "ahc") },
    {
        let replyFile = directory.appendingPathComponent("reply.json")
        let (seconds, peak) = try curl([
            "-X", "POST", "-T", source.path, "-H", "Content-Type: application/octet-stream", "-o", replyFile.path,
            uploadURL,
        ])
        let reply = try? JSONDecoder().decode(UploadReply.self, from: Data(contentsOf: replyFile))
        try verifyUpload(reply, bytes: bytes, sha256: expectedSHA256, by: "curl")
        return curlMeasurement(seconds: seconds, peak: peak, baseline: curlBaseline)
    },
]

func conveyorDownload(transport: String) throws -> Measurement {
    let file = directory.appendingPathComponent("download-conveyor-\(transport).bin")
    let (measurement, _) = try conveyor("download", base: base, bytes: bytes, file: file, transport: transport)
    try verifyDownload(file, bytes: bytes, by: "Conveyor on \(transport)")
    return measurement
}

func conveyorUpload(transport: String) throws -> Measurement {
    let (measurement, report) = try conveyor("upload", base: base, bytes: bytes, file: source, transport: transport)
    try verifyUpload(report.reply, bytes: bytes, sha256: expectedSHA256, by: "Conveyor on \(transport)")
    return measurement
}

func mb(_ bytes: Int?) -> String { bytes.map { String(format: "%.1f MB", Double($0) / megabyte) } ?? "n/a" }

for round in 1...rounds {
    // Each direction's sides back to back: curl first in odd rounds, Conveyor first in even ones.
    for scenario in round % 2 == 1 ? [2, 0, 1, 5, 3, 4] : [0, 1, 2, 3, 4, 5] {
        do {
            let measurement = try transfers[scenario]()
            results[scenario].append(measurement)
            secondsByRound[scenario][round] = measurement.seconds
            print(
                "round \(round), \(labels[scenario]): " + String(format: "%.2f s", measurement.seconds)
                    + ", peak RSS growth \(mb(measurement.growth))")
        } catch {
            errors.append("\(labels[scenario]): \(error)")
            print("round \(round), \(labels[scenario]): failed")
        }
    }
}
server.terminate()
try? FileManager.default.removeItem(at: directory)
print("")

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

let elapsed = ContinuousClock.now - began
print(
    "Large transfers over 127.0.0.1: \(bytes) bytes (\(String(format: "%.1f", Double(bytes) / 1_048_576)) MiB) each way, "
        + "\(rounds) round\(rounds == 1 ? "" : "s")\(rounds > 1 ? " (median time, largest growth)" : ""); "
        + "the whole run took \(elapsed.components.seconds) s")
print("")
print("| scenario | time | MB/s | peak RSS growth | peak RSS |")
print("|---|---:|---:|---:|---:|")
var overBound: [String] = []
for direction in 0..<2 {
    var times: [Int: Double] = [:]
    for scenario in 3 * direction..<3 * direction + 3 {
        let runs = results[scenario]
        guard !runs.isEmpty else {
            print("| \(labels[scenario]) | failed | | | |")
            continue
        }
        let time = median(runs.map(\.seconds))
        let growth = runs.compactMap(\.growth).max()
        times[scenario] = time
        print(
            "| \(labels[scenario]) | " + String(format: "%.2f s | %.0f", time, Double(bytes) / time / megabyte)
                + " | \(mb(growth)) | \(mb(runs.compactMap(\.processPeak).max())) |")
        if conveyorScenarios.contains(scenario), (growth ?? 0) >= growthBound { overBound.append(labels[scenario]) }
    }
    let name = direction == 0 ? "download" : "upload"
    for (scenario, transport) in [(3 * direction, "URLSession"), (3 * direction + 1, "AsyncHTTPClient")] {
        // The ratio of each round (both sides measured back to back), then their median and range.
        let ratios = secondsByRound[scenario].compactMap { round, seconds in
            secondsByRound[3 * direction + 2][round].map { seconds / $0 }
        }.sorted()
        guard let lowest = ratios.first, let highest = ratios.last else { continue }
        print(
            "| **\(name): Conveyor on \(transport) / curl**, per round: median (range) | "
                + String(format: "%.2f× (%.2f–%.2f×) | | | |", median(ratios), lowest, highest))
    }
}
print("")
for error in errors { print("FAILED: \(error)") }
if overBound.isEmpty {
    print("Conveyor's peak RSS growth stayed under \(mb(growthBound)) wherever it was measured.")
} else {
    print("FAILED: Conveyor's peak RSS growth reached \(mb(growthBound)) in: \(overBound.joined(separator: "; ")).")
}
exit(!errors.isEmpty ? 2 : overBound.isEmpty ? 0 : 1)
