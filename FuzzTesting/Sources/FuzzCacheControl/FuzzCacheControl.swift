import FuzzDriver

/// The libFuzzer target for the "cache-control" check (FuzzTesting/README.md).
@main enum FuzzCacheControl {
    static func main() { runFuzzer(check: "cache-control") }
}
