import FuzzDriver

/// The libFuzzer target for the "cache-entry" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzCacheEntry {
    static func main() { runFuzzer(check: "cache-entry") }
}
