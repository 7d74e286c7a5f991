import FuzzDriver

/// The libFuzzer target for the "content-range" check (FuzzTesting/README.md).
@main enum FuzzContentRange {
    static func main() { runFuzzer(check: "content-range") }
}
