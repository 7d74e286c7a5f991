import Benchmark
import PeerSupport

func registerPeerBenchmarks(_ configuration: Benchmark.Configuration) {
    for count in [0, 1, 10] {
        let client = PeerClient(middlewares: count)
        Benchmark("4 Peer openapi-runtime, \(count) no-op middlewares", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try await client.send())
            }
        }
    }
}
