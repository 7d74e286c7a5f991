import FuzzDriver

/// The libFuzzer target for the "redirect" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzRedirect {
    static func main() { runFuzzer(check: "redirect") }
}
