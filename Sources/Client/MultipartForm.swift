public import Foundation

/// A `multipart/form-data` body (RFC 7578): text fields and files, in order, as a browser sends a
/// form. Send it with ``RequestBody/multipart(_:)``.
///
/// ```swift
/// var form = MultipartForm()
/// form.append("Heat", name: "title")
/// form.append(file: posterURL, name: "poster")          // filename poster.png, image/png
/// form.append(notes, name: "notes", filename: "notes.json", contentType: "application/json")
/// try await client.send(Request<Void>(method: .post, path: "/movies", body: .multipart(form)))
/// ```
///
/// Files are read from disk while the request is sent, never loaded whole, and read again on a
/// retry. Every part's size is known when the body is built, so the request has a
/// `Content-Length`.
///
/// ### Names and filenames
///
/// They are written in quotes the way browsers write them (the WHATWG form encoding): `"`
/// becomes `%22`, CR `%0D` and LF `%0A`, so no name can end its header early. Every other
/// character, non-ASCII included, is sent as UTF-8 (RFC 7578 §5.1.1). As with browsers, a name
/// that itself contains the text `%22` reads back as `"` on a server that undoes the escaping.
///
/// ### The boundary
///
/// By default the boundary is `conveyor-` followed by 32 random hexadecimal digits: 128 bits
/// from `SystemRandomNumberGenerator`. The parts held in memory (text fields, `Data`, names,
/// filenames and content types) are checked as they are appended: when one contains the
/// delimiter (`--` and the boundary), another random boundary is chosen, so read ``boundary`` or
/// ``contentType`` after the last `append`. File contents are not read ahead of sending and are
/// not checked; with 128 random bits a collision is negligible.
///
/// A boundary you pass to ``init(boundary:)`` is never changed: building the body fails with
/// ``NetworkError/invalidRequest(_:)`` when it is not a valid RFC 2046 boundary or occurs in a
/// part held in memory.
public struct MultipartForm: Sendable {
    /// One part of the form.
    struct Part: Sendable {
        var name: String
        var filename: String?
        var contentType: String?
        var content: Content
    }

    /// Where a part's content is.
    enum Content: Sendable {
        case bytes(Data)
        case file(URL)
    }

    /// The parts, in order.
    private(set) var parts: [Part] = []

    /// The boundary between the parts, without the leading `--`.
    ///
    /// A random boundary may change when a part appended later contains it; read it after the
    /// last `append`.
    public private(set) var boundary: String

    /// Whether ``boundary`` is the caller's (checked, never changed) or random (changed on a
    /// collision).
    private let boundaryIsCallers: Bool
    /// Where random boundaries come from.
    private var random: any RandomNumberGenerator & Sendable
    /// Set when no random boundary free of the in-memory parts was found: only a generator that
    /// repeats itself gets here.
    private var boundaryProblem: String?

    /// A form with no parts.
    /// - Parameter boundary: The boundary between the parts, or `nil` (the default) for a random
    ///   one. A given boundary must be 1 to 70 characters of RFC 2046's set (letters, digits and
    ///   `'()+_,-./:=?` and space) and not end with a space; otherwise building the body fails
    ///   with ``NetworkError/invalidRequest(_:)``.
    public init(boundary: String? = nil) {
        self.init(boundary: boundary, using: SystemRandomNumberGenerator())
    }

    /// A form whose random boundaries come from `generator` (for tests).
    init(boundary: String?, using generator: some RandomNumberGenerator & Sendable) {
        random = generator
        boundaryIsCallers = boundary != nil
        self.boundary = boundary ?? ""
        if boundary == nil { self.boundary = Self.randomBoundary(using: &random) }
    }

    /// The request's `Content-Type`: `multipart/form-data; boundary=…`, the boundary in quotes
    /// when it contains characters that a header parameter must quote.
    public var contentType: String {
        let plain = boundary.utf8.allSatisfy { Self.unquotedBoundaryBytes.contains($0) }
        return plain ? "multipart/form-data; boundary=\(boundary)" : "multipart/form-data; boundary=\"\(boundary)\""
    }

    /// Appends a text field, sent as UTF-8 with no filename and no content type (as a browser
    /// sends an `<input type="text">`).
    /// - Parameters:
    ///   - value: The text.
    ///   - name: The field's name.
    public mutating func append(_ value: String, name: String) {
        append(Part(name: name, filename: nil, contentType: nil, content: .bytes(Data(value.utf8))))
    }

