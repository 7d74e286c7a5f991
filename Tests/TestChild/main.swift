// The child process of the test suite's resource and platform-trap tests (Tests/ConveyorTests,
// `TestChild`): one scenario per process, so that
//
// - a test that measures memory measures this process alone, never the test process where
//   hundreds of other tests allocate beside it (its peak is reset before the scenario and read
//   after it: Linux's VmHWM, exact, no sampling);
// - a scenario that can meet FoundationNetworking's trap ("Transfer completed, but there's no
//   response.", swift-corelibs-foundation#5285: a connection closed in the middle of a response's
//   headers) fails its one test instead of ending the test run. The process exits as soon as it
//   has printed its results, before the test stops its server, so no connection of it is ever
//   cut by the server's end.
//
//   test-child <scenario> [arguments…]
//
// It prints `result <key>=<value>` lines, and exits 0 once the scenario ran (its checks are the
// parent's), 64 for a usage error, 1 when the scenario threw. It never prints a body, a header or a
// secret: only counts, names and booleans.
import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import ConveyorTransportConformance
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Prints one result line.
func result(_ key: String, _ value: some CustomStringConvertible) {
    print("result \(key)=\(value)")
}

/// Megabytes, rounded down, as the tests' bounds are written.
func megabytes(_ bytes: Int?) -> String { bytes.map { "\($0 / 1_048_576)" } ?? "unavailable" }

/// Resets the peak, runs `body`, and prints `before` and `growth` (MB).
func measured<T>(_ body: () async throws -> T) async rethrows -> T {
    let before = ResidentMemory.resetPeak()
    let value = try await body()
    result("before", megabytes(before))
    result("growth", megabytes(before.flatMap { ResidentMemory.growth(since: $0) }))
    return value
}

func baseURL(_ text: String?) -> URL {
    guard let text, let url = URL(string: text) else { usage() }
    return url
}

func usage() -> Never {
    FileHandle.standardError.write(
        Data("usage: test-child log-preview | har-record BYTES recorded|plain | timed COUNT | limit URL PATH BYTES|default | sequential URL COUNT | download URL BYTES FILE | slow-reader URL BYTES | trickle URL CHAIN\n".utf8))
    exit(64)
}

let arguments = Array(CommandLine.arguments.dropFirst())

do {
    switch arguments.first {
    case "log-preview": try await logPreview()
    case "timed" where arguments.count == 2: try await timed(count: Int(arguments[1]) ?? 0)
    case "har-record" where arguments.count == 3:
        try await harRecord(bytes: Int(arguments[1]) ?? 0, recorded: arguments[2] == "recorded")
    case "limit" where arguments.count == 4: await limit(baseURL(arguments[1]), path: arguments[2], bytes: arguments[3])
    case "sequential" where arguments.count == 3: try await sequential(baseURL(arguments[1]), count: Int(arguments[2]) ?? 1000)
    case "download" where arguments.count == 4:
        try await download(baseURL(arguments[1]), bytes: Int(arguments[2]) ?? 0, to: URL(fileURLWithPath: arguments[3]))
    case "slow-reader" where arguments.count == 3: try await slowReader(baseURL(arguments[1]), total: Int(arguments[2]) ?? 0)
    case "trickle" where arguments.count == 3: await trickle(baseURL(arguments[1]), chainIndex: Int(arguments[2]) ?? 0)
    default: usage()
    }
} catch {
    FileHandle.standardError.write(Data("the scenario threw: \(error)\n".utf8))
    exit(1)
}
// At once: URLSession's abandoned connections end with the process, before the server does.
exit(0)

