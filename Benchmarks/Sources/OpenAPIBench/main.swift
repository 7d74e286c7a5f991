// The client swift-openapi-generator wrote from Integrations/Sources/TestServerAPI/openapi.yaml,
// against Tests/Server/server.py on 127.0.0.1, sent three ways on each HTTP client:
//   conveyor  through ConveyorTransport: a NetworkClient with AuthTokenBehavior and RetryBehavior
//   peer      through swift-openapi-runtime's own transport (OpenAPIURLSession,
//             OpenAPIAsyncHTTPClient) with two ClientMiddlewares doing the same work: a bearer
//             token from a locked store (refreshed once on a 401) and retries of 429/5xx and
//             thrown errors with backoff
// Each request is the generated `getStatus(path: 200)`: GET /status/200, a small JSON body, decoded.
//
//   swift run --package-path Benchmarks -c release openapi-bench [rounds] [requests]
//       requests per second at 1 and 8 in flight, in interleaved rounds (peer, conveyor,
//       conveyor, peer; the order flips every round): the median of each round's ratio
//   openapi-bench <scenario> <requests>
//       one scenario N times, for callgrind: BIN=openapi-bench bash Benchmarks/loopback-instructions.sh
//       (scenarios: oapi-conveyor-urlsession oapi-peer-urlsession oapi-conveyor-ahc oapi-peer-ahc, and
//       oapi-conveyor-urlsession-streamed oapi-conveyor-ahc-streamed: the JSON response streamed)
//   openapi-bench transfer [bytes]
//       the generated downloadBytes and uploadBytes of `bytes` (1 GiB by default) through
//       ConveyorTransport on each client, streamed both ways: time and peak resident memory
//       growth; exits 1 when the growth reaches 50 MB, 2 when a transfer fails or is wrong
import AsyncHTTPClient
import BenchSupport
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorOpenAPI
import Dispatch
import Foundation
import HTTPTypes
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime
import OpenAPIURLSession
import TestServerAPI

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

let scenarios = [
    "oapi-conveyor-urlsession", "oapi-peer-urlsession", "oapi-conveyor-ahc", "oapi-peer-ahc",
    // ConveyorTransport with the JSON response streamed instead of buffered (what `.automatic` saves).
    "oapi-conveyor-urlsession-streamed", "oapi-conveyor-ahc-streamed",
]
let token = "cached-token-0123456789"

// MARK: - The peer's middlewares

/// Adds `Authorization: Bearer <token>` from a locked store; on a 401, refreshes once and resends.
struct BearerMiddleware: ClientMiddleware {
    let store: TokenBox
    func intercept(
        _ request: HTTPTypes.HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPTypes.HTTPRequest, HTTPBody?, URL) async throws -> (HTTPTypes.HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPTypes.HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = "Bearer \(store.current)"
        let (response, responseBody) = try await next(request, body, baseURL)
        guard response.status == .unauthorized else { return (response, responseBody) }
        request.headerFields[.authorization] = "Bearer \(store.refresh())"
        return try await next(request, body, baseURL)
    }
}

/// A token behind a lock.
final class TokenBox: Sendable {
    private let value = Box(token)
    var current: String { value.withLock { $0 } }
    func refresh() -> String { value.withLock { $0 } }
}

/// Retries 429, 5xx and thrown errors of idempotent methods, up to 3 attempts, with backoff.
struct RetryMiddleware: ClientMiddleware {
    func intercept(
        _ request: HTTPTypes.HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPTypes.HTTPRequest, HTTPBody?, URL) async throws -> (HTTPTypes.HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPTypes.HTTPResponse, HTTPBody?) {
        let idempotent = [.get, .head, .put, .delete, .options].contains(request.method)
        var attempt = 1
        while true {
            do {
                let (response, responseBody) = try await next(request, body, baseURL)
                let retryable = response.status.code == 429 || (500...599).contains(response.status.code)
                if !retryable || !idempotent || attempt == 3 { return (response, responseBody) }
            } catch {
                if !idempotent || attempt == 3 || error is CancellationError { throw error }
            }
            try await Task.sleep(for: .milliseconds(100 << attempt))
            attempt += 1
        }
    }
}

/// A value behind a lock.
final class Box<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

// MARK: - The clients

/// The three generated clients on one server and HTTP client kind.
struct Clients {
    let conveyor: Client
    let peer: Client
    let http: HTTPClient?
}

