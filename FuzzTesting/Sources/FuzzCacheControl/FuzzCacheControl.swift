import FuzzDriver

/// The libFuzzer target for the "cache-control" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzCacheControl {
    static func main() { runFuzzer(check: "cache-control") }
}
