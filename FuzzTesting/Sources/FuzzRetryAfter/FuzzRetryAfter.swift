import FuzzDriver

/// The libFuzzer target for the "retry-after" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzRetryAfter {
    static func main() { runFuzzer(check: "retry-after") }
}
