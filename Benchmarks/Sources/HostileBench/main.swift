// Each parser of outside bytes at 1 KB, 16 KB and 64 KB of hostile input (contract rule 17: total
// and linear). Every row runs the real path: a `NetworkClient` whose in-memory transport answers
// with the hostile header or body, through the behavior that reads it (retry, cache, logging), or
// the public function itself. The client's fixed cost (the same client answered with a benign
// response) is measured in the same run and subtracted. Linear work shows as a 64 KB / 16 KB ratio
// near 4 (quadratic work would show near 16), and as a steady cost per byte.
// Run from the repository root:
//   swift run --package-path Benchmarks -c release hostile-bench [rounds]
import Conveyor
import Foundation

//   hostile-bench [rounds] [row] [size]: one row at one size, for callgrind (a single call each)
let numbers = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let rounds = numbers.first ?? 5
let base = URL(string: "http://127.0.0.1:8080/api")!
let sizes = [1 << 10, 16 << 10, 64 << 10]

/// Answers every request with the same headers and body.
struct HostileTransport: HTTPTransport {
    let status: Int
    let headers: HTTPHeaders
    let body: Data
    var honorsCancellation: Bool { true }
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: body, request: request)
    }
}

/// Counts lines, so the logging rows cannot be skipped as unused.
final class CountingSink: LogSink, @unchecked Sendable {  // its one counter is behind the lock
    private let lock = NSLock()
    private var characters = 0
    var isEnabled: Bool { true }
    func write(_ entry: LogEntry) {
        let count = entry.message.utf8.count
        lock.lock()
        characters += count
        lock.unlock()
    }
}

/// A stored response in the byte format `CachedResponse.encoded()` documents (version 1): what
/// `DiskCacheStorage` reads back from disk.
func encodedEntry(headers: [(String, String)]) -> Data {
    var out = Data("CNVC".utf8)
    func integer<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) } }
    func string(_ text: String) {
        integer(UInt32(text.utf8.count))
        out.append(contentsOf: Array(text.utf8))
    }
    out.append(1)
    integer(UInt16(200))
    integer(Double(1).bitPattern)
    integer(Double(2).bitPattern)
    string("")
    integer(UInt32(0))
    integer(UInt32(headers.count))
    for (name, value) in headers {
        string(name)
        string(value)
    }
    integer(UInt64(0))
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a of everything before it
    for byte in out {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    integer(hash)
    return out
}

/// `text` repeated to exactly `size` bytes.
func repeated(_ text: String, _ size: Int) -> String {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(size)
    let unit = Array(text.utf8)
    while bytes.count < size { bytes += unit }
    return String(decoding: bytes.prefix(size), as: UTF8.self)
}

/// Nanoseconds per call: the median of `rounds` rounds, each long enough to time.
func nanoseconds(_ body: () async throws -> Void) async rethrows -> Double {
    let clock = ContinuousClock()
    var iterations = 1
    while true {  // calibrate: a round of at least 20 ms
        let elapsed = try await clock.measure { for _ in 0..<iterations { try await body() } }
        if elapsed >= .milliseconds(20) || iterations >= 1 << 20 { break }
        iterations *= 2
    }
    var samples: [Double] = []
    for _ in 0..<rounds {
        let elapsed = try await clock.measure { for _ in 0..<iterations { try await body() } }
        samples.append(Double(elapsed.components.attoseconds) / 1e9 + Double(elapsed.components.seconds) * 1e9)
    }
    return samples.sorted()[samples.count / 2] / Double(iterations)
}

/// A client over `transport` with `behaviors`, sending GET /movies.
func clientCall(_ transport: HostileTransport, _ behaviors: [any RequestBehavior]) -> () async throws -> Void {
    let client = NetworkClient(baseURL: base, transport: transport, behaviors: { behaviors })
    let request = Request<HTTPResponse>(path: "/movies")
    return { _ = try? await client.send(request) }
}

struct Row {
    let name: String
    let input: String
    /// The call for an input of `size` bytes, and the same call with a benign input.
    let make: (Int) -> (hostile: () async throws -> Void, benign: () async throws -> Void)
}

