import FuzzDriver

/// The libFuzzer target for the "content-type" check (FuzzTesting/README.md).
@main enum FuzzContentType {
    static func main() { runFuzzer(check: "content-type") }
}
