// swift-tools-version: 6.2
// A real service on Conveyor: a Hummingbird 2 server whose route calls an upstream HTTP API
// through Conveyor on AsyncHTTPClient (auth refresh, retry, cache, de-duplication, tracing,
// metrics and logging together), its HTTPClient owned by swift-service-lifecycle; with
// CACHE_DATABASE_URL, its instances share one HTTP cache on PostgreSQL.
// Run: `swift run --package-path Examples/Service forecast-service`
// Test: `swift test --package-path Examples/Service`
import PackageDescription

let package = Package(
    name: "Service",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Conveyor", path: "../.."),
        .package(name: "ConveyorIntegrations", path: "../../Integrations"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .target(
            name: "ForecastService",
            dependencies: [
                .product(name: "Conveyor", package: "Conveyor"),
                .product(name: "ConveyorAsyncHTTPClient", package: "ConveyorIntegrations"),
                .product(name: "ConveyorLogging", package: "ConveyorIntegrations"),
                .product(name: "ConveyorMetrics", package: "ConveyorIntegrations"),
                .product(name: "ConveyorTracing", package: "ConveyorIntegrations"),
                .product(name: "ConveyorPostgres", package: "ConveyorIntegrations"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]),
        .executableTarget(name: "forecast-service", dependencies: ["ForecastService"]),
        // The repository's test support (a symbolic link): TestPostgres starts the PostgreSQL the
        // two-instance test shares, unless CI gave one (CONVEYOR_POSTGRES_URL).
        .target(name: "ServiceTestSupport", path: "Tests/Support"),
        .testTarget(
            name: "ForecastServiceTests",
            dependencies: [
                "ForecastService", "ServiceTestSupport",
                .product(name: "ConveyorTesting", package: "Conveyor"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