func makeClients(base: URL, ahc: Bool, streamed: Bool = false) throws -> Clients {
    let operations: [String: OperationOptions] =
        streamed ? [Operations.getStatus.id: OperationOptions(responseBody: .streamed)] : [:]
    let middlewares: [any ClientMiddleware] = [BearerMiddleware(store: TokenBox()), RetryMiddleware()]
    let behaviors: [any RequestBehavior] = [
        AuthTokenBehavior(tokens: InMemoryTokenStore(token: token) { _ in token }), RetryBehavior(),
    ]
    if ahc {
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())
        let network = NetworkClient(
            baseURL: base, transport: try ConveyorAsyncHTTPClient.AsyncHTTPClientTransport(client: http)
        ) { behaviors }
        return Clients(
            conveyor: Client(serverURL: base, transport: ConveyorTransport(client: network, operations: operations)),
            peer: Client(
                serverURL: base, transport: OpenAPIAsyncHTTPClient.AsyncHTTPClientTransport(configuration: .init(client: http)),
                middlewares: middlewares),
            http: http)
    }
    let network = NetworkClient(baseURL: base, transport: Conveyor.URLSessionTransport(configuration: .ephemeral)) {
        behaviors
    }
    let session = URLSession(configuration: .ephemeral)
    return Clients(
        conveyor: Client(serverURL: base, transport: ConveyorTransport(client: network, operations: operations)),
        peer: Client(
            serverURL: base, transport: OpenAPIURLSession.URLSessionTransport(configuration: .init(session: session)),
            middlewares: middlewares),
        http: nil)
}

