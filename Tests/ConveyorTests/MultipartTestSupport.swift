// Test support for MultipartTests: a reader of multipart/form-data bodies that shares nothing with
// the encoder under test, a temporary folder, and a generator that repeats itself.
import Foundation

/// Reads a `multipart/form-data` body back into parts: RFC 7578 and the WHATWG escaping of names,
/// and nothing of the encoder under test.
enum MultipartReader {
    struct Part: Equatable {
        var name: String?
        var filename: String?
        var contentType: String?
        var content: Data

        /// What a reader gets back: a name or filename that itself contained `%22`, `%0D` or `%0A`
        /// reads back as `"`, CR or LF (the WHATWG escaping cannot tell them apart).
        var asReadBack: Part {
            Part(name: name.map(MultipartReader.unescaped), filename: filename.map(MultipartReader.unescaped), contentType: contentType, content: content)
        }
    }

    /// The parts, or `nil` when the body is not a well-formed form with this boundary.
    static func parse(_ body: Data, boundary: String) -> [Part]? {
        let bytes = [0x0D, 0x0A] + Array(body)
        let delimiter = Array("\r\n--\(boundary)".utf8)
        var sections: [ArraySlice<UInt8>] = []
        var rest = bytes[...]
        while let range = rest.firstRange(of: delimiter) {
            sections.append(rest[..<range.lowerBound])
            rest = rest[range.upperBound...]
        }
        sections.append(rest)
        // sections[0] is the (empty) preamble; the last starts with the closing "--".
        guard sections.count >= 2, sections[0].isEmpty, sections.last?.elementsEqual(Array("--\r\n".utf8)) == true else {
            return nil
        }
        var parts: [Part] = []
        for section in sections.dropFirst().dropLast() {
            guard section.starts(with: [0x0D, 0x0A]) else { return nil }
            let afterLine = section.dropFirst(2)
            guard let end = afterLine.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
            let head = String(decoding: afterLine[..<end.lowerBound], as: UTF8.self)
            var part = Part(content: Data(afterLine[end.upperBound...]))
            for line in head.split(separator: "\r\n", omittingEmptySubsequences: false) {
                guard let colon = line.firstIndex(of: ":") else { return nil }
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].drop { $0 == " " }
                if name == "content-type" { part.contentType = String(value) }
                guard name == "content-disposition" else { continue }
                guard value.hasPrefix("form-data") else { return nil }
                for match in value.matches(of: /;\s*([a-z]+)="([^"]*)"/) {
                    if match.1 == "name" { part.name = unescaped(String(match.2)) }
                    if match.1 == "filename" { part.filename = unescaped(String(match.2)) }
                }
            }
            parts.append(part)
        }
        return parts
    }

    static func unescaped(_ text: String) -> String {
        text.replacingOccurrences(of: "%22", with: "\"").replacingOccurrences(of: "%0D", with: "\r")
            .replacingOccurrences(of: "%0A", with: "\n")
    }
}

extension MultipartReader.Part {
    init(content: Data) { self.init(name: nil, filename: nil, contentType: nil, content: content) }
}

/// A generator that always gives the same number.
struct RepeatingGenerator: RandomNumberGenerator, Sendable {
    func next() -> UInt64 { 7 }
}

/// A folder of its own under the temporary directory.
struct TemporaryFolder {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-multipart-\(UUID())")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// Writes `data` to a file of the folder and returns its URL.
    func write(_ data: Data, to name: String) throws -> URL {
        let file = url.appendingPathComponent(name)
        try data.write(to: file)
        return file
    }

    /// Removes the folder and its files.
    func remove() { try? FileManager.default.removeItem(at: url) }
}
