// End to end over loopback: raw URLSession.data(for:) vs NetworkClient with the realistic chain,
// against Tests/Server/server.py on 127.0.0.1, in interleaved rounds, at 1 and 8 requests in flight.
// Run from the repository root: swift run --package-path Benchmarks -c release loopback-bench [rounds] [requests]
import BenchSupport
import Conveyor
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Starts the test server and returns it with its port.
func startServer() throws -> (Process, Int) {
    let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Server/server.py")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", script.path]
    let output = Pipe()
    process.standardOutput = output
    process.standardInput = Pipe()  // the server exits when this closes
    try process.run()
    var line = Data()
    while !line.contains(UInt8(ascii: "\n")) {
        let chunk = output.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        line.append(chunk)
    }
    let text = String(decoding: line, as: UTF8.self)
    guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5).prefix { $0.isNumber }) else {
        throw CocoaError(.fileReadCorruptFile)
    }
    return (process, port)
}

/// Runs `total` operations with `inFlight` at a time; returns requests per second.
func measure(total: Int, inFlight: Int, _ operation: @escaping @Sendable () async throws -> Void) async throws -> Double {
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        var started = 0
        for _ in 0..<min(inFlight, total) {
            group.addTask { try await operation() }
            started += 1
        }
        while try await group.next() != nil {
            if started < total {
                group.addTask { try await operation() }
                started += 1
            }
        }
    }
    let elapsed = ContinuousClock.now - start
    return Double(total) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let rounds = arguments.first ?? 7
let perRound = arguments.dropFirst().first ?? 400

let (server, port) = try startServer()
defer { server.terminate() }
let base = URL(string: "http://127.0.0.1:\(port)")!
let transport = URLSessionTransport(configuration: .ephemeral)
let session = transport.session
let client = NetworkClient(baseURL: base, transport: transport) { realisticBehaviors() }
// The raw path is what a hand-written call site does: build a URLRequest with the same headers
// the realistic chain adds, send it, decode with a shared decoder. So the ratio measures the
// pipeline, not the header count or a reused request.
let rawURL = base.appendingPathComponent("json/movies")
let decoder = JSONDecoder()

let raw: @Sendable () async throws -> Void = {
    var request = URLRequest(url: rawURL)
    request.allHTTPHeaderFields = [
        "User-Agent": "Bench/1.0", "Accept-Language": "en", "Authorization": "Bearer cached-token-0123456789",
    ]
    let (data, _) = try await session.data(for: request)
    _ = try decoder.decode([[String: AnyCodableValue]].self, from: data)
}
let conveyor: @Sendable () async throws -> Void = {
    _ = try await client.send(Request<[[String: AnyCodableValue]]>(path: "/json/movies"))
}

// Warm up connections and code paths.
_ = try await measure(total: 200, inFlight: 8, raw)
_ = try await measure(total: 200, inFlight: 8, conveyor)

print("Loopback: \(rounds) interleaved rounds × \(perRound) requests per mode, GET /json/movies decoded as JSON")
print("")
print("| in flight | raw URLSession req/s (median) | NetworkClient + realistic chain req/s (median) | ratio |")
print("|---:|---:|---:|---:|")
for inFlight in [1, 8] {
    var rawRates: [Double] = []
    var conveyorRates: [Double] = []
    for round in 0..<rounds {
        // Alternate which goes first so neither always gets the warmer cache.
        if round % 2 == 0 {
            rawRates.append(try await measure(total: perRound, inFlight: inFlight, raw))
            conveyorRates.append(try await measure(total: perRound, inFlight: inFlight, conveyor))
        } else {
            conveyorRates.append(try await measure(total: perRound, inFlight: inFlight, conveyor))
            rawRates.append(try await measure(total: perRound, inFlight: inFlight, raw))
        }
    }
    let (r, c) = (median(rawRates), median(conveyorRates))
    print(String(format: "| %d | %.0f | %.0f | %.1f %% |", inFlight, r, c, 100 * c / r))
}

/// Decodes any JSON scalar, so both paths do the same decoding work.
enum AnyCodableValue: Codable, Sendable {
    case int(Int), string(String)
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Int.self) { self = .int(value) } else { self = .string(try container.decode(String.self)) }
    }
    func encode(to encoder: any Encoder) throws {}
}
