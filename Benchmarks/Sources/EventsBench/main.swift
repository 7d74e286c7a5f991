// Server-sent events: how fast Conveyor's parser reads a recorded stream beside mattt/EventSource
// 1.1.1's, and how many events per second `NetworkClient.events` delivers over loopback beside the
// raw byte stream of the same body (`NetworkClient.stream`, events counted at blank lines).
// Run from the repository root:
//   swift run --package-path Benchmarks -c release events-bench [megabytes] [events] [rounds]
//       (defaults 100 MB, 200,000 events, 5 rounds)
//   BIN=events-bench bash Benchmarks/loopback-instructions.sh 2000 events raw-events
//       (instructions and mallocs per event, counted by callgrind)
//
// Every measurement checks what ran: both parsers must produce the same number of events and the
// same checksum of their data, and each loopback read must see every event.
import BenchSupport
import Conveyor
import Dispatch
import EventSource
import Foundation

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

/// A recorded stream of about `megabytes` MB: an LLM-style token stream (ids, an event type, JSON
/// data of varying length), with comments and a multi-line event now and then, CRLF line ends in
/// a third of the events.
func recordedStream(megabytes: Int) -> Data {
    var data = Data()
    data.reserveCapacity(megabytes << 20)
    let words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "keeps", "running"]
    var number = 0
    while data.count < megabytes << 20 {
        number += 1
        let end = number % 3 == 0 ? "\r\n" : "\n"
        var text = ""
        for index in 0..<(1 + number % 7) { text += words[(number + index) % words.count] + " " }
        var event = "id: \(number)\(end)event: delta\(end)data: {\"index\":\(number),\"text\":\"\(text)\"}\(end)"
        if number % 50 == 0 { event = ": keep-alive\(end)" + event + "data: {\"more\":true}\(end)" }
        data.append(contentsOf: Array((event + end).utf8))
    }
    return data
}

/// Events and a checksum of their data, so two parsers can be compared on what they produced.
struct Tally: Equatable {
    var events = 0
    var checksum: UInt64 = 0
    mutating func add(_ data: String) {
        events += 1
        checksum = checksum &* 31 &+ UInt64(data.utf8.count)
    }
}

let chunkSize = 16 * 1024

func parseConveyor(_ stream: Data) throws -> Tally {
    var parser = ServerSentEventParser()
    var events: [ServerSentEvent] = []
    var tally = Tally()
    var offset = 0
    while offset < stream.count {
        let end = min(stream.count, offset + chunkSize)
        try parser.parse(stream[offset..<end], into: &events)
        for event in events { tally.add(event.data) }
        events.removeAll(keepingCapacity: true)
        offset = end
    }
    return tally
}