/// A log preview reads a bounded prefix: an 18 MB JSON body with a 64-byte preview limit.
func logPreview() async throws {
    let item = #"{"id":1,"title":"Heat","token":"tok-3f9a-SECRET","tags":["a","b","c"]},"#
    let mock = MockTransport()
    var json = "[" + String(repeating: item, count: 18_000_000 / item.utf8.count)
    json.removeLast()
    json += "]"
    mock.enqueue(.response(status: 200, headers: ["Content-Type": "application/json"], body: Data(json.utf8)))
    json = ""
    let sink = CapturingLogSink()
    let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:9")!, transport: mock) {
        LoggingBehavior(sink: sink, bodyPreviewLimit: 64)
    }
    let start = ContinuousClock.now
    let data = try await measured { try await client.send(Request<Data>(path: "/movies")) }
    result("elapsed", ContinuousClock.now - start)
    result("received", data.count)
    let line = sink.entries.last?.message ?? ""
    result("masked", line.contains(#""token":"***""#))
    result("leaked", line.contains("tok-3f9a"))
}

/// A response of `bytes` (text, in memory before the peak is reset) through a HAR recorder with a
/// 1 MiB body limit, or through the same transport unrecorded: the parent compares the two growths.
func harRecord(bytes: Int, recorded: Bool) async throws {
    let mock = MockTransport()
    mock.enqueue(
        .response(status: 200, headers: ["Content-Type": "text/plain"], body: Data(repeating: UInt8(ascii: "a"), count: bytes)))
    let recorder = HARRecorder(maxBodySize: 1 << 20)
    let transport: any HTTPTransport = recorded ? HARRecordingTransport(wrapping: mock, recorder: recorder) : mock
    let client = NetworkClient(
        baseURL: URL(string: "https://api.example")!, transport: transport, configuration: .init(maxResponseSize: bytes + 1))
    let request = Request<Data>(path: "/big", headers: ["Authorization": "Bearer tok-7c2e-SECRET"])
    let data = try await measured { try await client.send(request) }
    result("received", data.count)
    let archive = try recorder.data()
    result("archive", archive.count)
    result("leaked", archive.range(of: Data("tok-7c2e".utf8)) != nil)
}

/// `count` requests with a 300 s timeout, each answered at once: the memory in use after them
/// (glibc asked to hand back what was freed first). A deadline's timer that outlived its request
/// until the deadline kept about 0.7 KiB each.
func timed(count: Int) async throws {
    // Not MockTransport: it keeps every request it was sent.
    struct Answering: HTTPTransport {
        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            // An answer that takes a moment, as over a network: the deadline's timer is asleep by then.
            try await Task.sleep(for: .milliseconds(1))
            return HTTPResponse(status: 200, request: request)
        }
    }
    let client = NetworkClient(
        baseURL: URL(string: "https://api.example")!, transport: Answering(), configuration: .init(timeout: .seconds(300)))
    for _ in 0..<100 { try await client.send(Request<Void>(path: "/ok")) }  // warm up
    let before = liveResident()
    for _ in 0..<count { try await client.send(Request<Void>(path: "/ok")) }
    result("rssBefore", before.map { "\($0 / 1024)" } ?? "unavailable")
    result("rssAfter", liveResident().map { "\($0 / 1024)" } ?? "unavailable")
}

/// A request for a body larger than the limit (`default`: the configuration's default).
func limit(_ base: URL, path: String, bytes: String) async {
    let configuration: NetworkClient.Configuration =
        bytes == "default" ? .init() : .init(timeout: .seconds(60), maxResponseSize: Int(bytes) ?? 0)
    let client = NetworkClient(baseURL: base, transport: URLSessionTransport(configuration: .ephemeral), configuration: configuration)
    result("configuredLimit", client.configuration.maxResponseSize.map(String.init) ?? "none")
    let start = ContinuousClock.now
    let outcome: NetworkError? = await measured {
        do throws(NetworkError) {
            _ = try await client.send(Request<Data>(path: path, query: ["bytes": 1 << 30]))
            return nil
        } catch {
            return error
        }
    }
    result("elapsed", ContinuousClock.now - start)
    result("outcome", outcome?.name ?? "success")
    if let limit = outcome?.limit { result("limit", limit) } else { result("limit", "none") }
}

/// Sequential requests: connections left open to the server, descriptors, and the memory in use
/// after them (glibc asked to hand back what was freed first), not the peak.
func sequential(_ base: URL, count: Int) async throws {
    let client = NetworkClient(baseURL: base, transport: URLSessionTransport(configuration: .ephemeral))
    try await client.send(Request<Void>(path: "/empty"))  // warm up: connection, caches
    let rssBefore = liveResident()
    let fdsBefore = openDescriptors()
    var wrongSizes = 0
    for index in 0..<count {
        let data = try await client.send(Request<Data>(path: "/bytes", query: ["count": 1024, "n": index]))
        if data.count != 1024 { wrongSizes += 1 }
    }
    result("wrongSizes", wrongSizes)
    result("rssBefore", megabytes(rssBefore))
    result("rssAfter", megabytes(liveResident()))
    result("fdsBefore", fdsBefore)
    result("fdsAfter", openDescriptors())
    result("connections", connections(toPort: base.port ?? 0))
}

/// A download to a file: the body never sits in memory.
func download(_ base: URL, bytes: Int, to destination: URL) async throws {
    let client = NetworkClient(
        baseURL: base, transport: URLSessionTransport(configuration: .ephemeral), configuration: .init(clock: ImmediateClock()))
    try await measured {
        _ = try await client.download(Request<Data>(path: "/stream", query: ["bytes": bytes]), to: destination)
    }
    let size = try FileManager.default.attributesOfItem(atPath: destination.path)[.size] as? NSNumber
    result("size", size?.intValue ?? -1)
}

