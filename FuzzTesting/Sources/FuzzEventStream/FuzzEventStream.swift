import FuzzDriver

/// The libFuzzer target for the "event-stream" check (FuzzTesting/README.md).
@main enum FuzzEventStream {
    static func main() { runFuzzer(check: "event-stream") }
}
