import Foundation
import Testing

/// A behavior declares its hooks and an endpoint its own behaviors and exclusions, and the
/// compiler checks them: every near-miss in
/// `Tests/CompileFail/NearMisses.swift` must be a compile error, and the same hooks written
/// correctly (`Tests/CompileFail/Accepted.swift`) must compile. Both files are type-checked with
/// `swiftc` against the modules this test run was built with (the doc snippets' compiler).
@Suite struct NearMissCompileTests {
    static let folder = SnippetCompiler.root.appendingPathComponent("Tests/CompileFail")

    @Test func everyNearMissIsRefusedByTheCompiler() async throws {
        let file = Self.folder.appendingPathComponent("NearMisses.swift")
        let source = try String(contentsOf: file, encoding: .utf8)
        // Where each `struct Refused…` starts; an error on a line belongs to the last type started.
        var starts: [(line: Int, name: String)] = []
        for (index, line) in source.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.hasPrefix("struct Refused"), let name = line.dropFirst(7).split(separator: ":").first {
                starts.append((index + 1, String(name)))
            }
        }
        let declared = Set(starts.map(\.name))
        #expect(declared.count == 17)

        let compiler = try await SnippetCompiler.make(prelude: nil)
        defer { compiler.remove() }
        let (status, output) = try await compiler.typeCheck(file: file)
        #expect(status != 0, "NearMisses.swift compiled")
        var refused: Set<String> = []
        for line in output.split(separator: "\n") where line.hasPrefix("NearMisses.swift:") && line.contains(": error: ") {
            guard let number = Int(line.split(separator: ":")[1]) else { continue }
            if let owner = starts.last(where: { $0.line <= number }) { refused.insert(owner.name) }
        }
        #expect(refused == declared, "not refused: \(declared.subtracting(refused).sorted())\n\(output)")
        // A type that declares no hook is told what to do.
        #expect(output.contains("a behavior declares its hooks"))
    }

    @Test func theSameHooksWrittenCorrectlyCompile() async throws {
        let compiler = try await SnippetCompiler.make(prelude: nil)
        defer { compiler.remove() }
        let (status, output) = try await compiler.typeCheck(file: Self.folder.appendingPathComponent("Accepted.swift"))
        #expect(status == 0, "\(output)")
    }
}
