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

    /// Every block says in its first comment lines what the reader supplies: each name of the hidden
    /// prelude that it uses without declaring (pasted into an empty `main.swift`, a block that did
    /// not gave errors the reader could not explain).
    @Test func everyBlockSaysWhatTheReaderSupplies() throws {
        let prelude = try String(
            contentsOf: SnippetCompiler.root.appendingPathComponent("Tests/DocSnippets/Prelude.swift"), encoding: .utf8)
        let names = SuppliedNames.preludeNames(prelude)
        #expect(names.isSuperset(of: ["client", "keychain", "Movie", "api", "mock"]), "\(names.sorted())")
        let docs = SnippetCompiler.root.appendingPathComponent("Docs")
        let guides = try FileManager.default.contentsOfDirectory(atPath: docs.path).filter { $0.hasSuffix(".md") }
        var checked = 0
        for file in ["README.md"] + guides.sorted().map({ "Docs/\($0)" }) {
            let markdown = try String(contentsOf: SnippetCompiler.root.appendingPathComponent(file), encoding: .utf8)
            for snippet in SnippetExtractor.extract(markdown, file: file).snippets where snippet.skipReason == nil {
                checked += 1
                let missing = SuppliedNames.unannounced(in: snippet, preludeNames: names)
                if !missing.isEmpty {
                    Issue.record(
                        Comment(
                            rawValue: "\(file):\(snippet.line): this block uses \(missing.joined(separator: ", ")) without "
                                + "declaring it: name each in its first comment line (// You supply: …)"))
                }
            }
        }
        #expect(checked >= 20)
    }

    @Test func aBlockThatUsesAPreludeNameMustSaySo() {
        let names: Set<String> = ["client", "Movie", "keychain"]
        func check(_ code: String) -> [String] {
            SuppliedNames.unannounced(in: Snippet(file: "Page.md", line: 1, code: code), preludeNames: names)
        }
        #expect(check("let movies: [Movie] = try await client.get(\"/movies\")\n") == ["Movie", "client"])
        #expect(check("// You supply: client (your NetworkClient), Movie (your model)\nlet m: [Movie] = try await client.get(\"/m\")\n") == [])
        // Declared in the block, a member, a label, inside a string or a comment: not the prelude's.
        #expect(check("let client = NetworkClient(baseURL: url)\nlet x = GitHub.keychain\nf(keychain: 1)\nprint(\"Movie\") // Movie\n") == [])
        #expect(check("func load(client: NetworkClient) {}\n") == [])
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

    /// A guarantee is only as good as the test that proves it: every test a doc names in
    /// backticks (`SuiteTests` or `SuiteTests.testName`, in README.md, BENCHMARKS.md, Docs/, the
    /// DocC catalogs and the sources' doc comments) exists, the test in a file that declares or
    /// extends its suite, and every repository path a doc names in backticks exists. A name
    /// kept for history (a test removed with what it tested) is written without backticks.
    @Test func everyTestAndFileTheDocsNameExists() throws {
        let root = SnippetCompiler.root.standardizedFileURL
        let problems = try DocCitations.problems(in: root)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        #expect(try DocCitations.citations(in: root) >= 150)
    }

    /// The check finds a missing suite, a missing test, a test of another suite, a bare test name
    /// after a suite that has no such test, and a missing path.
    @Test func theCitationCheckSeesWhatIsMissing() throws {
        let tests = [
            "A.swift": "@Suite struct RealTests {\n    @Test func realTest() {}\n}",
            "B.swift": "extension RealTests {\n    @Test func extended() {}\n}",
            "C.swift": "struct OtherTests { func elsewhere() {} }",
        ]
        let text = """
            `RealTests` `RealTests.realTest` `RealTests.extended()` `GoneTests` `RealTests.gone`
            `RealTests.elsewhere` `Tests/Nowhere.swift` `Docs/Reliability.md`
            `RealTests.realTest`, `extendedInAnotherFile`, `extended`, `maximumRedirects`
            `RealTests.real…`, `.exten…`, `RealTests.unreal…`
            """
        let declarations = TestDeclarations(tests, sources: ["struct Options { var maximumRedirects: Int }"])
        let problems = DocCitations.problems(in: text, named: "Page.md", declarations: declarations) { $0 == "Docs/Reliability.md" }
        #expect(
            problems == [
                "Page.md names `GoneTests`, which no test file declares",
                "Page.md names `RealTests.gone`, which no file of RealTests declares",
                "Page.md names `RealTests.elsewhere`, which no file of RealTests declares",
                "Page.md names `extendedInAnotherFile` after `RealTests`, which neither a file of RealTests nor the sources declare",
                "Page.md names `RealTests.unreal…`, which no file of RealTests declares",
                "Page.md names `Tests/Nowhere.swift`, which is not in the repository",
            ])
    }
}

