import FuzzDriver

/// The libFuzzer target for the "framing" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzFraming {
    static func main() { runFuzzer(check: "framing") }
}