/// One generated call, checked.
func call(_ client: Client) async throws {
    let status = try await client.getStatus(path: .init(code: 200)).ok.body.json.status
    guard status == 200 else { throw BenchError("the server answered \(status)") }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func serverBase() throws -> (URL, Process?) {
    // Under valgrind, spawning the server fails (EBADF in Process): the script starts it and
    // passes its port in LOOPBACK_PORT.
    if let port = ProcessInfo.processInfo.environment["LOOPBACK_PORT"].flatMap(Int.init) {
        return (URL(string: "http://127.0.0.1:\(port)")!, nil)
    }
    let (process, port) = try startTestServer()
    return (URL(string: "http://127.0.0.1:\(port)")!, process)
}

// MARK: - Rate

func rate(rounds: Int, requests: Int) async throws {
    let (base, server) = try serverBase()
    defer { server?.terminate() }
    print("Generated client over 127.0.0.1: \(rounds) rounds of \(requests) requests per side and width")
    print("")
    print("| HTTP client | in flight | peer transport + middlewares req/s | ConveyorTransport + behaviors req/s | Conveyor / peer, median of rounds | interquartile range |")
    print("|---|---:|---:|---:|---:|---:|")
    for (label, ahc) in [("URLSession", false), ("AsyncHTTPClient", true)] {
        let clients = try makeClients(base: base, ahc: ahc)
        for width in [1, 8] {
            // Warm both paths (connections, code).
            for _ in 0..<20 {
                try await call(clients.peer)
                try await call(clients.conveyor)
            }
            var ratios: [Double] = []
            var peerRates: [Double] = []
            var conveyorRates: [Double] = []
            for round in 0..<rounds {
                let order = round % 2 == 0 ? [clients.peer, clients.conveyor, clients.conveyor, clients.peer]
                    : [clients.conveyor, clients.peer, clients.peer, clients.conveyor]
                var measured: [Double] = []
                for client in order { measured.append(try await requestsPerSecond(client, requests, width)) }
                let (peer, conveyor) =
                    round % 2 == 0 ? ((measured[0] + measured[3]) / 2, (measured[1] + measured[2]) / 2)
                    : ((measured[1] + measured[2]) / 2, (measured[0] + measured[3]) / 2)
                peerRates.append(peer)
                conveyorRates.append(conveyor)
                ratios.append(conveyor / peer)
            }
            let sorted = ratios.sorted()
            let (q1, q3) = (sorted[sorted.count / 4], sorted[(3 * sorted.count) / 4])
            print(
                "| \(label) | \(width) | " + String(format: "%.0f | %.0f | %.1f %% | %.1f–%.1f %% |",
                    median(peerRates), median(conveyorRates), 100 * median(ratios), 100 * q1, 100 * q3))
        }
        try await clients.http?.shutdown()
    }
}

func requestsPerSecond(_ client: Client, _ requests: Int, _ width: Int) async throws -> Double {
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for lane in 0..<width {
            group.addTask {
                for _ in stride(from: lane, to: requests, by: width) { try await call(client) }
            }
        }
        try await group.waitForAll()
    }
    let elapsed = ContinuousClock.now - start
    return Double(requests) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

// MARK: - One scenario, for callgrind

func scenario(_ name: String, _ count: Int) async throws {
    let (base, server) = try serverBase()
    defer { server?.terminate() }
    let clients = try makeClients(base: base, ahc: name.contains("ahc"), streamed: name.hasSuffix("streamed"))
    let client = name.contains("conveyor") ? clients.conveyor : clients.peer
    for _ in 0..<count { try await call(client) }
    try await clients.http?.shutdown()
}

// MARK: - 1 GiB each way

/// A file's content in 64 KiB chunks, read while they are sent.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let url: URL
    struct AsyncIterator: AsyncIteratorProtocol {
        let handle: FileHandle?
        mutating func next() async throws -> ArraySlice<UInt8>? {
            guard let handle, let data = try handle.read(upToCount: 1 << 16), !data.isEmpty else { return nil }
            return ArraySlice(data)
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(handle: try? FileHandle(forReadingFrom: url)) }
}

func transfer(bytes: Int) async throws -> Int32 {
    let (base, server) = try serverBase()
    defer { server?.terminate() }
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("openapi-bench-\(UUID()).bin")
    defer { try? FileManager.default.removeItem(at: file) }
    _ = FileManager.default.createFile(atPath: file.path, contents: nil)
    let writer = try FileHandle(forWritingTo: file)
    let block = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    var written = 0
    while written < bytes {
        let size = min(block.count, bytes - written)
        try writer.write(contentsOf: block.prefix(size))
        written += size
    }
    try writer.close()
    let expected = try sha256(of: file)
    let bound = 50_000_000
    var failed = false
    var over = false
    print("| generated operation through ConveyorTransport | HTTP client | time | MB/s | peak RSS growth |")
    print("|---|---|---:|---:|---:|")
    for (label, ahc) in [("URLSession", false), ("AsyncHTTPClient", true)] {
        let clients = try makeClients(base: base, ahc: ahc)
        let api = clients.conveyor
        // Warm-up: one byte each way brings in the code and the connection.
        _ = try await download(api, bytes: 1)
        _ = try await api.uploadBytes(query: .init(key: nil), body: .binary(HTTPBody([0]))).ok
        for direction in ["downloadBytes", "uploadBytes"] {
            Memory.resetPeak()
            let before = Memory.resident
            let start = ContinuousClock.now
            var ok: Bool
            if direction == "downloadBytes" {
                ok = try await download(api, bytes: bytes) == bytes
            } else {
                let body = HTTPBody(FileChunks(url: file), length: .known(Int64(bytes)), iterationBehavior: .single)
                let reply = try await api.uploadBytes(query: .init(key: nil), body: .binary(body)).ok.body.json
                ok = reply.bytes == Int64(bytes) && reply.sha256 == expected && !reply.chunked
            }
            let elapsed = ContinuousClock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let growth = max(0, max(Memory.peak, Memory.resident) - before)
            failed = failed || !ok
            over = over || growth >= bound
            print(
                "| `\(direction)`\(ok ? "" : " (WRONG BYTES)") | \(label) | "
                    + String(format: "%.2f s | %.0f | %.1f MB |", seconds, Double(bytes) / seconds / 1e6, Double(growth) / 1e6))
        }
        try await clients.http?.shutdown()
    }
    print("")
    print(over ? "FAILED: the peak RSS growth reached 50 MB." : "The peak RSS growth stayed under 50 MB.")
    return failed ? 2 : over ? 1 : 0
}

/// Downloads `bytes` zero bytes with the generated `downloadBytes` and counts them (a non-zero
/// byte counts as wrong: the count comes back short).
func download(_ api: Client, bytes: Int) async throws -> Int {
    let body = try await api.downloadBytes(query: .init(bytes: Int64(bytes))).ok.body.binary
    var count = 0
    var wrong = false
    for try await chunk in body {
        count += chunk.count
        if chunk.first != 0 || chunk.last != 0 { wrong = true }
    }
    return wrong ? -1 : count
}

// MARK: - Main

let arguments = Array(CommandLine.arguments.dropFirst())
// No top-level `await`: an async main parks the main thread in dispatch_main, which valgrind
// cannot run (see instruction-count).
let done = DispatchSemaphore(value: 0)
let status = Box<Int32>(0)
Task.detached {
    do {
        if let name = arguments.first, scenarios.contains(name) {
            guard arguments.count == 2, let count = Int(arguments[1]) else {
                print("usage: openapi-bench <\(scenarios.joined(separator: "|"))> <requests>")
                exit(2)
            }
            try await scenario(name, count)
        } else if arguments.first == "transfer" {
            let code = try await transfer(bytes: arguments.dropFirst().first.flatMap { Int($0) } ?? 1 << 30)
            status.withLock { $0 = code }
        } else {
            let numbers = arguments.compactMap { Int($0) }
            try await rate(rounds: numbers.first ?? 11, requests: numbers.dropFirst().first ?? 200)
        }
    } catch {
        print("failed: \(error)")
        exit(2)
    }
    done.signal()
}
done.wait()
exit(status.withLock { $0 })
