// Extracts the ```swift blocks of the package's markdown files and type-checks each one with the
// toolchain's compiler against the package's built modules. Used by DocSnippetTests.
import Foundation

/// A ```swift block of a markdown file.
struct Snippet: Sendable, Equatable {
    /// The markdown file, relative to the package root.
    var file: String
    /// The line of the opening fence, 1-based: the block's first line is `line + 1`.
    var line: Int
    /// The block's text, without the fences and the fence's indentation.
    var code: String
    /// Modules the block is compiled with besides the prelude. Empty when the block has `import`
    /// lines: it is then compiled with exactly those. Otherwise it is a fragment of its page and
    /// gets the imports of the page's earlier blocks, or `Conveyor` when there are none.
    var implicitImports: [String] = []
    /// Why the block is not compiled, from `<!-- snippet: skip (reason) -->` on the line before it.
    var skipReason: String?
}

enum SnippetExtractor {
    /// The ```swift blocks of a markdown file, and what is wrong with its annotations and fences.
    static func extract(_ markdown: String, file: String) -> (snippets: [Snippet], problems: [String]) {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0.hasSuffix("\r") ? $0.dropLast() : $0)
        }
        var snippets: [Snippet] = []
        var problems: [String] = []
        var pageImports: [String] = []
        var index = 0
        while index < lines.count {
            let number = index + 1
            if let annotation = annotation(lines[index]) {
                let next = index + 1 < lines.count ? openingFence(lines[index + 1]) : nil
                if next?.language != "swift" {
                    problems.append("\(file):\(number): `\(annotation)` is not on the line before a ```swift block")
                }
                index += 1
                continue
            }
            guard let fence = openingFence(lines[index]) else {
                index += 1
                continue
            }
            var body: [String] = []
            index += 1
            while index < lines.count, !isClosing(lines[index], of: fence) {
                body.append(String(lines[index].dropFirst(min(fence.indent, leadingSpaces(lines[index])))))
                index += 1
            }
            if index == lines.count { problems.append("\(file):\(number): the code block is never closed") }
            index += 1
            guard fence.language == "swift" else { continue }

            var snippet = Snippet(file: file, line: number, code: body.map { $0 + "\n" }.joined())
            if number > 1, let annotation = annotation(lines[number - 2]) {
                if let reason = annotation.wholeMatch(of: /snippet:\s*skip\s*\((.*\S.*)\)/)?.1 {
                    snippet.skipReason = String(reason)
                } else {
                    problems.append(
                        "\(file):\(number - 1): unknown annotation `<!-- \(annotation) -->`; "
                            + "the only one is `<!-- snippet: skip (reason) -->`")
                }
            }
            let imports = body.compactMap { $0.firstMatch(of: /^\s*(?:@\w+\s+)*import\s+(\w+)/).map { String($0.1) } }
            if imports.isEmpty {
                snippet.implicitImports = pageImports.isEmpty ? ["Conveyor"] : pageImports
            } else if snippet.skipReason == nil {
                pageImports += imports.filter { !pageImports.contains($0) }
            }
            snippets.append(snippet)
        }
        return (snippets, problems)
    }

    /// The text of an HTML comment line that starts with `snippet`, e.g. `snippet: skip (why)`.
    private static func annotation(_ line: String) -> String? {
        guard let match = line.wholeMatch(of: /\s*<!--\s*(snippet.*?)\s*-->\s*/) else { return nil }
        return String(match.1)
    }

    private struct Fence {
        var marker: Character
        var length: Int
        var indent: Int
        var language: String
    }

    /// A line of three or more backticks or tildes, then an info string whose first word is the language.
    private static func openingFence(_ line: String) -> Fence? {
        let indent = leadingSpaces(line)
        let rest = line.dropFirst(indent)
        guard let marker = rest.first, marker == "`" || marker == "~" else { return nil }
        let length = rest.prefix { $0 == marker }.count
        let info = rest.dropFirst(length)
        guard length >= 3, marker == "~" || !info.contains("`") else { return nil }
        let language = info.split(separator: " ").first.map { $0.lowercased() } ?? ""
        return Fence(marker: marker, length: length, indent: indent, language: language)
    }

    private static func isClosing(_ line: String, of fence: Fence) -> Bool {
        let rest = line.drop { $0 == " " }
        let length = rest.prefix { $0 == fence.marker }.count
        return length >= fence.length && rest.dropFirst(length).allSatisfy(\.isWhitespace)
    }

    private static func leadingSpaces(_ line: String) -> Int { line.prefix { $0 == " " }.count }
}

