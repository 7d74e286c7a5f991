import FuzzDriver

/// The libFuzzer target for the "har" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzHar {
    static func main() { runFuzzer(check: "har") }
}
