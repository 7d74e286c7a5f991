import Benchmark
import BenchSupport
import Conveyor
import Foundation

// Each benchmark iteration runs 1,000 requests (scalingFactor .kilo); results are per request.
func makeConfiguration() -> Benchmark.Configuration {
    .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput], timeUnits: .nanoseconds, warmupIterations: 10,
        scalingFactor: .kilo, maxDuration: .seconds(2), maxIterations: 2_000)
}

let baseURL = URL(string: "http://127.0.0.1:8080/api")!

func client(_ count: Int) -> NetworkClient {
    NetworkClient(baseURL: baseURL, transport: CannedTransport()) { Array(repeating: NoOpBehavior(), count: count) }
}

let benchmarks: @Sendable () -> Void = {
    let configuration = makeConfiguration()

    // Round two (BENCHMARKS.md): behaviors that implement hooks, per-request behaviors, opt-outs,
    // a retried request, long chains, interceptors and every hook implemented; the same
    // scenarios instruction-count runs.
    let roundTwo: [Scenario] = [
        .hooks1, .hooks10, .request1, .request5, .optOut, .retried, .chain50, .chain200, .intercept10, .everyHook10,
    ]
    for scenario in roundTwo {
        let send = scenario.prepared()
        Benchmark("R2 \(scenario.rawValue)", configuration: configuration) { benchmark in
            try await send(benchmark.scaledIterations.count)
        }
    }
    Benchmark("1 Floor: transport.send", configuration: configuration) { benchmark in
        let transport: any HTTPTransport = CannedTransport()
        let request = HTTPRequest(method: .get, url: baseURL.appendingPathComponent("movies"))
        for _ in benchmark.scaledIterations {
            blackHole(try await transport.send(request))
        }
    }

    for count in [0, 1, 10, 50] {
        let client = client(count)
        let request = Request<Data>(path: "/movies")
        Benchmark("2 NetworkClient, \(count) no-op behaviors", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try await client.send(request))
            }
        }
    }

    do {
        let client = client(10)
        let paths = uniquePaths
        Benchmark("2 NetworkClient, 10 no-op behaviors, new path every request", configuration: configuration) {
            benchmark in
            for index in benchmark.scaledIterations {
                blackHole(try await client.send(Request<Data>(path: paths[index % paths.count])))
            }
        }
    }

    do {
        let client = client(5)
        let request = Request<Data>(path: "/movies", behaviors: Array(repeating: NoOpBehavior(), count: 5))
        Benchmark("2 NetworkClient, 5 client + 5 per-request no-op", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try await client.send(request))
            }
        }
    }

    do {
        let client = NetworkClient(baseURL: baseURL, transport: CannedTransport()) { realisticBehaviors() }
        let request = Request<Movie>(path: "/movies/7")
        Benchmark("3 Realistic chain + JSON decoding", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try await client.send(request))
            }
        }
        let uninterrupted = NetworkClient(baseURL: baseURL, transport: CannedTransport()) {
            realisticBehaviors(interrupting: false)
        }
        Benchmark("3 Realistic chain, no in-flight interruption + JSON decoding", configuration: configuration) {
            benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try await uninterrupted.send(request))
            }
        }
        let plain = NetworkClient(baseURL: baseURL, transport: CannedTransport())
        Benchmark("3 No behaviors + JSON decoding", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try await plain.send(request))
            }
        }
    }

    do {
        let request = Request<Data>(path: "/movies")
        let timed = NetworkClient(
            baseURL: baseURL, transport: CannedTransport(), configuration: .init(timeout: .seconds(30)))
        Benchmark("2 NetworkClient, 0 behaviors, a 30 s timeout", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try await timed.send(request))
            }
        }
        let guarded = NetworkClient(baseURL: baseURL, transport: CannedTransport(honorsCancellation: false))
        Benchmark("2 NetworkClient, 0 behaviors, a transport that may ignore cancellation", configuration: configuration) {
            benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try await guarded.send(request))
            }
        }
    }

    registerPeerBenchmarks(configuration)
}
