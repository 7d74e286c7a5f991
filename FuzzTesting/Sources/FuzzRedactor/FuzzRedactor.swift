import FuzzDriver

/// The libFuzzer target for the "redactor" check (FuzzTesting/README.md).
@main enum FuzzRedactor {
    static func main() { runFuzzer(check: "redactor") }
}
