// Requests per second through one NetworkClient with 1, 8 and 64 requests in flight, in memory
// (CannedTransport), for three chains: none, 10 behaviors implementing two hooks each, and the
// realistic chain; and the floor, the same harness around a direct transport call, no client.
// With one request in flight one core works; with more, both can. A client whose rate grows less
// than the floor's from 1 to 64 in flight is losing time to something its requests share (a
// lock, a contended cache line).
// Run from the repository root:
//   swift run --package-path Benchmarks -c release concurrency-bench [rounds] [requests]
import BenchSupport
import Conveyor
import Foundation

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let rounds = arguments.first ?? 7
let perRound = arguments.dropFirst().first ?? 20_000

let base = URL(string: "http://127.0.0.1:8080/api")!
let chains: [(String, () -> [any RequestBehavior])] = [
    ("0 behaviors", { [] }),
    ("10 behaviors with 2 hooks each", { Array(repeating: TrivialHooks(), count: 10) }),
    ("realistic chain", { realisticBehaviors() }),
]
print("In memory, one client, \(rounds) rounds × \(perRound) requests per cell, median requests per second;")
print("\(ProcessInfo.processInfo.activeProcessorCount) cores")
print("")
print("| chain | 1 in flight | 8 in flight | 64 in flight | 64 / 1 |")
print("|---|---:|---:|---:|---:|")
/// The harness alone: the same task group around a direct transport call, no client.
let floorTransport: any HTTPTransport = CannedTransport()
let floorRequest = HTTPRequest(method: .get, url: base.appendingPathComponent("movies"))
let floorSend: @Sendable () async throws -> Void = { _ = try await floorTransport.send(floorRequest) }
let rows: [(String, @Sendable () async throws -> Void)] =
    [("floor: `transport.send`, no client", floorSend)]
    + chains.map { name, behaviors in
        let client = NetworkClient(baseURL: base, transport: CannedTransport(), behaviors: behaviors)
        let request = Request<Data>(path: "/movies")
        let send: @Sendable () async throws -> Void = { _ = try await client.send(request) }
        return (name, send)
    }
for (name, send) in rows {
    _ = try await measure(total: 2_000, inFlight: 8, send)  // warm up
    var rates: [Int: [Double]] = [:]
    for _ in 0..<rounds {
        for inFlight in [1, 8, 64] { rates[inFlight, default: []].append(try await measure(total: perRound, inFlight: inFlight, send)) }
    }
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    let (one, eight, many) = (median(rates[1]!), median(rates[8]!), median(rates[64]!))
    print(String(format: "| %@ | %.0f | %.0f | %.0f | %.2f |", name, one, eight, many, many / one))
}
