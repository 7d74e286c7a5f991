import FuzzDriver

/// The libFuzzer target for the "cache-entry" check (FuzzTesting/README.md).
@main enum FuzzCacheEntry {
    static func main() { runFuzzer(check: "cache-entry") }
}