let json = ["Content-Type": "application/json"] as HTTPHeaders
let benignBody = Data(#"{"id":7}"#.utf8)
func benign(_ behaviors: [any RequestBehavior], headers: HTTPHeaders = json, status: Int = 200) -> () async throws -> Void {
    clientCall(HostileTransport(status: status, headers: headers, body: benignBody), behaviors)
}

let rows: [Row] = [
    Row(name: "`Retry-After` (RetryAfter.delay)", input: "`Sun` + U+0731, repeated") { size in
        let value = repeated("Sun\u{0731}", size)
        return ({ _ = RetryAfter.delay(from: value, now: Date()) }, { _ = RetryAfter.delay(from: "120", now: Date()) })
    },
    Row(name: "`Date`, `Expires`, `Last-Modified` (CacheBehavior)", input: "non-ASCII date text in each") { size in
        let value = repeated("Sun\u{0731}, 06 Nov 1994 ", size)
        var headers = json
        for name in ["Date", "Expires", "Last-Modified"] { headers.add(name: name, value: value) }
        let cache = { [CacheBehavior(storage: MemoryCacheStorage())] as [any RequestBehavior] }
        return (clientCall(HostileTransport(status: 200, headers: headers, body: benignBody), cache()), benign(cache()))
    },
    Row(name: "`Cache-Control` (CacheBehavior)", input: "quoted commas, escapes, unknown directives") { size in
        let value = repeated(#"no-cache="a,\"b", x-y=1, max-age=9, "#, size)
        var headers = json
        headers.add(name: "Cache-Control", value: value)
        let cache = { [CacheBehavior(storage: MemoryCacheStorage(maxBytes: 0))] as [any RequestBehavior] }
        return (clientCall(HostileTransport(status: 200, headers: headers, body: benignBody), cache()), benign(cache()))
    },
    Row(name: "`Vary` (CacheBehavior)", input: "distinct names, each twice") { size in
        var names: [String] = []
        var length = 0
        var index = 0
        while length < size {
            let name = "X-H\(index / 2), "
            names.append(name)
            length += name.utf8.count
            index += 1
        }
        var headers = json
        headers.add(name: "Cache-Control", value: "max-age=60")
        headers.add(name: "Vary", value: String(names.joined().prefix(size)))
        let cache = { [CacheBehavior(storage: MemoryCacheStorage(maxBytes: 0))] as [any RequestBehavior] }
        return (clientCall(HostileTransport(status: 200, headers: headers, body: benignBody), cache()), benign(cache()))
    },
    Row(name: "`Content-Type` (LoggingBehavior's preview)", input: "quoted parameters with escapes") { size in
        let headers: HTTPHeaders = ["Content-Type": "application/json" + repeated(#"; a="\";b\\"; c=d"#, size)]
        let logging = { [LoggingBehavior(sink: CountingSink(), bodyPreviewLimit: 64)] as [any RequestBehavior] }
        return (clientCall(HostileTransport(status: 200, headers: headers, body: benignBody), logging()), benign(logging()))
    },
    Row(name: "body preview (LoggingBehavior)", input: "JSON: escaped keys, nesting, hidden values") { size in
        let body = Data(repeated(#"{"\u0061ccess_token" :{"k":["s3cret",{"p":"q"}]},"id":[1,"}]"],"t\"x":"#, size).utf8)
        let logging = { [LoggingBehavior(sink: CountingSink(), bodyPreviewLimit: size)] as [any RequestBehavior] }
        return (clientCall(HostileTransport(status: 200, headers: json, body: body), logging()), benign(logging()))
    },
    Row(name: "secret scrubbing (LoggingBehavior)", input: "a secret of this size, echoed in a body of this size") { size in
        var random = SystemRandomNumberGenerator()
        let secret = String((0..<size).map { _ in Character(UnicodeScalar(UInt8.random(in: 0x61...0x7A, using: &random))) })
        let body = Data(("echo: " + secret).utf8.prefix(size))
        let logging = { (secret: String) -> [any RequestBehavior] in
            [HeadersBehavior(["X-API-Key": secret]), LoggingBehavior(sink: CountingSink(), bodyPreviewLimit: size)]
        }
        return (
            clientCall(HostileTransport(status: 200, headers: json, body: body), logging(secret)),
            benign(logging("short-key"))
        )
    },
    Row(name: "cache entry read from disk (CachedResponse(encoded:))", input: "an entry with this many header bytes") { size in
        let fields = (0..<(size / 32)).map { ("X-H\($0)", "v\u{0731}\u{FFFD}, max-age=\"\($0)\"") }
        let encoded = encodedEntry(headers: [("Cache-Control", "max-age=60")] + fields)
        let small = encodedEntry(headers: [("Cache-Control", "max-age=60")])
        precondition(CachedResponse(encoded: encoded) != nil, "the benchmark's entry must decode")
        return ({ _ = CachedResponse(encoded: encoded) }, { _ = CachedResponse(encoded: small) })
    },
]

if numbers.count == 3 {
    let (hostile, _) = rows[numbers[1]].make(numbers[2])
    for _ in 0..<rounds { try await hostile() }
    exit(0)
}

print("Hostile input, in memory, median of \(rounds) rounds; µs per request above the same call with a benign input")
print("")
print("| parser | hostile input | 1 KB | 16 KB | 64 KB | 64 KB / 16 KB | ns per byte at 64 KB |")
print("|---|---|---:|---:|---:|---:|---:|")
for row in rows {
    var costs: [Double] = []
    for size in sizes {
        let (hostile, benignCall) = row.make(size)
        let floor = try await nanoseconds(benignCall)
        let total = try await nanoseconds(hostile)
        costs.append(max(0, total - floor) / 1_000)
    }
    print(String(format: "| %@ | %@ | %.1f | %.1f | %.1f | %.1f | %.1f |", row.name, row.input, costs[0], costs[1], costs[2],
        costs[1] > 0 ? costs[2] / costs[1] : 0, costs[2] * 1_000 / Double(sizes[2])))
}
