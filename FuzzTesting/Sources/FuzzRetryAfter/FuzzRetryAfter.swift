import FuzzDriver

/// The libFuzzer target for the "retry-after" check (FuzzTesting/README.md).
@main enum FuzzRetryAfter {
    static func main() { runFuzzer(check: "retry-after") }
}
