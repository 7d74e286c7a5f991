// swift-tools-version: 6.0
import PackageDescription

/// Every target opts into the same upcoming features (see Docs/Decisions.md).
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Conveyor",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "Conveyor", targets: ["Conveyor"]),
        .library(name: "ConveyorTesting", targets: ["ConveyorTesting"]),
        .library(name: "ConveyorTransportConformance", targets: ["ConveyorTransportConformance"]),
        .executable(name: "conveyor-demo", targets: ["ConveyorDemo"]),
    ],
    targets: [
        .target(name: "ConveyorPipeline", path: "Sources/Pipeline", swiftSettings: strictSettings),
        .target(
            name: "ConveyorBehaviors", dependencies: ["ConveyorPipeline"],
            path: "Sources/Behaviors", swiftSettings: strictSettings),
        .target(
            name: "Conveyor", dependencies: ["ConveyorPipeline", "ConveyorBehaviors"],
            path: "Sources/Client", swiftSettings: strictSettings),
        .target(
            name: "ConveyorTesting", dependencies: ["Conveyor"],
            path: "Sources/Testing", swiftSettings: strictSettings),
        // The transport conformance kit, for authors of an `HTTPTransport` (its own product: an app's
        // tests never need it; see Docs/Stability.md, "Products by purpose").
        .target(
            name: "ConveyorTransportConformance", dependencies: ["Conveyor", "ConveyorTesting"],
            path: "Sources/TransportConformance", swiftSettings: strictSettings),
        .executableTarget(
            name: "ConveyorDemo", dependencies: ["Conveyor", "ConveyorTesting"],
            path: "Sources/Demo", swiftSettings: strictSettings),
        // The child process of the transport conformance tests (not a product): one check per
        // process, so a transport that traps fails one check instead of the test run.
        .executableTarget(
            name: "conformance-child", dependencies: ["Conveyor", "ConveyorTransportConformance"],
            path: "Tests/ConformanceChild", swiftSettings: strictSettings),
        // The child process of the test suite's resource and platform-trap tests (not a product):
        // one scenario per process, so a test measures its own process's memory and a platform
        // trap fails one test instead of the run (Docs/Testing.md, "Green every time").
        .executableTarget(
            name: "test-child",
            dependencies: ["Conveyor", "ConveyorTesting", "ConveyorTestSupport", "ConveyorTransportConformance"],
            path: "Tests/TestChild", swiftSettings: strictSettings),
        // Test support (not a product): starts the loopback server in Tests/Server.
        .target(name: "ConveyorTestSupport", path: "Tests/Support", swiftSettings: strictSettings),
        // The oracles of the fuzz targets (not a product): FuzzTesting/ runs them under libFuzzer,
        // the test suite replays the committed corpus through them.
        .target(
            name: "ConveyorFuzzChecks", dependencies: ["ConveyorPipeline", "ConveyorBehaviors", "ConveyorTesting"],
            path: "Tests/FuzzChecks", swiftSettings: strictSettings),
        .testTarget(
            name: "ConveyorPipelineTests", dependencies: ["ConveyorPipeline", "ConveyorTesting", "ConveyorTestSupport"],
            path: "Tests/ConveyorPipelineTests", swiftSettings: strictSettings),
        .testTarget(
            name: "ConveyorBehaviorsTests",
            dependencies: ["ConveyorBehaviors", "Conveyor", "ConveyorTesting", "ConveyorTestSupport", "ConveyorFuzzChecks"],
            path: "Tests/ConveyorBehaviorsTests", swiftSettings: strictSettings),
        .testTarget(
            name: "ConveyorTests",
            dependencies: ["Conveyor", "ConveyorTesting", "ConveyorTestSupport", "ConveyorTransportConformance"],
            path: "Tests/ConveyorTests", swiftSettings: strictSettings),
        .testTarget(
            name: "ConveyorTestingTests",
            dependencies: ["ConveyorTesting", "ConveyorTransportConformance", "ConveyorTestSupport"],
            path: "Tests/ConveyorTestingTests", exclude: ["Fixtures"], swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)
