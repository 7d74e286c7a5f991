import FuzzDriver

/// The libFuzzer target for the "vary" check (FuzzTesting/README.md).
@main enum FuzzVary {
    static func main() { runFuzzer(check: "vary") }
}
