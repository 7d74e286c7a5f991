import FuzzDriver

/// The libFuzzer target for the "content-range" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzContentRange {
    static func main() { runFuzzer(check: "content-range") }
}
