import FuzzDriver

/// The libFuzzer target for the "event-stream" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzEventStream {
    static func main() { runFuzzer(check: "event-stream") }
}
