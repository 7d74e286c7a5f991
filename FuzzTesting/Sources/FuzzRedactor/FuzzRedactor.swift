import FuzzDriver

/// The libFuzzer target for the "redactor" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzRedactor {
    static func main() { runFuzzer(check: "redactor") }
}