    /// Appends bytes held in memory.
    /// - Parameters:
    ///   - data: The bytes.
    ///   - name: The field's name.
    ///   - filename: The filename to send, or `nil` for a plain field.
    ///   - contentType: The part's content type. When `nil` and there is a filename, it is
    ///     guessed from the filename's extension (`application/octet-stream` when unknown); when
    ///     `nil` and there is no filename, the part has no `Content-Type`. Must not contain CR, LF
    ///     or NUL: building the body fails with ``NetworkError/invalidRequest(_:)`` otherwise.
    public mutating func append(_ data: Data, name: String, filename: String? = nil, contentType: String? = nil) {
        let type = contentType ?? filename.map(Self.contentType(forFilename:))
        append(Part(name: name, filename: filename, contentType: type, content: .bytes(data)))
    }

    /// Appends a file, read from disk while the request is sent (never loaded whole).
    ///
    /// The file must exist when the body is built: a missing file, or one that is not a regular
    /// file, fails the request with ``NetworkError/fileFailed(file:underlying:)`` before
    /// anything is sent. Its content is not searched for the boundary (see ``MultipartForm``).
    /// - Parameters:
    ///   - url: A `file:` URL.
    ///   - name: The field's name.
    ///   - filename: The filename to send; `nil` (the default) sends the URL's last path component.
    ///   - contentType: The part's content type; `nil` (the default) guesses it from the
    ///     filename's extension (png, jpg, jpeg, gif, pdf, json, txt, mp4, zip), else
    ///     `application/octet-stream`. Must not contain CR, LF or NUL.
    public mutating func append(file url: URL, name: String, filename: String? = nil, contentType: String? = nil) {
        let filename = filename ?? url.lastPathComponent
        let type = contentType ?? Self.contentType(forFilename: filename)
        append(Part(name: name, filename: filename, contentType: type, content: .file(url)))
    }

    /// Builds the body: each part's headers and in-memory content as bytes, each file as a file
    /// read while the body is sent, and the closing delimiter. Its length is known.
    /// - Returns: The body, read again from the start for every attempt.
    /// - Throws: ``NetworkError/invalidRequest(_:)`` for an invalid boundary of yours, one that
    ///   occurs in a part held in memory, or a content type with CR, LF or NUL;
    ///   ``NetworkError/fileFailed(file:underlying:)`` for a missing file or one that is not a
    ///   regular file.
    public func bodyStream() throws(NetworkError) -> HTTPBodyStream {
        try HTTPBodyStream(parts: streamParts())
    }

