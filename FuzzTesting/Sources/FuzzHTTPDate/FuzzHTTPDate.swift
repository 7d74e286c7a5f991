import FuzzDriver

/// The libFuzzer target for the "http-date" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzHTTPDate {
    static func main() { runFuzzer(check: "http-date") }
}