/// The tests and files the docs name, checked against the repository.
enum DocCitations {
    /// `SuiteTests`, `SuiteTests.test`, `SuiteTests.test()`, `SuiteTests.test(_:)` in backticks.
    /// A name cut short with `…` stands for every test it begins.
    static var test: Regex<(Substring, Substring, Substring?)> {
        #/`([A-Z][A-Za-z0-9_]*Tests)(?:\.([A-Za-z_][A-Za-z0-9_]*…?))?(?:\([A-Za-z0-9_:]*\))?`/#
    }
    /// A bare name in backticks that may be a test's: lowercase first, 16 characters or more.
    static var bare: Regex<(Substring, Substring)> { #/`\.?([a-z][A-Za-z0-9_]{15,}…?)(?:\([A-Za-z0-9_:]*\))?`/# }
    /// A path under one of the repository's top folders, in backticks.
    static var path: Regex<(Substring, Substring)> { #/`((?:Tests|Sources|Scripts|Benchmarks|Integrations|Examples|FuzzTesting|Docs|\.ci)/[A-Za-z0-9_./+-]*)`/# }

    /// Every Swift file under a `Tests` folder of the repository's packages, by path.
    static func testFiles(in root: URL) throws -> [String: String] {
        var files: [String: String] = [:]
        for folder in ["Tests", "Integrations/Tests"] + (try exampleTestFolders(in: root)) {
            let base = root.appendingPathComponent(folder)
            guard let walk = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { continue }
            for case let file as URL in walk where file.pathExtension == "swift" {
                files[file.path] = try String(contentsOf: file, encoding: .utf8)
            }
        }
        return files
    }

    static func exampleTestFolders(in root: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Examples").path)
            .map { "Examples/\($0)/Tests" }
    }

    /// The texts that name tests: the guides, the other READMEs, the DocC catalogs and the sources.
    static func documents(in root: URL) throws -> [(name: String, text: String)] {
        var names = ["README.md", "BENCHMARKS.md", "Examples/FirstHour/Peers/README.md", "Benchmarks/Peers/EventSource/PATCH.md"]
        names += try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "Docs/\($0)" }
        for folder in ["Sources", "Integrations/Sources"] {
            guard let walk = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path) else { continue }
            for case let file as String in walk where file.hasSuffix(".md") || file.hasSuffix(".swift") {
                names.append("\(folder)/\(file)")
            }
        }
        return try names.map { ($0, try String(contentsOf: root.appendingPathComponent($0), encoding: .utf8)) }
    }

    static func problems(in root: URL) throws -> [String] {
        let documents = try documents(in: root)
        let sources = documents.filter { $0.name.hasSuffix(".swift") }.map(\.text)
        let declarations = TestDeclarations(try testFiles(in: root), sources: sources)
        return documents.flatMap { document in
            problems(in: document.text, named: document.name, declarations: declarations) {
                FileManager.default.fileExists(atPath: root.appendingPathComponent($0).path)
            }
        }
    }

    static func citations(in root: URL) throws -> Int {
        try documents(in: root).reduce(0) { $0 + $1.text.matches(of: test).count }
    }

    /// Whether `functions` has `name`, or for `name…` a function that begins with `name`.
    static func declares(_ functions: Set<String>, _ name: String) -> Bool {
        guard name.hasSuffix("…") else { return functions.contains(name) }
        let prefix = name.dropLast()
        return functions.contains { $0.hasPrefix(prefix) }
    }

    /// What `text` (the document `name`) cites that `declarations` (the test suites and their
    /// tests) and `exists` (a repository path) do not have.
    static func problems(in text: String, named name: String, declarations: TestDeclarations, exists: (String) -> Bool) -> [String] {
        var problems: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) where line.contains("Tests") {
            let cited = line.matches(of: test)
            for match in cited {
                let suite = String(match.output.1)
                guard let holders = declarations.functionsBySuite[suite] else {
                    problems.append("\(name) names `\(suite)`, which no test file declares")
                    continue
                }
                if let test = match.output.2.map(String.init), !holders.contains(where: { Self.declares($0, test) }) {
                    problems.append("\(name) names `\(suite).\(test)`, which no file of \(suite) declares")
                }
            }
            // `Suite.first`, `second`: a bare name after a suite on the same line is that suite's
            // test, or a name the sources declare (a hook, a check, a property).
            for match in line.matches(of: bare) {
                guard let suite = cited.last(where: { $0.range.upperBound <= match.range.lowerBound })?.output.1,
                    let holders = declarations.functionsBySuite[String(suite)]
                else { continue }
                let test = String(match.output.1)
                if !holders.contains(where: { Self.declares($0, test) }) && !declarations.sourceNames.contains(test) {
                    problems.append("\(name) names `\(test)` after `\(suite)`, which neither a file of \(suite) nor the sources declare")
                }
            }
        }
        for match in text.matches(of: path) where !exists(String(match.output.1)) {
            problems.append("\(name) names `\(match.output.1)`, which is not in the repository")
        }
        return problems
    }
}

/// The types each test file declares or extends, and its functions, read once by words (a
/// keyword and the identifier after it), without a regular expression per file.
struct TestDeclarations {
    /// For each type name, the function names of every file that declares or extends it.
    var functionsBySuite: [String: [Set<String>]] = [:]
    /// The functions, cases and properties the library's sources declare.
    var sourceNames: Set<String> = []

    /// - Parameters:
    ///   - tests: The test files' contents.
    ///   - sources: The library's source files' contents.
    init(_ tests: [String: String], sources: [String] = []) {
        for text in tests.values {
            var types: [String] = []
            var functions: Set<String> = []
            Self.declarations(in: text) { keyword, name in
                switch keyword {
                case "struct", "class", "enum", "actor", "extension": types.append(name)
                case "func": functions.insert(name)
                default: break
                }
            }
            for type in types { functionsBySuite[type, default: []].append(functions) }
        }
        for text in sources {
            Self.declarations(in: text) { keyword, name in
                if ["func", "case", "var", "let"].contains(keyword) { sourceNames.insert(name) }
            }
        }
    }

    /// Calls `found` with each word and the word before it.
    private static func declarations(in text: String, _ found: (String, String) -> Void) {
        var previous = ""
        for word in text.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") }) {
            let word = String(word)
            found(previous, word)
            previous = word
        }
    }
}

