// Every ```swift block of README.md and Docs/*.md is type-checked as written, so a doc edit that
// breaks an example fails the tests. How blocks are compiled and annotated: Docs/Testing.md.
import Foundation
import Testing

/// On Linux the compiling tests always run (and fail if they find no compiler or no built modules);
/// elsewhere they are skipped when no `Modules` folder is found next to the test bundle.
private let canCompile: Bool = {
    #if os(Linux)
        true
    #else
        SnippetCompiler.builtModules != nil
    #endif
}()

@Suite struct DocSnippetTests {
    @Test(.enabled(if: canCompile, "no Modules folder next to the test bundle on this platform"))
    func everySwiftBlockOfTheDocsCompiles() async throws {
        let docs = SnippetCompiler.root.appendingPathComponent("Docs")
        let guides = try FileManager.default.contentsOfDirectory(atPath: docs.path).filter { $0.hasSuffix(".md") }
        let files = ["README.md"] + guides.sorted().map { "Docs/\($0)" }
        var snippets: [Snippet] = []
        for file in files {
            let markdown = try String(contentsOf: SnippetCompiler.root.appendingPathComponent(file), encoding: .utf8)
            let (found, problems) = SnippetExtractor.extract(markdown, file: file)
            for problem in problems { Issue.record(Comment(rawValue: problem)) }
            snippets += found
        }
        let compiled = snippets.filter { $0.skipReason == nil }
        // 22 today. A floor, so that an extractor that finds nothing cannot pass.
        #expect(compiled.count >= 20, "the extractor found only \(compiled.count) blocks to compile")

        let compiler = try await SnippetCompiler.make()
        defer { compiler.remove() }
        #if os(Linux)
            // Each block goes straight to the frontend, not through a driver started for each.
            #expect(compiler.job != nil, "swiftc -### did not print one frontend command")
        #endif
        for (snippet, report) in try await compiler.check(compiled) {
            Issue.record(
                Comment(rawValue: "\(snippet.file):\(snippet.line): this ```swift block does not compile:\n\(report)"))
        }
    }

    @Test(.enabled(if: canCompile, "no Modules folder next to the test bundle on this platform"))
    func aBrokenBlockIsReportedAtItsLineInTheMarkdown() async throws {
        // `import Conveyor` does not re-export Foundation, and the prelude re-exports nothing.
        let markdown = """
            Some text.

            ```swift
            import Conveyor

            let url = URL(string: "https://example.com")!
            ```

            ```swift
            let fine = HTTPMethod.get
            ```
            """
        let (snippets, problems) = SnippetExtractor.extract(markdown, file: "Broken.md")
        #expect(problems.isEmpty)
        let compiler = try await SnippetCompiler.make()
        defer { compiler.remove() }

        let failures = try await compiler.check(snippets)

        try #require(failures.count == 1, "\(failures)")
        #expect(failures[0].snippet.line == 3)
        #expect(
            failures[0].report.contains("Broken.md:6:11: error: cannot find 'URL' in scope"), "\(failures[0].report)")
    }

    @Test func extractsSwiftBlocksWithTheirLinesAnnotationsAndImports() {
        let markdown = """
            # Title

            ```sh
            swift test
            ```

            ```swift
            import ConveyorTesting
            let a = 1
            ```

            - In a list item, indented:

              ```Swift title="b.swift"
              let b = [
                  2,
              ]
              ```

            <!-- snippet: skip (a Package.swift fragment) -->
            ~~~swift
            .target(name: "C")
            ~~~

            ````swift
            let d = \"""
                ```
                \"""
            ````
            """
        let (snippets, problems) = SnippetExtractor.extract(markdown, file: "Guide.md")

        #expect(problems.isEmpty)
        #expect(snippets.map(\.line) == [7, 14, 21, 25])
        #expect(snippets[0].code == "import ConveyorTesting\nlet a = 1\n")
        #expect(snippets[0].implicitImports == [])
        #expect(snippets[1].code == "let b = [\n    2,\n]\n")
        #expect(snippets[1].implicitImports == ["ConveyorTesting"])
        #expect(snippets[2].skipReason == "a Package.swift fragment")
        #expect(snippets[3].code == "let d = \"\"\"\n    ```\n    \"\"\"\n")
        #expect(snippets.map(\.skipReason) == [nil, nil, "a Package.swift fragment", nil])

        let first = SnippetExtractor.extract("```swift\nlet a = 1\n```\n", file: "Page.md").snippets
        #expect(first.map(\.implicitImports) == [["Conveyor"]])
    }

    @Test func reportsUnknownOrMisplacedAnnotationsAndUnclosedBlocks() {
        let markdown = """
            <!-- snippet: no-check -->
            ```swift
            let a = 1
            ```

            <!-- snippet: skip (nothing follows) -->

            <!-- snippet: skip (a shell block) -->
            ```sh
            ls
            ```

            ```swift
            let b = 2
            """
        let (snippets, problems) = SnippetExtractor.extract(markdown, file: "Page.md")

        #expect(snippets.map(\.line) == [2, 13])
        #expect(
            problems == [
                "Page.md:1: unknown annotation `<!-- snippet: no-check -->`; the only one is `<!-- snippet: skip (reason) -->`",
                "Page.md:6: `snippet: skip (nothing follows)` is not on the line before a ```swift block",
                "Page.md:8: `snippet: skip (a shell block)` is not on the line before a ```swift block",
                "Page.md:13: the code block is never closed",
            ])
    }
}

/// The docs stand on their own: every relative link in README.md and Docs/*.md names a file of
/// the repository, and no doc cites a path outside it.
@Suite struct DocLinkTests {
    @Test func everyRelativeLinkPointsIntoTheRepository() throws {
        let root = SnippetCompiler.root
        let docs = root.appendingPathComponent("Docs")
        let guides = try FileManager.default.contentsOfDirectory(atPath: docs.path).filter { $0.hasSuffix(".md") }
        let files = ["README.md"] + guides.sorted().map { "Docs/\($0)" }
        let link = try Regex(#"\]\(([^)\s]+)\)"#)
        var checked = 0
        for file in files {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            let folder = root.appendingPathComponent(file).deletingLastPathComponent()
            for match in text.matches(of: link) {
                guard let target = match.output[1].substring.map(String.init) else { continue }
                if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("#")
                    || target.hasPrefix("mailto:")
                {
                    continue
                }
                let path = String(target.split(separator: "#", maxSplits: 1).first ?? "")
                let resolved = folder.appendingPathComponent(path).standardizedFileURL
                #expect(
                    resolved.path.hasPrefix(root.standardizedFileURL.path),
                    "\(file) links outside the repository: \(target)")
                #expect(FileManager.default.fileExists(atPath: resolved.path), "\(file) links to a missing file: \(target)")
                checked += 1
            }
        }
        #expect(checked >= 5, "found only \(checked) relative links")
    }
}