/// A reader that falls behind the network: it stops after its first chunk until 64 MiB waited on
/// disk, then reads on while the rest arrives.
func slowReader(_ base: URL, total: Int) async throws {
    let transport = URLSessionTransport(configuration: .ephemeral)
    let client = NetworkClient(baseURL: base, transport: transport, configuration: .init(clock: ImmediateClock()))
    var outOfOrder = 0
    let read = try await measured { () async throws -> Int in
        // Not paced: FoundationNetworking's backlog of received chunks is bounded too.
        let streamed = try await client.stream(Request<Data>(path: "/blob", query: ["bytes": total, "chunk": 65_536]))
        var read = 0
        var fellBehind = false
        for try await chunk in streamed.body {
            // In order, nothing lost or repeated: byte i of /blob is i % 256.
            if let first = chunk.first, let last = chunk.last,
                first != UInt8(truncatingIfNeeded: read) || last != UInt8(truncatingIfNeeded: read + chunk.count - 1)
            {
                outOfOrder += 1
            }
            read += chunk.count
            if !fellBehind {
                fellBehind = true
                // Until a third of the body waited on disk. A transport that never spills ends the
                // wait at the bound, and the parent's expectations fail.
                let bound = ContinuousClock.now + .seconds(60)
                while transport.spilledBytes.withLock({ $0 }) < 64 << 20, ContinuousClock.now < bound {
                    await Task.yield()
                }
            }
        }
        return read
    }
    result("read", read)
    result("outOfOrder", outOfOrder)
    result("spilled", transport.spilledBytes.withLock { $0 })
}

/// Responses that arrive a byte at a time (the body only, or the status line and headers too),
/// each lasting at least twice the per-attempt timeout, under chain `chainIndex` of the standard
/// behaviors, with requests that retry and that join a shared call. Prints each round's outcomes.
/// A request still reading a trickled head when its server stops would meet FoundationNetworking's
/// trap: here the process ends before the server does.
func trickle(_ base: URL, chainIndex: Int) async {
    let timeout = Duration.milliseconds(200)
    let chain: [any RequestBehavior] =
        switch chainIndex {
        case 0: []
        case 1: [RetryBehavior(RetryPolicy(maxAttempts: 2, baseDelay: .zero, jitter: .none))]
        case 2: [CacheBehavior(storage: MemoryCacheStorage())]
        case 3: [DeduplicationBehavior()]
        default:
            [
                RetryBehavior(RetryPolicy(maxAttempts: 2, baseDelay: .zero, jitter: .none)),
                CacheBehavior(storage: MemoryCacheStorage()), DeduplicationBehavior(),
            ]
        }
    var random = SplitMix64(state: UInt64(chainIndex) &+ 31)
    let client = NetworkClient(
        baseURL: base, transport: URLSessionTransport(), configuration: .init(timeout: timeout), behaviors: { chain })
    for round in 0..<4 {
        // 20–40 bytes, 20–30 ms apart: 0.4–1.2 s for the body alone, at least twice the timeout.
        let size = 20 + Int(random.next() % 21)
        let interval = 0.02 + Double(random.next() % 11) / 1_000
        let head = random.next() % 2 == 0
        let inFlight = 4 + Int(random.next() % 6)
        let outcomes = await withTaskGroup(of: String.self) { group in
            // Arrivals spread over the whole trickle, so that a caller can join a shared call late
            // (a call kept alive by later callers once delivered, after 2.4 s, a response to a
            // caller that had waited 0.3 s). The pause only places an arrival; nothing waits for
            // an effect.
            let span = Double(size) * interval
            for index in 0..<inFlight {
                let arrival = Duration.seconds(span * Double(index) / Double(inFlight))
                group.addTask {
                    try? await Task.sleep(for: arrival)
                    do throws(NetworkError) {
                        let response = try await client.send(
                            Request<HTTPResponse>(
                                path: "/trickle",
                                query: ["bytes": size, "interval": String(interval), "head": head ? "1" : "0"]))
                        return "success(\(response.body.count))"
                    } catch {
                        if case .notRetryable = error, let after = error.after { return after.name }
                        return error.name
                    }
                }
            }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        result("round\(round)", "\(size)b/\(interval)s/head:\(head)/\(inFlight):\(outcomes.joined(separator: ","))")
    }
}

/// Resident memory in use, after glibc has handed back what was freed.
func liveResident() -> Int? {
    #if canImport(Glibc)
        // malloc_trim(3) is in <malloc.h>, which the Glibc module does not export.
        typealias Trim = @convention(c) (Int) -> Int32
        if let symbol = dlsym(nil, "malloc_trim") { _ = unsafeBitCast(symbol, to: Trim.self)(0) }
    #endif
    return ResidentMemory.current()
}

/// Open file descriptors of this process.
func openDescriptors() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
}

/// TCP connections to 127.0.0.1:`port` that are not closed yet (this process is the only client
/// of its test's server).
func connections(toPort port: Int) -> Int {
    let table = (try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)) ?? ""
    let hexPort = ":" + String(port, radix: 16, uppercase: true).leftPadded(to: 4)
    return table.split(separator: "\n").dropFirst().filter { line in
        let columns = line.split(separator: " ")
        // columns: sl, local_address, rem_address, st (0A = LISTEN, 06 = TIME_WAIT, 07 = CLOSE)
        return columns.count > 3 && columns[2].hasSuffix(hexPort) && !["06", "07", "0A"].contains(columns[3])
    }.count
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