/// The bytes of `stream`, as an `AsyncSequence` of bytes (what the peer reads from
/// `URLSession.AsyncBytes`), read from memory.
struct MemoryBytes: AsyncSequence, Sendable {
    typealias Element = UInt8
    let data: Data
    struct AsyncIterator: AsyncIteratorProtocol {
        let data: Data
        var index: Int
        mutating func next() async -> UInt8? {
            guard index < data.endIndex else { return nil }
            defer { index += 1 }
            return data[index]
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(data: data, index: data.startIndex) }
}

func parsePeer(_ stream: Data) async throws -> Tally {
    var tally = Tally()
    for try await event in MemoryBytes(data: stream).events { tally.add(event.data) }
    return tally
}

func readEvents(_ client: NetworkClient, _ request: Request<Data>) async throws -> Int {
    var seen = 0
    for try await _ in client.events(request) { seen += 1 }
    return seen
}

/// The raw byte stream's rate: the same body's chunks, with the events counted at their blank
/// lines (LF LF; the server writes LF line ends), less the one that ends the server's opening
/// `retry: 0` block.
func readRaw(_ client: NetworkClient, _ request: Request<Data>) async throws -> Int {
    var seen = 0
    var previous: UInt8 = 0
    let streamed = try await client.stream(request)
    for try await chunk in streamed.body {
        chunk.withUnsafeBytes { bytes in
            for byte in bytes {
                if byte == 0x0A && previous == 0x0A { seen += 1 }
                previous = byte
            }
        }
    }
    return seen - 1
}

/// The raw byte stream's line rate: the same body split into lines (CR, LF or CRLF, also across
/// chunks), each non-empty line made a `String` (what `URLSession.AsyncBytes.lines` gives an
/// event-stream reader to start from), events counted at blank lines, less the opening block's.
func readLines(_ client: NetworkClient, _ request: Request<Data>) async throws -> Int {
    var seen = 0
    var line: [UInt8] = []
    var lines = 0
    var skipLF = false
    let streamed = try await client.stream(request)
    for try await chunk in streamed.body {
        chunk.withUnsafeBytes { bytes in
            for byte in bytes {
                if skipLF {
                    skipLF = false
                    if byte == 0x0A { continue }
                }
                if byte == 0x0A || byte == 0x0D {
                    skipLF = byte == 0x0D
                    if line.isEmpty {
                        seen += 1
                    } else {
                        let text = String(decoding: line, as: UTF8.self)
                        lines &+= text.utf8.count
                        line.removeAll(keepingCapacity: true)
                    }
                } else {
                    line.append(byte)
                }
            }
        }
    }
    return lines >= 0 ? seen - 1 : 0
}

/// The callgrind scenarios: `events N` reads N events through NetworkClient.events; `raw-events N`
/// reads the same body through NetworkClient.stream and counts blank lines.
func countScenario(_ scenario: String, _ count: Int) async throws {
    let port = ProcessInfo.processInfo.environment["LOOPBACK_PORT"].flatMap { Int($0) } ?? 0
    let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:\(port)")!, transport: URLSessionTransport(configuration: .ephemeral))
    let request = Request<Data>(path: "/events", query: ["count": count])
    let seen = scenario == "events" ? try await readEvents(client, request) : try await readRaw(client, request)
    if seen != count { print("failed: \(seen) of \(count) events") }
}

func benchmark(_ arguments: [String]) async throws {
    let megabytes = arguments.first.flatMap { Int($0) } ?? 100
    let loopbackEvents = arguments.dropFirst().first.flatMap { Int($0) } ?? 200_000
    let rounds = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 5

    // 1. Parsing a recorded stream, in memory.
    let stream = recordedStream(megabytes: megabytes)
    let size = Double(stream.count) / 1e6
    var conveyorRates: [Double] = []
    var peerRates: [Double] = []
    var expected: Tally?
    for _ in 0..<rounds {
        let clock = ContinuousClock()
        var ours = Tally()
        let oursTime = try clock.measure { ours = try parseConveyor(stream) }
        var theirs = ours
        let start = clock.now
        // EVENTS_BENCH_OURS=1 leaves the peer out (to profile Conveyor's parser alone).
        if ProcessInfo.processInfo.environment["EVENTS_BENCH_OURS"] == nil { theirs = try await parsePeer(stream) }
        let theirsTime = clock.now - start
        guard ours == theirs, expected == nil || expected == ours else {
            print("failed: the parsers disagree (\(ours.events) and \(theirs.events) events)")
            exit(1)
        }
        expected = ours
        conveyorRates.append(size / seconds(oursTime))
        peerRates.append(size / seconds(theirsTime))
    }
    let events = expected?.events ?? 0
    print("Parsing a recorded stream of \(String(format: "%.1f", size)) MB (\(events) events, \(chunkSize / 1024) KiB chunks), median of \(rounds) rounds:")
    print("")
    print("| parser | MB/s | events/s | ratio |")
    print("|---|---:|---:|---:|")
    let oursMedian = median(conveyorRates)
    let theirsMedian = median(peerRates)
    let perEvent = Double(events) / size
    print(String(format: "| Conveyor `ServerSentEventParser` | %.1f | %.0f | %.1f× |", oursMedian, oursMedian * perEvent, oursMedian / theirsMedian))
    print(String(format: "| mattt/EventSource 1.1.1 (`AsyncSequence.events`) | %.1f | %.0f | 1.0× |", theirsMedian, theirsMedian * perEvent))

    // 2. Over loopback: events per second through NetworkClient.events beside the raw byte stream.
    if loopbackEvents == 0 { return }
    let (server, port) = try startTestServer()
    defer { server.terminate() }
    let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:\(port)")!, transport: URLSessionTransport(configuration: .ephemeral))
    let request = Request<Data>(path: "/events", query: ["count": loopbackEvents, "pad": 40])
    _ = try await readRaw(client, Request<Data>(path: "/events", query: ["count": 1000]))  // warm up
    var rates: [[Double]] = [[], [], []]
    let readers: [(NetworkClient, Request<Data>) async throws -> Int] = [readEvents, readLines, readRaw]
    for round in 0..<rounds {
        for which in [[0, 1, 2], [1, 2, 0], [2, 0, 1]][round % 3] {
            let start = ContinuousClock.now
            let seen = try await readers[which](client, request)
            let elapsed = seconds(ContinuousClock.now - start)
            guard seen == loopbackEvents else {
                print("failed: \(seen) of \(loopbackEvents) events")
                exit(1)
            }
            rates[which].append(Double(seen) / elapsed)
        }
    }
    let eventRate = median(rates[0])
    let lineRate = median(rates[1])
    let byteRate = median(rates[2])
    print("")
    print("Over loopback (URLSessionTransport, \(loopbackEvents) events of ~60 bytes in one response), median of \(rounds) rounds:")
    print("")
    print("| path | events/s | ratio to the line rate | ratio to the byte rate |")
    print("|---|---:|---:|---:|")
    print(String(format: "| `NetworkClient.events` (parsed events, every behavior hook) | %.0f | %.2f | %.2f |", eventRate, eventRate / lineRate, eventRate / byteRate))
    print(String(format: "| `NetworkClient.stream`, split into lines (a `String` per line) | %.0f | 1.00 | %.2f |", lineRate, lineRate / byteRate))
    print(String(format: "| `NetworkClient.stream`, raw bytes (blank lines counted, no strings) | %.0f | %.2f | 1.00 |", byteRate, byteRate / lineRate))
}

// No top-level `await`: an async main parks the main thread in dispatch_main, which valgrind
// cannot run (see loopback-instruction-count).
let arguments = Array(CommandLine.arguments.dropFirst())
let done = DispatchSemaphore(value: 0)
Task.detached {
    do {
        if let scenario = arguments.first, ["events", "raw-events"].contains(scenario) {
            try await countScenario(scenario, arguments.dropFirst().first.flatMap { Int($0) } ?? 1000)
        } else {
            try await benchmark(arguments)
        }
    } catch {
        print("failed: \(error)")
        exit(1)
    }
    done.signal()
}
done.wait()
exit(0)
