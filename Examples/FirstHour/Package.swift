// swift-tools-version: 6.0
// The first hour of an app team with Conveyor, written only from README.md and Docs/: a movie
// API client (endpoints, headers, a token store with refresh, a spinner on a main-actor model,
// retries, logging, a per-request banner, a login that leaves auth out, a signing-and-timing
// behavior of its own) and the tests such a team writes. CI builds and tests it
// (`swift test --package-path Examples/FirstHour`).
import PackageDescription

let package = Package(
    name: "FirstHour",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [.library(name: "MovieKit", targets: ["MovieKit"])],
    dependencies: [.package(name: "Conveyor", path: "../..")],
    targets: [
        .target(name: "MovieKit", dependencies: [.product(name: "Conveyor", package: "Conveyor")]),
        .testTarget(
            name: "MovieKitTests",
            dependencies: ["MovieKit", .product(name: "ConveyorTesting", package: "Conveyor")]),
    ]
)
