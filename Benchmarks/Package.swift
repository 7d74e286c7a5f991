// swift-tools-version: 6.1
// Conveyor's benchmarks: a separate package so the library itself keeps zero dependencies.
// Run from the repository root:
//   swift package --package-path Benchmarks benchmark                     (in-memory scenarios)
//   swift run --package-path Benchmarks -c release loopback-bench         (end to end over 127.0.0.1)
//   swift run --package-path Benchmarks -c release cache-bench            (cached vs network GET over 127.0.0.1)
//   swift run --package-path Benchmarks -c release shared-cache-bench     (PostgreSQL hit vs memory hit vs upstream miss; needs CONVEYOR_POSTGRES_URL)
//   swift run --package-path Benchmarks -c release transfer-bench         (1 GiB down and up vs curl over 127.0.0.1)
//   swift run --package-path Benchmarks -c release concurrency-bench      (1/8/64 requests in flight, in memory)
//   swift run --package-path Benchmarks -c release hostile-bench          (parsers at 1/16/64 KB of hostile input)
//   swift run --package-path Benchmarks -c release events-bench           (event-stream parsing vs mattt/EventSource; loopback events/s)
//   swift run --package-path Benchmarks -c release overload-sim           (an outage, a quota, a slow tail and a brownout, with and without each mechanism)
import PackageDescription

let package = Package(
    name: "ConveyorBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Conveyor", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-openapi-runtime", exact: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
        // Conveyor on AsyncHTTPClient beside raw AsyncHTTPClient (loopback-bench, transfer-bench,
        // loopback-instruction-count).
        .package(name: "ConveyorIntegrations", path: "../Integrations"),
        .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // The shared cache's storage and its database client (shared-cache-bench).
        .package(url: "https://github.com/vapor/postgres-nio.git", exact: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // The generated client on swift-openapi-runtime's own transports (openapi-bench).
        .package(url: "https://github.com/apple/swift-openapi-urlsession", exact: "1.4.0"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", exact: "1.5.0"),
        // The peer event-stream parser (events-bench): mattt/EventSource 1.1.1, a local copy that builds on Linux.
        .package(name: "EventSource", path: "Peers/EventSource"),
    ],
    targets: [
        // Shared by the executables: the realistic chain's fakes, the in-memory transport, and the
        // test server's startup (for the loopback benchmarks).
        .target(
            name: "BenchSupport", dependencies: [.product(name: "Conveyor", package: "Conveyor")],
            path: "Sources/BenchSupport"),
        // The peer's client path (swift-openapi-runtime), shared by both in-memory executables.
        .target(
            name: "PeerSupport",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/PeerSupport"),
        .executableTarget(
            name: "ConveyorBenchmarks",
            dependencies: [
                "BenchSupport", "PeerSupport",
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/ConveyorBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "loopback-bench",
            dependencies: [
                "BenchSupport", .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "ConveyorAsyncHTTPClient", package: "ConveyorIntegrations"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Sources/LoopbackBench"),
        // A cached GET against a network GET over loopback (CacheBehavior).
        .executableTarget(
            name: "cache-bench", dependencies: ["BenchSupport", .product(name: "Conveyor", package: "Conveyor")],
            path: "Sources/CacheBench"),
        .executableTarget(
            name: "shared-cache-bench",
            dependencies: [
                "BenchSupport", .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "ConveyorAsyncHTTPClient", package: "ConveyorIntegrations"),
                .product(name: "ConveyorPostgres", package: "ConveyorIntegrations"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/SharedCacheBench"),
        // 1 GiB down and up through NetworkClient and curl over loopback: time and peak memory.
        .executableTarget(
            name: "transfer-bench",
            dependencies: [
                "BenchSupport", .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "ConveyorAsyncHTTPClient", package: "ConveyorIntegrations"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Sources/TransferBench"),
        // Requests per second with 1, 8 and 64 requests in flight on one client, in memory.
        .executableTarget(
            name: "concurrency-bench", dependencies: ["BenchSupport", .product(name: "Conveyor", package: "Conveyor")],
            path: "Sources/ConcurrencyBench"),
        // Each parser of outside bytes at 1, 16 and 64 KB of hostile input (linear, not quadratic).
        .executableTarget(
            name: "hostile-bench", dependencies: [.product(name: "Conveyor", package: "Conveyor")],
            path: "Sources/HostileBench"),
        // One scenario N times, for valgrind's callgrind: instructions per request (instructions.sh).
        .executableTarget(
            name: "instruction-count",
            dependencies: ["BenchSupport", "PeerSupport", .product(name: "Conveyor", package: "Conveyor")],
            path: "Sources/InstructionCount"),
        // The client's instructions per loopback request, raw and through NetworkClient, on
        // AsyncHTTPClient and URLSession (loopback-instructions.sh).
        .executableTarget(
            name: "loopback-instruction-count",
            dependencies: [
                "BenchSupport", .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ConveyorAsyncHTTPClient", package: "ConveyorIntegrations"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Sources/LoopbackInstructionCount"),
        // The client generated from Integrations/Sources/TestServerAPI/openapi.yaml (a symbolic link).
        .target(
            name: "TestServerAPI",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/TestServerAPI",
            exclude: ["openapi.yaml", "openapi-generator-config.yaml", "regenerate.sh"]),
        // The generated client through ConveyorTransport against the same client through
        // swift-openapi-runtime's own transports with equivalent middlewares, over loopback.
        .executableTarget(
            name: "openapi-bench",
            dependencies: [
                "BenchSupport", "TestServerAPI", .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "ConveyorOpenAPI", package: "ConveyorIntegrations"),
                .product(name: "ConveyorAsyncHTTPClient", package: "ConveyorIntegrations"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
            ],
            path: "Sources/OpenAPIBench"),
        // Event streams: Conveyor's parser beside mattt/EventSource's; events/s over loopback.
        .executableTarget(
            name: "events-bench",
            dependencies: [
                "BenchSupport", .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "EventSource", package: "EventSource"),
            ],
            path: "Sources/EventsBench"),
        // The overload simulation (Docs/Resilience.md): real clients, budget and breaker against an
        // in-memory upstream on a virtual clock.
        .executableTarget(
            name: "overload-sim",
            dependencies: [
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "ConveyorTesting", package: "Conveyor"),
            ],
            path: "Sources/OverloadSim"),
    ]
)
