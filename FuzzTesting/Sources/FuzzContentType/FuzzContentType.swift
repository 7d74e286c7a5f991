import FuzzDriver

/// The libFuzzer target for the "content-type" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzContentType {
    static func main() { runFuzzer(check: "content-type") }
}
