// Runs one loopback scenario a given number of times, for counting the client's instructions with
// valgrind's callgrind (see Benchmarks/loopback-instructions.sh): GET /json/movies from
// Tests/Server/server.py on 127.0.0.1 (its own process, which callgrind does not follow), with
// the benchmarks' three headers, decoded. Run twice with different counts; the difference divided
// by the difference in counts is the client's cost of one request, without start-up.
//
//   raw-ahc          AsyncHTTPClient's execute, alone
//   raw-ahc-delegate AsyncHTTPClient's delegate API (which the transport uses), with a delegate
//                    that collects the body, alone
//   ahc-plain        NetworkClient on AsyncHTTPClientTransport, the headers from one behavior
//   ahc-timeout      the same with a 30 s timeout: every attempt a guarded step with a deadline
//   ahc              NetworkClient on AsyncHTTPClientTransport with the realistic chain
//   raw-urlsession   URLSession.data(for:), alone
//   urlsession-plain NetworkClient on URLSessionTransport, the headers from one behavior
//   urlsession       NetworkClient on URLSessionTransport with the realistic chain
import AsyncHTTPClient
import BenchSupport
import Conveyor
import ConveyorAsyncHTTPClient
import Dispatch
import Foundation
import NIOCore
import NIOHTTP1

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

let scenarios = ["raw-ahc", "raw-ahc-delegate", "ahc-plain", "ahc-timeout", "ahc", "raw-urlsession", "urlsession-plain", "urlsession"]

/// What /json/movies answers.
struct Movies: Decodable {
    struct Movie: Decodable {
        var id: Int
        var title: String
    }
    var movies: [Movie]
    init(from decoder: any Decoder) throws { movies = try [Movie](from: decoder) }
}

let headers = [
    ("User-Agent", "Bench/1.0"), ("Accept-Language", "en"), ("Authorization", "Bearer cached-token-0123456789"),
]

func run(_ name: String, _ count: Int) async throws {
    // Under valgrind, spawning the server fails (EBADF in Process): the script starts it and
    // passes its port in LOOPBACK_PORT.
    var server: Process?
    let port: Int
    if let given = ProcessInfo.processInfo.environment["LOOPBACK_PORT"].flatMap(Int.init) {
        port = given
    } else {
        let started = try startTestServer()
        (server, port) = (started.process, started.port)
    }
    defer { server?.terminate() }
    let base = URL(string: "http://127.0.0.1:\(port)")!
    let url = base.appendingPathComponent("json/movies")
    let decoder = JSONDecoder()
    let plainHeaders = HeadersBehavior(
        ["User-Agent": "Bench/1.0", "Accept-Language": "en", "Authorization": "Bearer cached-token-0123456789"])
    if name.contains("ahc") {
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())
        let transport = try AsyncHTTPClientTransport(client: http)
        switch name {
        case "raw-ahc":
            for _ in 0..<count {
                var request = HTTPClientRequest(url: url.absoluteString)
                for (field, value) in headers { request.headers.add(name: field, value: value) }
                let response = try await http.execute(request, timeout: .seconds(60))
                let body = try await response.body.collect(upTo: 64 << 20)
                _ = try decoder.decode(Movies.self, from: Data(body.readableBytesView))
            }
        case "raw-ahc-delegate":
            for _ in 0..<count {
                var fields = NIOHTTP1.HTTPHeaders()
                for (field, value) in headers { fields.add(name: field, value: value) }
                let request = try HTTPClient.Request(url: url.absoluteString, method: .GET, headers: fields)
                let collector = ResponseAccumulator(request: request)
                let response = try await http.execute(
                    request: request, delegate: collector, eventLoop: .indifferent, deadline: .now() + .seconds(60),
                    logger: nil
                ).futureResult.get()
                _ = try decoder.decode(Movies.self, from: Data((response.body ?? ByteBuffer()).readableBytesView))
            }
        case "ahc-plain", "ahc-timeout":
            let client = NetworkClient(
                baseURL: base, transport: transport,
                configuration: .init(timeout: name == "ahc-timeout" ? .seconds(30) : nil)
            ) { plainHeaders }
            for _ in 0..<count { _ = try await client.send(Request<Movies>(path: "/json/movies")) }
        default:
            let client = NetworkClient(baseURL: base, transport: transport) { realisticBehaviors() }
            for _ in 0..<count { _ = try await client.send(Request<Movies>(path: "/json/movies")) }
        }
        try await http.shutdown()
    } else {
        let transport = URLSessionTransport(configuration: .ephemeral)
        switch name {
        case "raw-urlsession":
            for _ in 0..<count {
                var request = URLRequest(url: url)
                for (field, value) in headers { request.setValue(value, forHTTPHeaderField: field) }
                let (data, _) = try await transport.session.data(for: request)
                _ = try decoder.decode(Movies.self, from: data)
            }
        case "urlsession-plain":
            let client = NetworkClient(baseURL: base, transport: transport) { plainHeaders }
            for _ in 0..<count { _ = try await client.send(Request<Movies>(path: "/json/movies")) }
        default:
            let client = NetworkClient(baseURL: base, transport: transport) { realisticBehaviors() }
            for _ in 0..<count { _ = try await client.send(Request<Movies>(path: "/json/movies")) }
        }
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let count = Int(arguments[1]), scenarios.contains(arguments[0]) else {
    print("usage: loopback-instruction-count <\(scenarios.joined(separator: "|"))> <requests>")
    exit(2)
}
// No top-level `await`: an async main parks the main thread in dispatch_main, which valgrind
// cannot run (see instruction-count).
let done = DispatchSemaphore(value: 0)
Task.detached {
    do {
        try await run(arguments[0], count)
    } catch {
        print("failed: \(error)")
        exit(1)
    }
    done.signal()
}
done.wait()
exit(0)
