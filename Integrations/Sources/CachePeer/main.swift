// The second process of the shared-cache tests (Tests/ConveyorIntegrationsTests/SharedCacheTests.swift):
// a NetworkClient on AsyncHTTPClient with CacheBehavior over a PostgresCacheStorage, driven line
// by line from standard input, one JSON line of output per command.
//
//   cache-peer BASE_URL POSTGRES_URL TABLE
//   (CACHE_PEER_IDENTITY_KEY in the environment: the storage's identity key; CACHE_PEER_FILL_LEASE_MS:
//   its fill lease; the `X-Account` request header names the account a request is made for)
//   GET|POST|PUT|DELETE <tab> /path?query [<tab> Name: value]…  → {"status", "outcome", "body"}
//   advance <tab> SECONDS        moves this process's clock (CacheBehavior's `now`) → {"ok": true}
//   burst <tab> /path?query <tab> COUNT
//                                COUNT GETs with `Cache-Control: max-age=0`, each stored over the last → {"ok": true}
//   (end of input)               exits
import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorPostgres
import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// Records each request's `CacheOutcome` where the command loop reads it.
struct OutcomeRecorder: SuccessObserving, FailureObserving {
    let last: NIOLockedValueBox<String>
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        last.withLockedValue { $0 = context[CacheOutcome.self].map { "\($0)" } ?? "none" }
    }
    func afterFailure(_ error: NetworkError, context: RequestContext) async {
        last.withLockedValue { $0 = context[CacheOutcome.self].map { "\($0)" } ?? "none" }
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("cache-peer: \(message)\n".utf8))
    exit(2)
}

func reply(_ object: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { fail("unencodable reply") }
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let base = URL(string: arguments[1]), let database = URLComponents(string: arguments[2])
else { fail("usage: cache-peer BASE_URL POSTGRES_URL TABLE") }
let table = arguments[3]

var logger = Logger(label: "cache-peer")
logger.logLevel = .warning
let configuration = PostgresClient.Configuration(
    host: database.host ?? "127.0.0.1", port: database.port ?? 5432, username: database.user ?? "postgres",
    password: database.password, database: String(database.path.dropFirst()), tls: .disable)
// PostgresClient's background lines at errors only: it warns when the first query comes before
// `run()` has started (the query waits for it), which is this program's first command.
var background = logger
background.logLevel = .error
let postgres = PostgresClient(configuration: configuration, backgroundLogger: background)
let runner = Task { await postgres.run() }

let offset = NIOLockedValueBox<TimeInterval>(0)
let now: @Sendable () -> Date = { Date().addingTimeInterval(offset.withLockedValue { $0 }) }
let storage: PostgresCacheStorage
do {
    // A generous timeout: this process checks the cache's rules, not a slow database.
    let key = try ProcessInfo.processInfo.environment["CACHE_PEER_IDENTITY_KEY"].map { try CacheIdentityKey($0.utf8) }
    let lease = ProcessInfo.processInfo.environment["CACHE_PEER_FILL_LEASE_MS"].flatMap(Int.init) ?? 5_000
    storage = try PostgresCacheStorage(
        client: postgres, table: table, timeout: .seconds(10), logger: logger, now: now, identityKey: key,
        fillLease: .milliseconds(lease))
} catch {
    fail("\(error)")
}
let last = NIOLockedValueBox("none")
let transport: AsyncHTTPClientTransport
let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())
do { transport = try AsyncHTTPClientTransport(client: http) } catch { fail("\(error)") }
let client = NetworkClient(baseURL: base, transport: transport) {
    OutcomeRecorder(last: last)
    CacheBehavior(storage: storage, now: now, account: { request, _ in request.headers["X-Account"] })
}

while let line = readLine() {
    let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
    switch fields.first {
    case "advance":
        offset.withLockedValue { $0 += TimeInterval(fields[1]) ?? 0 }
        reply(["ok": true])
    case "burst":
        // COUNT requests that must be fetched again (`max-age=0`, no validator), each stored over the last.
        guard fields.count == 3, let count = Int(fields[2]) else { fail("bad burst: \(line)") }
        let url = base.absoluteString + fields[1]
        for _ in 0..<count {
            _ = try? await client.response(for: Request<Data>(path: url, headers: ["Cache-Control": "max-age=0"]))
        }
        reply(["ok": true])
    case let method?:
        guard fields.count >= 2 else { fail("bad request line: \(line)") }
        var request = Request<Data>(method: HTTPMethod(rawValue: method), path: base.absoluteString + fields[1])
        for header in fields.dropFirst(2) {
            guard let colon = header.firstIndex(of: ":") else { fail("bad header: \(header)") }
            request.headers.add(
                name: String(header[..<colon]),
                value: header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        last.withLockedValue { $0 = "none" }
        do {
            let response = try await client.response(for: request)
            reply(["status": response.response.status, "outcome": last.withLockedValue { $0 },
                   "body": String(decoding: response.value, as: UTF8.self)])
        } catch {
            reply(["status": 0, "outcome": last.withLockedValue { $0 }, "error": "\(error)"])
        }
    case nil:
        continue
    }
}
runner.cancel()
exit(0)
