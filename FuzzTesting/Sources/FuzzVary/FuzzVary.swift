import FuzzDriver

/// The libFuzzer target for the "vary" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzVary {
    static func main() { runFuzzer(check: "vary") }
}
