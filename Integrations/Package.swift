// swift-tools-version: 6.0
import PackageDescription

/// Conveyor on the swift-server stack. A package of its own, so that the `Conveyor` package keeps
/// zero dependencies: add the products you want, and only their dependencies are built.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "ConveyorIntegrations",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "ConveyorAsyncHTTPClient", targets: ["ConveyorAsyncHTTPClient"]),
        .library(name: "ConveyorLogging", targets: ["ConveyorLogging"]),
        .library(name: "ConveyorMetrics", targets: ["ConveyorMetrics"]),
        .library(name: "ConveyorTracing", targets: ["ConveyorTracing"]),
        .library(name: "ConveyorOpenAPI", targets: ["ConveyorOpenAPI"]),
        .library(name: "ConveyorPostgres", targets: ["ConveyorPostgres"]),
    ],
    dependencies: [
        .package(name: "Conveyor", path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // SHA-256 of cache keys; PostgresNIO depends on it already, so it adds nothing to the build.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        .target(
            name: "ConveyorAsyncHTTPClient",
            dependencies: [
                "ConveyorLogging",
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        // OpenTelemetry's HTTP client conventions, shared by the three below (not a product).
        .target(
            name: "ConveyorConventions",
            dependencies: [.product(name: "Conveyor", package: "Conveyor")],
            swiftSettings: strictSettings),
        .target(
            name: "ConveyorLogging",
            dependencies: [
                "ConveyorConventions",
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings),
        .target(
            name: "ConveyorMetrics",
            dependencies: [
                "ConveyorConventions",
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings),
        .target(
            name: "ConveyorTracing",
            dependencies: [
                "ConveyorConventions",
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSettings),
        // Clients that swift-openapi-generator writes, through a NetworkClient (Docs/OpenAPI.md).
        .target(
            name: "ConveyorOpenAPI",
            dependencies: [
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings),
        // A CacheStorage in a PostgreSQL table, shared by a fleet (Docs/Caching.md).
        .target(
            name: "ConveyorPostgres",
            dependencies: [
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        // The second process of the shared-cache tests (not a product): a client with a
        // PostgresCacheStorage that sends what the test writes to its standard input.
        .executableTarget(
            name: "cache-peer",
            dependencies: [
                "ConveyorPostgres", "ConveyorAsyncHTTPClient",
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/CachePeer", swiftSettings: strictSettings),
        // The client swift-openapi-generator wrote from Sources/TestServerAPI/openapi.yaml (the
        // test server's routes), committed; regenerate.sh writes it again (not a product).
        .target(
            name: "TestServerAPI",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            exclude: ["openapi.yaml", "openapi-generator-config.yaml", "regenerate.sh"]),
        // The chaos soak (not a product): Tests/Server/chaos.py's misbehaviors against both
        // transports, outside `swift test` (Docs/Reliability.md).
        .executableTarget(
            name: "chaos-soak",
            dependencies: [
                "ConveyorAsyncHTTPClient",
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Sources/ChaosSoak", swiftSettings: strictSettings),
        // The child process of the AsyncHTTPClient conformance tests (not a product).
        .executableTarget(
            name: "ahc-conformance-child",
            dependencies: [
                "ConveyorAsyncHTTPClient",
                .product(name: "ConveyorTransportConformance", package: "Conveyor"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Sources/ConformanceChild", swiftSettings: strictSettings),
        // The root package's test support (a symbolic link): starts Tests/Server/server.py, also linked.
        .target(name: "IntegrationsTestSupport", path: "Tests/Support", swiftSettings: strictSettings),
        .testTarget(
            name: "ConveyorIntegrationsTests",
            dependencies: [
                "ConveyorAsyncHTTPClient", "ConveyorLogging", "ConveyorMetrics", "ConveyorTracing",
                "ConveyorOpenAPI", "ConveyorPostgres", "TestServerAPI", "IntegrationsTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ConveyorTesting", package: "Conveyor"),
                .product(name: "ConveyorTransportConformance", package: "Conveyor"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)