/// Type-checks snippets with `swiftc -typecheck`, each as the `main.swift` of its own module (top-level
/// code allowed) that imports the prelude module and the snippet's implicit imports.
struct SnippetCompiler: Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let swiftc: URL
    let modules: URL
    /// Holds the prelude module and one folder per snippet.
    let directory: URL
    /// The frontend job the driver would run for a snippet (`swiftc -###`), with
    /// ``placeholder`` where the snippet's path goes: snippets are checked by running it directly,
    /// without starting the driver for each (a third of the time). `nil`: through the driver.
    var job: [String]? = nil

    /// The file name that stands for a snippet's `main.swift` in ``job``.
    static let placeholder = "/conveyor-snippet-placeholder/main.swift"

    /// The package's root directory.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The `Modules` folder of the build that produced this test bundle (`.build/<triple>/debug/Modules`,
    /// or the same under another `--scratch-path`).
    static let builtModules: URL? = {
        let starts = (CommandLine.arguments + Bundle.allBundles.map(\.bundlePath)).filter { $0.hasPrefix("/") }
        for start in starts {
            var directory = URL(fileURLWithPath: start)
            for _ in 0..<4 {
                directory.deleteLastPathComponent()
                let modules = directory.appendingPathComponent("Modules")
                if FileManager.default.fileExists(atPath: modules.appendingPathComponent("Conveyor.swiftmodule").path) {
                    return modules
                }
            }
        }
        return nil
    }()

    /// `$SWIFT_EXEC`, the `swiftc` of the toolchain this test runs on (Linux), or the first on `PATH`.
    static let toolchainSwiftc: URL? = {
        let environment = ProcessInfo.processInfo.environment
        var candidates = [environment["SWIFT_EXEC"]].compactMap { $0 }
        #if os(Linux)
            // <toolchain>/usr/lib/swift/linux/libswiftCore.so → <toolchain>/usr/bin/swiftc
            if let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8),
                let line = maps.split(separator: "\n").first(where: { $0.hasSuffix("/libswiftCore.so") }),
                let library = line.split(separator: " ").last
            {
                let usr = URL(fileURLWithPath: String(library)).deletingLastPathComponent().deletingLastPathComponent()
                    .deletingLastPathComponent().deletingLastPathComponent()
                candidates.append(usr.appendingPathComponent("bin/swiftc").path)
            }
        #endif
        candidates += (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/swiftc" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }.map(URL.init(fileURLWithPath:))
    }()

    /// Finds the compiler and the built modules, and compiles the prelude (none: only
    /// ``typeCheck(file:)`` can be used).
    static func make(prelude: URL? = root.appendingPathComponent("Tests/DocSnippets/Prelude.swift")) async throws
        -> SnippetCompiler
    {
        guard let modules = builtModules else {
            throw Failure(description: "no Modules folder with Conveyor.swiftmodule next to the test bundle")
        }
        guard let swiftc = toolchainSwiftc else { throw Failure(description: "no swiftc in $SWIFT_EXEC or $PATH") }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("doc-snippets-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var compiler = SnippetCompiler(swiftc: swiftc, modules: modules, directory: directory)
        guard let prelude else { return compiler }
        let (status, output) = try await compiler.run(
            [
                "-emit-module", "-parse-as-library", "-module-name", "DocSnippetPrelude", prelude.path,
                "-emit-module-path", directory.appendingPathComponent("DocSnippetPrelude.swiftmodule").path,
            ], log: directory.appendingPathComponent("prelude.log"))
        guard status == 0 else {
            compiler.remove()
            throw Failure(description: "\(prelude.path) does not compile:\n\(output)")
        }
        compiler.job = try await compiler.frontendJob()
        return compiler
    }

    /// The driver's arguments for a snippet at `main`, whose extra imports the caller adds.
    private func snippetArguments(main: String) -> [String] {
        ["-typecheck", "-module-name", "Snippet", "-I", directory.path, "-Xfrontend", "-import-module", "-Xfrontend", "DocSnippetPrelude", main]
    }

    /// The one frontend command `swiftc -###` prints for a snippet, split at spaces; `nil` when
    /// it prints anything else, or a path in it has a space (then the driver runs each time).
    private func frontendJob() async throws -> [String]? {
        let log = directory.appendingPathComponent("job.log")
        let (status, output) = try await run(["-###"] + snippetArguments(main: Self.placeholder), log: log)
        let lines = output.split(separator: "\n")
        guard status == 0, lines.count == 1, modules.path.firstIndex(of: " ") == nil,
            directory.path.firstIndex(of: " ") == nil
        else { return nil }
        let job = lines[0].split(separator: " ").map(String.init)
        guard job.count > 2, job[0].hasSuffix("/swift-frontend"), job[1] == "-frontend",
            job.filter({ $0 == Self.placeholder }).count == 1
        else { return nil }
        return job
    }

    /// `nil` when the snippet compiles, else the compiler's report, its `main.swift:<line>:` made the
    /// markdown file's `<file>:<line>:`.
    func check(_ snippet: Snippet, number: Int) async throws -> String? {
        let folder = directory.appendingPathComponent("\(number)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let main = folder.appendingPathComponent("main.swift")
        try snippet.code.write(to: main, atomically: true, encoding: .utf8)
        let log = folder.appendingPathComponent("log")
        let (status, output): (Int32, String)
        if let job {
            let imports = snippet.implicitImports.flatMap { ["-import-module", $0] }
            let arguments = job.dropFirst().map { $0 == Self.placeholder ? main.path : $0 } + imports
            (status, output) = try await Self.launch(URL(fileURLWithPath: job[0]), arguments, log: log)
        } else {
            let imports = snippet.implicitImports.flatMap { ["-Xfrontend", "-import-module", "-Xfrontend", $0] }
            (status, output) = try await run(imports + snippetArguments(main: main.path), log: log)
        }
        guard status != 0 else { return nil }
        guard !output.isEmpty else { return "swiftc exited with status \(status) and printed nothing" }
        return output.replacing(/(?:[^\s:]*\/)?main\.swift:(\d+):/) {
            "\(snippet.file):\(snippet.line + (Int($0.1) ?? 0)):"
        }
    }

    /// Checks the snippets, `width` at a time; the failures in the snippets' order.
    func check(_ snippets: [Snippet], width: Int = 2) async throws -> [(snippet: Snippet, report: String)] {
        try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            var next = 0
            func start() {
                guard next < snippets.count else { return }
                let number = next
                group.addTask { (number, try await check(snippets[number], number: number)) }
                next += 1
            }
            for _ in 0..<width { start() }
            var reports: [Int: String] = [:]
            while let (number, report) = try await group.next() {
                reports[number] = report
                start()
            }
            return reports.sorted { $0.key < $1.key }.map { (snippets[$0.key], $0.value) }
        }
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// Type-checks one standalone file (library code, no prelude) against the built modules.
    /// - Returns: `swiftc`'s exit status and its report, with the file's path shortened to its name.
    func typeCheck(file: URL) async throws -> (status: Int32, output: String) {
        let folder = directory.appendingPathComponent(file.deletingPathExtension().lastPathComponent)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let (status, output) = try await run(
            ["-typecheck", "-parse-as-library", "-module-name", "TypeChecked", file.path],
            log: folder.appendingPathComponent("log"))
        return (status, output.replacingOccurrences(of: file.path, with: file.lastPathComponent))
    }

    /// Runs `swiftc` in Swift 6 mode against the built modules; its output goes to `log`, never to a pipe
    /// that could fill up. It runs at a low priority (`nice`), so that it takes no CPU time from the
    /// suite's tests that measure durations.
    private func run(_ arguments: [String], log: URL) async throws -> (status: Int32, output: String) {
        var arguments = ["-swift-version", "6", "-diagnostic-style", "llvm", "-I", modules.path] + arguments
        let moduleCache = modules.deletingLastPathComponent().appendingPathComponent("ModuleCache")
        if FileManager.default.fileExists(atPath: moduleCache.path) {
            arguments += ["-module-cache-path", moduleCache.path]
        }
        return try await Self.launch(swiftc, arguments, log: log)
    }

    /// Runs `executable` with `arguments` (under `nice`, where there is one), its output to `log`.
    private static func launch(_ executable: URL, _ arguments: [String], log: URL) async throws -> (status: Int32, output: String) {
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
            throw Failure(description: "cannot create \(log.path)")
        }
        let output = try FileHandle(forWritingTo: log)
        defer { try? output.close() }
        let process = Process()
        let nice = URL(fileURLWithPath: "/usr/bin/nice")
        if FileManager.default.isExecutableFile(atPath: nice.path) {
            process.executableURL = nice
            process.arguments = ["-n", "10", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        process.standardOutput = output
        process.standardError = output
        let status = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<Int32, any Error>) in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        return (status, (try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }
}

/// A block that a reader copies must compile as pasted, or say in its first comment lines what the
/// reader supplies (`// You supply: client (your NetworkClient)`). The blocks are compiled with a
/// hidden prelude (Tests/DocSnippets/Prelude.swift) that the reader never sees: every name of it a
/// block uses without declaring must be named in the block's leading comment.
enum SuppliedNames {
    /// The names the prelude declares at the top level.
    static func preludeNames(_ prelude: String) -> Set<String> {
        var names: Set<String> = []
        for line in prelude.split(separator: "\n") {
            if let match = line.wholeMatch(of: /public (?:final )?(?:let|var|func|struct|enum|actor|class) (\w+).*/) {
                names.insert(String(match.1))
            }
        }
        return names
    }

    /// The prelude's names that `snippet` uses, does not declare, and does not name in its leading
    /// comment lines, sorted.
    static func unannounced(in snippet: Snippet, preludeNames: Set<String>) -> [String] {
        let lines = snippet.code.split(separator: "\n", omittingEmptySubsequences: false)
        let header = lines.prefix { $0.trimmingPrefix(while: \.isWhitespace).hasPrefix("//") }.joined(separator: "\n")
        // The code without comments and without the insides of string literals.
        var code = lines.filter { !$0.trimmingPrefix(while: \.isWhitespace).hasPrefix("//") }.joined(separator: "\n")
        code = code.replacing(/"[^"\n]*"/, with: "\"\"").replacing(/\/\/[^\n]*/, with: "")
        var declared: Set<String> = []
        for match in code.matches(of: /\b(?:let|var|func|struct|enum|class|actor|case|protocol|typealias)\s+(\w+)/) {
            declared.insert(String(match.1))
        }
        for match in code.matches(of: /[(,]\s*(\w+)\s*:/) { declared.insert(String(match.1)) }  // parameters
        var used: Set<String> = []
        // A name not after a dot (a member) and not before a colon (a label). `(?!\w)`, not `\b`:
        // Swift's default word boundaries are Unicode's, for which `client.get` is one word.
        for match in code.matches(of: /(?:^|[^.\w])([A-Za-z_]\w*)(?!\w)(?!\s*:)/) where preludeNames.contains(String(match.1)) {
            used.insert(String(match.1))
        }
        let headerWords = Set(header.matches(of: /\w+/).map { String($0.0) })
        return used.subtracting(declared).filter { !headerWords.contains($0) }.sorted()
    }
}
