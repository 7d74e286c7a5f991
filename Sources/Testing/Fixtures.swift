public import Foundation

/// Loads test fixtures (canned response bodies) from a test target's resources.
///
/// Add the files to your test target (`resources: [.copy("Fixtures")]` in `Package.swift`), then:
///
/// ```swift
/// let body = try Fixture.data("movies.json", in: .module)
/// mock.stub(.get, "/movies", reply: try .fixture("movies.json", in: .module))
/// ```
public enum Fixture {
    /// A fixture that could not be loaded.
    public struct NotFound: Error, Hashable, SafelyDescribable {
        /// The name asked for.
        public let name: String
        /// Where it was looked for.
        public let searchedPaths: [String]
        /// Explains what was missing and where it was looked for.
        public var description: String {
            "fixture '\(name)' not found; looked in: \(searchedPaths.joined(separator: ", "))"
        }
    }

    /// The bytes of a fixture file.
    /// - Parameters:
    ///   - name: The file name with its extension, e.g. `movies.json`, optionally in a folder
    ///     (`Fixtures/movies.json`).
    ///   - bundle: The bundle that holds it, usually `.module` of the test target.
    /// - Returns: The file's bytes.
    /// - Throws: ``NotFound`` naming the paths searched.
    public static func data(_ name: String, in bundle: Bundle) throws -> Data {
        let base = bundle.resourceURL ?? bundle.bundleURL
        let candidates = [name, "Fixtures/\(name)", "Resources/\(name)"].map { base.appendingPathComponent($0) }
        for url in candidates {
            if let data = try? Data(contentsOf: url) { return data }
        }
        throw NotFound(name: name, searchedPaths: candidates.map(\.path))
    }
}

extension MockTransport.Reply {
    /// A response whose body is a fixture file.
    /// - Parameters:
    ///   - name: The fixture file name, e.g. `movies.json`.
    ///   - bundle: The bundle that holds it.
    ///   - status: The status code; 200 by default.
    ///   - headers: The header fields; `Content-Type: application/json` for `.json` files when absent.
    /// - Throws: ``Fixture/NotFound``.
    public static func fixture(
        _ name: String, in bundle: Bundle, status: Int = 200, headers: HTTPHeaders = [:]
    ) throws -> MockTransport.Reply {
        var headers = headers
        if name.hasSuffix(".json") && !headers.contains("Content-Type") {
            headers.add(name: "Content-Type", value: "application/json")
        }
        return .response(status: status, headers: headers, body: try Fixture.data(name, in: bundle))
    }
}
