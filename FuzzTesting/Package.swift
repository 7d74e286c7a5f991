// swift-tools-version: 6.0
import PackageDescription

/// libFuzzer targets, one per parser of outside bytes (as swift-nio and swift-protobuf keep
/// theirs): a package of its own, built only with the fuzzer's flags (README.md in this folder).
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "ConveyorFuzzTesting",
    platforms: [.macOS(.v13)],
    dependencies: [.package(name: "Conveyor", path: "..")],
    targets: [
        // The root package's Tests/FuzzChecks (a symbolic link): the checks the test suite
        // replays the corpus through.
        .target(
            name: "ConveyorFuzzChecks",
            dependencies: [
                .product(name: "Conveyor", package: "Conveyor"), .product(name: "ConveyorTesting", package: "Conveyor"),
            ],
            path: "Sources/FuzzChecks", swiftSettings: strictSettings + [.define("CONVEYOR_FUZZING")]),
        .target(name: "FuzzDriver", dependencies: ["ConveyorFuzzChecks"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzHTTPDate", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzRetryAfter", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzCacheControl", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzVary", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzContentRange", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzContentType", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzCacheEntry", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzRedactor", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzEventStream", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzSetCookie", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzRedirect", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzFraming", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
        .executableTarget(name: "FuzzHar", dependencies: ["FuzzDriver"], swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)
