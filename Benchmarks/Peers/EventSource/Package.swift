// swift-tools-version: 6.0
// mattt/EventSource 1.1.1 (Apache 2.0, LICENSE), copied for events-bench: its parser is the peer
// Conveyor's event-stream parser is measured against. One change (PATCH.md): the reconnecting
// client's body is compiled out where URLSession.bytes(for:) does not exist (Linux), so the
// package builds there; the parser and its AsyncSequence are the release's code, unchanged.
import PackageDescription

let package = Package(
    name: "EventSource",
    products: [.library(name: "EventSource", targets: ["EventSource"])],
    targets: [.target(name: "EventSource")]
)
