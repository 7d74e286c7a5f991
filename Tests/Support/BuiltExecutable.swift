public import Foundation

/// An executable the same `swift build` produced next to the running test binary (the child
/// processes of the conformance tests): found by walking up from the test binary's own path,
/// since the products directory is its parent on Linux and a few levels up inside an `.xctest`
/// bundle on macOS.
public enum BuiltExecutable {
    /// The executable `name` from the products directory, or `nil` when it was not built.
    public static func url(_ name: String) -> URL? {
        var candidates: [URL] = []
        #if os(Linux)
            if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
                candidates.append(URL(fileURLWithPath: path))
            }
        #endif
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL)
        candidates.append(Bundle.main.bundleURL)
        for start in candidates {
            var directory = start.deletingLastPathComponent()
            for _ in 0..<5 {
                let url = directory.appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: url.path) { return url }
                directory = directory.deletingLastPathComponent()
            }
        }
        return nil
    }
}
