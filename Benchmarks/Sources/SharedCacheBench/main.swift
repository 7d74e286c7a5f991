// A cache hit from PostgreSQL beside a hit from memory and a miss to the upstream, over loopback,
// in the same run: three NetworkClients on one AsyncHTTPClient, against Tests/Server/server.py on
// 127.0.0.1 and a PostgreSQL server on 127.0.0.1.
//
//   bash Integrations/Tests/Server/postgres.sh start /tmp/bench-pg     (prints the URL)
//   CONVEYOR_POSTGRES_URL=<that URL> swift run --package-path Benchmarks -c release shared-cache-bench [rounds] [requests]
//
// - upstream miss: no cache, every request goes to the server (a small JSON answer);
// - MemoryCacheStorage hit: CacheBehavior in memory, every request after the first a fresh hit;
// - PostgresCacheStorage hit: the same with the entry in a PostgreSQL table (one SELECT per hit;
//   PostgresClient's default pool of 20 connections);
// - and, as the floor of the last, one `SELECT 1` through the same PostgresClient alone.
// Each round runs every path at 1 and at 32 requests in flight, in an order that rotates every
// round; the table shows each path's median requests per second over the rounds and its ratio to
// the upstream miss at the same concurrency.
import AsyncHTTPClient
import BenchSupport
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorPostgres
import Foundation
import Logging
import PostgresNIO

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

/// Requests per second of `total` operations, `inFlight` at a time.
func measure(total: Int, inFlight: Int, _ operation: @escaping @Sendable () async throws -> Void) async throws -> Double {
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for worker in 0..<inFlight {
            let share = total / inFlight + (worker < total % inFlight ? 1 : 0)
            group.addTask { for _ in 0..<share { try await operation() } }
        }
        try await group.waitForAll()
    }
    let elapsed = ContinuousClock.now - start
    return Double(total) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

struct Reply: Decodable { var count: Int }

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let rounds = arguments.first ?? 11
let perRound = arguments.dropFirst().first ?? 640

guard let given = ProcessInfo.processInfo.environment["CONVEYOR_POSTGRES_URL"], let database = URLComponents(string: given),
    let host = database.host, host == "127.0.0.1" || host == "localhost"
else {
    FileHandle.standardError.write(Data("""
        shared-cache-bench needs a PostgreSQL server on 127.0.0.1: start one with
          bash Integrations/Tests/Server/postgres.sh start /tmp/bench-pg
        and set CONVEYOR_POSTGRES_URL to the URL it prints.\n
        """.utf8))
    exit(64)
}

let (server, port) = try startTestServer()
defer { server.terminate() }
let base = URL(string: "http://127.0.0.1:\(port)")!

var logger = Logger(label: "shared-cache-bench")
logger.logLevel = .warning
let postgres = PostgresClient(
    configuration: .init(
        host: host, port: database.port ?? 5432, username: database.user ?? "postgres", password: database.password,
        database: String(database.path.dropFirst()), tls: .disable),
    backgroundLogger: Logger(label: "postgres") { _ in SwiftLogNoOpLogHandler() })
let runner = Task { await postgres.run() }
let table = "bench_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
// A generous timeout: this measures the database's answers, not its absence.
let storage = try PostgresCacheStorage(client: postgres, table: table, timeout: .seconds(10), logger: logger)
try await storage.prepare()

var pool = AsyncHTTPClientTransport.configuration()
pool.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: pool)
let transport = try AsyncHTTPClientTransport(client: http)
let upstream = NetworkClient(baseURL: base, transport: transport)
let memory = NetworkClient(baseURL: base, transport: transport) { CacheBehavior() }
let shared = NetworkClient(baseURL: base, transport: transport) { CacheBehavior(storage: storage) }

// The same small JSON resource for every path, fresh for an hour.
let fresh: QueryParameters = ["cc": "max-age=3600"]
let paths: [(String, @Sendable () async throws -> Void)] = [
    ("upstream miss (no cache)", { let _: Reply = try await upstream.get("/cache/bench-upstream", query: fresh) }),
    ("MemoryCacheStorage hit", { let _: Reply = try await memory.get("/cache/bench-memory", query: fresh) }),
    ("PostgresCacheStorage hit", { let _: Reply = try await shared.get("/cache/bench-postgres", query: fresh) }),
    // The floor of a PostgreSQL hit: one query through the same PostgresClient, no HTTP, no cache.
    ("(floor) PostgresClient SELECT 1 alone", {
        for try await _ in try await postgres.query("SELECT 1").decode(Int32.self) {}
    }),
]
let concurrencies = [1, 32]

// Warm up connections (HTTP and database), code paths and the caches.
for (_, operation) in paths {
    for inFlight in concurrencies { _ = try await measure(total: 200, inFlight: inFlight, operation) }
}
// Count what ran: the server saw the upstream path's requests, and one request per cached path.
struct Count: Decodable { var count: Int }
let memoryCount: Count = try await upstream.get("/cache/bench-memory/count")
let sharedCount: Count = try await upstream.get("/cache/bench-postgres/count")
let upstreamCount: Count = try await upstream.get("/cache/bench-upstream/count")
guard memoryCount.count == 1, sharedCount.count == 1, upstreamCount.count == 200 * concurrencies.count else {
    print("not what the paths claim: memory \(memoryCount.count), postgres \(sharedCount.count), upstream \(upstreamCount.count)")
    exit(1)
}

var rates = Array(repeating: Array(repeating: [Double](), count: concurrencies.count), count: paths.count)
let order = paths.indices.flatMap { path in concurrencies.indices.map { (path, $0) } }
for round in 0..<rounds {
    for offset in order.indices {
        let (path, concurrency) = order[(round + offset) % order.count]
        rates[path][concurrency].append(try await measure(total: perRound, inFlight: concurrencies[concurrency], paths[path].1))
    }
}
let stillOne: Count = try await upstream.get("/cache/bench-postgres/count")
guard stillOne.count == 1 else {
    print("the PostgreSQL path went to the upstream \(stillOne.count - 1) times: not hits")
    exit(1)
}

print("Shared cache over loopback: \(rounds) rounds × \(perRound) requests per path and concurrency, AsyncHTTPClient, GET decoded as JSON")
print("")
print("| path | in flight | req/s (median of rounds) | µs per request | vs upstream miss |")
print("|---|---:|---:|---:|---:|")
for (index, (label, _)) in paths.enumerated() {
    for (slot, inFlight) in concurrencies.enumerated() {
        let rate = median(rates[index][slot])
        let base = median(rates[0][slot])
        print("| \(label) | \(inFlight) | " + String(format: "%.0f | %.1f | %.2f× |", rate, 1e6 / rate, rate / base))
    }
}

await storage.removeAll()
_ = try? await postgres.query("DROP TABLE \(unescaped: "\"" + table + "\"")")
try await shutDown(http)
runner.cancel()

/// Shuts the client down the `async` way (at top level, `http.shutdown()` picks the overload that
/// returns a future, and nothing waited for it).
func shutDown(_ client: HTTPClient) async throws { try await client.shutdown() }
