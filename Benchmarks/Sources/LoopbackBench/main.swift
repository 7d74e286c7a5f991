// End to end over loopback, for each transport: the raw client (URLSession.data(for:),
// AsyncHTTPClient's execute) vs NetworkClient on that client with the realistic chain, against
// Tests/Server/server.py on 127.0.0.1, in interleaved rounds, at 1, 8 and 64 requests in flight.
// Run from the repository root: swift run --package-path Benchmarks -c release loopback-bench [rounds] [requests]
//
// Each round measures raw, Conveyor, Conveyor, raw (the order flips every round), so slow drift
// of the machine (the server, the other core) hits both paths alike. The ratio of a round is
// Conveyor's requests per second over raw's in that round; the table shows the median ratio
// over the rounds, its interquartile range, and the median requests per second of each path.
// With UNINTERRUPTED=1 in the environment, the chain's background task does not interrupt an
// attempt in flight (no guarded step per attempt), to tell that cost from the transport's.
// With VARY_QUERY=1, every request of both paths asks for `?page=N` with a new N, so the client's
// URL cache never hits: run with and without it to see what the cache saves end to end.
import AsyncHTTPClient
import BenchSupport
import Conveyor
import ConveyorAsyncHTTPClient
import Foundation
import NIOCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let rounds = arguments.first ?? 21
let perRound = arguments.dropFirst().first ?? 100

let (server, port) = try startTestServer()
defer { server.terminate() }
let base = URL(string: "http://127.0.0.1:\(port)")!
let transport = URLSessionTransport(configuration: .ephemeral)
let session = transport.session
let interrupting = ProcessInfo.processInfo.environment["UNINTERRUPTED"] == nil
let client = NetworkClient(baseURL: base, transport: transport) { realisticBehaviors(interrupting: interrupting) }
// The raw path is what a hand-written call site does: build a URLRequest with the same headers
// the realistic chain adds, send it, decode with a shared decoder. So the ratio measures the
// pipeline, not the header count or a reused request.
let rawURL = base.appendingPathComponent("json/movies")
let decoder = JSONDecoder()

let varyQuery = ProcessInfo.processInfo.environment["VARY_QUERY"] != nil
/// A new page number per request (both paths), when VARY_QUERY is set.
final class PageCounter: @unchecked Sendable {
    // @unchecked: `next` is only touched with `lock` locked.
    private let lock = NSLock()
    private var next = 0
    func take() -> Int { lock.withLock { next += 1; return next } }
}
let pages = PageCounter()

let raw: @Sendable () async throws -> Void = {
    let url = varyQuery ? URL(string: rawURL.absoluteString + "?page=\(pages.take())")! : rawURL
    var request = URLRequest(url: url)
    request.allHTTPHeaderFields = [
        "User-Agent": "Bench/1.0", "Accept-Language": "en", "Authorization": "Bearer cached-token-0123456789",
    ]
    let (data, _) = try await session.data(for: request)
    _ = try decoder.decode([[String: AnyCodableValue]].self, from: data)
}
let conveyor: @Sendable () async throws -> Void = {
    let query: QueryParameters = varyQuery ? ["page": pages.take()] : [:]
    _ = try await client.send(Request<[[String: AnyCodableValue]]>(path: "/json/movies", query: query))
}

// The same on AsyncHTTPClient: one HTTPClient (a pool of up to 64 connections per host, so 64 in
// flight is not queued behind the pool) for both paths.
var poolConfiguration = AsyncHTTPClientTransport.configuration()
poolConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: poolConfiguration)
let ahcClient = NetworkClient(baseURL: base, transport: try AsyncHTTPClientTransport(client: http)) {
    realisticBehaviors(interrupting: interrupting)
}
let rawAHC: @Sendable () async throws -> Void = {
    let url = varyQuery ? rawURL.absoluteString + "?page=\(pages.take())" : rawURL.absoluteString
    var request = HTTPClientRequest(url: url)
    request.headers.add(name: "User-Agent", value: "Bench/1.0")
    request.headers.add(name: "Accept-Language", value: "en")
    request.headers.add(name: "Authorization", value: "Bearer cached-token-0123456789")
    let response = try await http.execute(request, timeout: .seconds(60))
    let body = try await response.body.collect(upTo: 64 << 20)
    _ = try decoder.decode([[String: AnyCodableValue]].self, from: Data(body.readableBytesView))
}
let conveyorAHC: @Sendable () async throws -> Void = {
    let query: QueryParameters = varyQuery ? ["page": pages.take()] : [:]
    _ = try await ahcClient.send(Request<[[String: AnyCodableValue]]>(path: "/json/movies", query: query))
}

// Warm up connections and code paths.
for operation in [raw, conveyor, rawAHC, conveyorAHC] { _ = try await measure(total: 200, inFlight: 64, operation) }

func quartiles(_ values: [Double]) -> (Double, Double, Double) {
    let sorted = values.sorted()
    return (sorted[sorted.count / 4], sorted[sorted.count / 2], sorted[(3 * sorted.count) / 4])
}

print(
    "Loopback: \(rounds) rounds × 2 × \(perRound) requests per path and concurrency, GET /json/movies"
        + (varyQuery ? "?page=N (a new N every request)" : "") + " decoded as JSON")
print("")
print("| transport | in flight | raw req/s | NetworkClient + realistic chain req/s | Conveyor / raw, median of rounds | interquartile range |")
print("|---|---:|---:|---:|---:|---:|")
for (name, raw, conveyor) in [("URLSession", raw, conveyor), ("AsyncHTTPClient", rawAHC, conveyorAHC)] {
    for inFlight in [1, 8, 64] {
        var ratios: [Double] = []
        var rawRates: [Double] = []
        var conveyorRates: [Double] = []
        for round in 0..<rounds {
            let order = round % 2 == 0 ? [raw, conveyor, conveyor, raw] : [conveyor, raw, raw, conveyor]
            var rates: [Double] = []
            for operation in order { rates.append(try await measure(total: perRound, inFlight: inFlight, operation)) }
            let (rawRate, conveyorRate) =
                round % 2 == 0
                ? ((rates[0] + rates[3]) / 2, (rates[1] + rates[2]) / 2) : ((rates[1] + rates[2]) / 2, (rates[0] + rates[3]) / 2)
            rawRates.append(rawRate)
            conveyorRates.append(conveyorRate)
            ratios.append(conveyorRate / rawRate)
        }
        let (low, mid, high) = quartiles(ratios)
        print(
            "| \(name) | "
                + String(
                    format: "%d | %.0f | %.0f | **%.1f %%** | %.1f–%.1f %% |", inFlight, median(rawRates),
                    median(conveyorRates), 100 * mid, 100 * low, 100 * high))
    }
}
try await shutDown(http)

/// Shuts the client down the `async` way (at top level, `http.shutdown()` picks the overload that
/// returns a future and waits for nothing).
func shutDown(_ client: HTTPClient) async throws { try await client.shutdown() }

/// Decodes any JSON scalar, so both paths do the same decoding work.
enum AnyCodableValue: Codable, Sendable {
    case int(Int), string(String)
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Int.self) { self = .int(value) } else { self = .string(try container.decode(String.self)) }
    }
    func encode(to encoder: any Encoder) throws {}
}