    /// The pieces of the body, in order: headers (and the CRLFs around them) as bytes, contents
    /// as bytes or files.
    func streamParts() throws(NetworkError) -> [HTTPBodyStream.Part] {
        if let boundaryProblem { throw .invalidRequest(boundaryProblem) }
        if boundaryIsCallers, let problem = Self.problem(withBoundary: boundary) {
            throw .invalidRequest("the multipart boundary is not valid: \(problem)")
        }
        let delimiter = Array("--\(boundary)".utf8)
        var pieces: [HTTPBodyStream.Part] = []
        pieces.reserveCapacity(parts.count * 2 + 1)
        for (index, part) in parts.enumerated() {
            if let type = part.contentType, type.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) {
                throw .invalidRequest("the content type of multipart part \(index + 1) contains CR, LF or NUL")
            }
            // A random boundary was already checked (and changed if needed) by `append`.
            if boundaryIsCallers, Self.collides(part, delimiter: delimiter) {
                throw .invalidRequest(
                    "multipart part \(index + 1) contains the boundary you chose; choose another or pass none")
            }
            let opening = index == 0 ? "--\(boundary)\r\n" : "\r\n--\(boundary)\r\n"
            pieces.append(.data(Data((opening + Self.headers(of: part)).utf8)))
            switch part.content {
            case .bytes(let data): pieces.append(.data(data))
            case .file(let url): pieces.append(.file(url))
            }
        }
        pieces.append(.data(Data((parts.isEmpty ? "--\(boundary)--\r\n" : "\r\n--\(boundary)--\r\n").utf8)))
        return pieces
    }

    /// Appends a part, choosing another random boundary when it contains the current one.
    private mutating func append(_ part: Part) {
        parts.append(part)
        guard !boundaryIsCallers, Self.collides(part, delimiter: Array("--\(boundary)".utf8)) else { return }
        for _ in 0..<16 {
            boundary = Self.randomBoundary(using: &random)
            let delimiter = Array("--\(boundary)".utf8)
            if !parts.contains(where: { Self.collides($0, delimiter: delimiter) }) { return }
        }
        boundaryProblem = "no random multipart boundary was found that occurs in none of the parts"
    }

    /// The part's header lines and the empty line after them.
    static func headers(of part: Part) -> String {
        var text = "Content-Disposition: form-data; name=\"\(escaped(part.name))\""
        if let filename = part.filename { text += "; filename=\"\(escaped(filename))\"" }
        text += "\r\n"
        if let type = part.contentType { text += "Content-Type: \(type)\r\n" }
        return text + "\r\n"
    }

    /// A name or filename as it goes between quotes: `"` → `%22`, CR → `%0D`, LF → `%0A`.
    static func escaped(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x22 || $0 == 0x0D || $0 == 0x0A }) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "%22"
            case "\r": result += "%0D"
            case "\n": result += "%0A"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Whether the part's headers or in-memory content contain `delimiter`.
    static func collides(_ part: Part, delimiter: [UInt8]) -> Bool {
        if contains(delimiter, in: Data(headers(of: part).utf8)) { return true }
        if case .bytes(let data) = part.content { return contains(delimiter, in: data) }
        return false
    }

    /// Whether `needle` (not empty) occurs in `data`.
    static func contains(_ needle: [UInt8], in data: Data) -> Bool {
        guard let first = needle.first, data.count >= needle.count else { return false }
        return data.withUnsafeBytes { bytes in
            var start = 0
            let last = bytes.count - needle.count
            while start <= last {
                if bytes[start] == first {
                    var matched = 1
                    while matched < needle.count, bytes[start + matched] == needle[matched] { matched += 1 }
                    if matched == needle.count { return true }
                }
                start += 1
            }
            return false
        }
    }

    /// `conveyor-` and 32 hexadecimal digits (128 random bits).
    static func randomBoundary(using generator: inout any RandomNumberGenerator & Sendable) -> String {
        let digits = [generator.next(), generator.next()].map { value in
            let hex = String(value, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }
        return "conveyor-" + digits.joined()
    }

    /// Why `boundary` is not a valid RFC 2046 boundary, or `nil` when it is.
    static func problem(withBoundary boundary: String) -> String? {
        let bytes = Array(boundary.utf8)
        guard (1...70).contains(bytes.count) else {
            return "it is \(bytes.count) bytes long; RFC 2046 allows 1 to 70"
        }
        guard bytes.allSatisfy({ boundaryBytes.contains($0) }) else {
            return "it has a character outside RFC 2046's set (letters, digits, '()+_,-./:=? and space)"
        }
        if bytes.last == 0x20 { return "it ends with a space" }
        return nil
    }

    /// RFC 2046's `bchars`.
    static let boundaryBytes: Set<UInt8> = unquotedBoundaryBytes.union("(),/:=? ".utf8)
    /// The `bchars` that need no quotes in a header parameter (RFC 2045's token characters).
    static let unquotedBoundaryBytes: Set<UInt8> = Set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'+_-.".utf8)

    /// A content type for a filename's extension; `application/octet-stream` when unknown.
    static func contentType(forFilename filename: String) -> String {
        guard let dot = filename.lastIndex(of: ".") else { return "application/octet-stream" }
        switch filename[filename.index(after: dot)...].lowercased() {
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "pdf": return "application/pdf"
        case "json": return "application/json"
        case "txt": return "text/plain"
        case "mp4": return "video/mp4"
        case "zip": return "application/zip"
        default: return "application/octet-stream"
        }
    }
}

extension MultipartForm: CustomStringConvertible, CustomReflectable {
    /// The parts' names and sizes, never their contents: `multipart form (2 parts: "title"
    /// 4 bytes, "poster" file)`.
    public var description: String {
        let list = parts.map { part -> String in
            switch part.content {
            case .bytes(let data): "\"\(Self.escaped(part.name))\" \(data.count) bytes"
            case .file: "\"\(Self.escaped(part.name))\" file"
            }
        }
        return "multipart form (\(parts.count) part\(parts.count == 1 ? "" : "s")\(list.isEmpty ? "" : ": ")\(list.joined(separator: ", ")))"
    }

    /// The description only, so `dump` and debuggers show no field's value.
    public var customMirror: Mirror { Mirror(self, children: ["description": description], displayStyle: .struct) }
}
