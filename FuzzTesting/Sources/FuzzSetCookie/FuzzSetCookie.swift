import FuzzDriver

/// The libFuzzer target for the "set-cookie" check (Docs/Reliability.md, "Fuzz targets").
@main enum FuzzSetCookie {
    static func main() { runFuzzer(check: "set-cookie") }
}
