// A cached GET against a network GET over loopback, in the same run: NetworkClient with
// CacheBehavior (memory and disk storage; every request after the first is a fresh hit), the same
// client path without a cache (every request goes to Tests/Server/server.py on 127.0.0.1), and a
// revalidating cache (every request is a conditional GET answered 304).
// Run from the repository root: swift run --package-path Benchmarks -c release cache-bench [rounds] [requests]
//
// Each round measures every path for `requests` requests, one in flight, in an order that rotates
// every round, so drift of the machine hits the paths alike; the table shows each path's median
// requests per second over the rounds and its ratio to the network path's median.
import BenchSupport
import Conveyor
import Foundation

/// Requests per second of `total` sequential operations.
func measure(total: Int, _ operation: () async throws -> Void) async throws -> Double {
    let start = ContinuousClock.now
    for _ in 0..<total { try await operation() }
    let elapsed = ContinuousClock.now - start
    return Double(total) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

struct Reply: Decodable { var count: Int }

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let rounds = arguments.first ?? 21
let perRound = arguments.dropFirst().first ?? 200

let (server, port) = try startTestServer()
defer { server.terminate() }
let base = URL(string: "http://127.0.0.1:\(port)")!
let transport = URLSessionTransport(configuration: .ephemeral)
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }

let network = NetworkClient(baseURL: base, transport: transport)
let memory = NetworkClient(baseURL: base, transport: transport) { CacheBehavior() }
let disk = NetworkClient(baseURL: base, transport: transport) { CacheBehavior(storage: DiskCacheStorage(directory: directory)) }
let revalidating = NetworkClient(baseURL: base, transport: transport) { CacheBehavior() }

// The same small JSON resource for every path; fresh for an hour (no-cache for the revalidating one).
let fresh: QueryParameters = ["cc": "max-age=3600", "etag": "\"bench\""]
let paths: [(String, @Sendable () async throws -> Void)] = [
    ("network GET, no cache", { let _: Reply = try await network.get("/cache/bench-network", query: fresh) }),
    ("cached GET, MemoryCacheStorage (hit)", { let _: Reply = try await memory.get("/cache/bench-memory", query: fresh) }),
    ("cached GET, DiskCacheStorage (hit)", { let _: Reply = try await disk.get("/cache/bench-disk", query: fresh) }),
    ("revalidated GET (304 from the server)", {
        let _: Reply = try await revalidating.get("/cache/bench-304", query: ["cc": "no-cache", "etag": "\"bench\""])
    }),
]

// Warm up connections, code paths and the caches.
for (_, operation) in paths { _ = try await measure(total: 100, operation) }

var rates = Array(repeating: [Double](), count: paths.count)
for round in 0..<rounds {
    for offset in 0..<paths.count {
        let index = (round + offset) % paths.count
        rates[index].append(try await measure(total: perRound, paths[index].1))
    }
}

print("Cache over loopback: \(rounds) rounds × \(perRound) sequential requests per path, GET decoded as JSON")
print("")
print("| path | req/s (median of rounds) | µs per request | vs network GET |")
print("|---|---:|---:|---:|")
let networkRate = median(rates[0])
for (index, (label, _)) in paths.enumerated() {
    let rate = median(rates[index])
    print("| \(label) | " + String(format: "%.0f | %.1f | %.2f× |", rate, 1e6 / rate, rate / networkRate))
}
