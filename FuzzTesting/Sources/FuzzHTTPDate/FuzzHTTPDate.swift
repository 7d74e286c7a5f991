import FuzzDriver

/// The libFuzzer target for the "http-date" check (FuzzTesting/README.md).
@main enum FuzzHTTPDate {
    static func main() { runFuzzer(check: "http-date") }
}
