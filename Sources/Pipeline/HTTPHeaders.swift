import Foundation

/// An ordered list of HTTP header fields whose names compare case-insensitively.
///
/// `HTTPHeaders` keeps fields in the order they were added and allows a name to repeat,
/// like swift-http-types' `HTTPFields`. The subscript reads the first value for a name and
/// replaces every field of that name when set:
///
/// ```swift
/// var headers: HTTPHeaders = ["Accept": "application/json"]
/// headers["X-Request-ID"] = "42"
/// headers["accept"]          // "application/json"
/// headers.add(name: "Cache-Control", value: "no-cache")
/// ```
///
/// Its `description` redacts the values of credential headers (``SensitiveHeaders/standard``),
/// so printing a request or an error never reveals a token.
public struct HTTPHeaders: Sendable, Hashable, RandomAccessCollection, ExpressibleByDictionaryLiteral,
    CustomStringConvertible, CustomDebugStringConvertible
{
    /// One header field: a name and its value.
    public struct Field: Sendable, Hashable {
        /// The field name, with the case it was given.
        public var name: String
        /// The field value.
        public var value: String

        /// Creates a field.
        /// - Parameters:
        ///   - name: The field name.
        ///   - value: The field value.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    @usableFromInline var fields: [Field]

    /// Creates an empty header list.
    public init() { fields = [] }

    /// Creates a header list from fields, keeping their order.
    /// - Parameter fields: The fields.
    public init(_ fields: [Field]) { self.fields = fields }

    /// Creates a header list from a dictionary literal, keeping the literal's order.
    /// - Parameter elements: Name/value pairs.
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { Field(name: $0.0, value: $0.1) }
    }

    /// The position of the first field.
    public var startIndex: Int { fields.startIndex }
    /// The position after the last field.
    public var endIndex: Int { fields.endIndex }
    /// The field at a position.
    /// - Parameter position: A valid index.
    public subscript(position: Int) -> Field { fields[position] }

    /// The value of the first field with this name (case-insensitive), or `nil`.
    ///
    /// Setting a value replaces all fields with this name by one field at the position of the
    /// first; setting `nil` removes them all.
    /// - Parameter name: The field name, in any case.
    public subscript(name: String) -> String? {
        get {
            for field in fields where Self.namesEqual(field.name, name) { return field.value }
            return nil
        }
        set {
            guard let newValue else {
                remove(name: name)
                return
            }
            if let first = fields.firstIndex(where: { Self.namesEqual($0.name, name) }) {
                fields[first] = Field(name: fields[first].name, value: newValue)
                var index = fields.index(after: first)
                while index < fields.endIndex {
                    if Self.namesEqual(fields[index].name, name) {
                        fields.remove(at: index)
                    } else {
                        index += 1
                    }
                }
            } else {
                fields.append(Field(name: name, value: newValue))
            }
        }
    }

    /// All values for a name (case-insensitive), in order.
    /// - Parameter name: The field name.
    /// - Returns: The values; empty if there is none.
    public func values(for name: String) -> [String] {
        fields.lazy.filter { Self.namesEqual($0.name, name) }.map(\.value)
    }

    /// Whether a field with this name (case-insensitive) exists.
    /// - Parameter name: The field name.
    public func contains(_ name: String) -> Bool {
        fields.contains { Self.namesEqual($0.name, name) }
    }

    /// Appends a field, keeping fields of the same name that are already there.
    /// - Parameters:
    ///   - name: The field name.
    ///   - value: The field value.
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Removes every field with this name (case-insensitive).
    /// - Parameter name: The field name.
    public mutating func remove(name: String) {
        fields.removeAll { Self.namesEqual($0.name, name) }
    }

    /// Merges `other` into this list by the one merge rule for header names: **for each name,
    /// the fields of the last list that has the name win, all of them.**
    ///
    /// - A name only this list has keeps its fields where they are.
    /// - A name `other` has replaces every field of that name here by all of `other`'s fields of
    ///   that name, in `other`'s order, at the position of the first field it replaces (or at the
    ///   end). A name `other` repeats (`X-Dup: a`, `X-Dup: b`) stays repeated.
    /// - Names compare case-insensitively; the spelling of the winning fields is kept.
    ///
    /// The pipeline merges behaviors' ``HeaderAdding/additionalHeaders(for:context:)`` this
    /// way, outermost first, so an inner behavior wins; headers set on the request itself win
    /// over all of them by the same rule.
    /// - Parameter other: The fields that win.
    public mutating func merge(_ other: HTTPHeaders) {
        guard !other.isEmpty else { return }
        guard !fields.isEmpty else {
            fields = other.fields
            return
        }
        var result: [Field] = []
        result.reserveCapacity(fields.count + other.fields.count)
        for field in fields {
            guard other.contains(field.name) else {
                result.append(field)
                continue
            }
            // The first field of a replaced name: put all of other's fields of that name here.
            if !result.contains(where: { Self.namesEqual($0.name, field.name) }) {
                result.append(contentsOf: other.fields.filter { Self.namesEqual($0.name, field.name) })
            }
        }
        for field in other.fields where !contains(field.name) { result.append(field) }
        fields = result
    }

    /// Two header lists are equal when they hold the same fields in the same order, with names
    /// compared case-insensitively.
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        guard lhs.fields.count == rhs.fields.count else { return false }
        for (a, b) in zip(lhs.fields, rhs.fields) where a.value != b.value || !namesEqual(a.name, b.name) {
            return false
        }
        return true
    }

    /// Hashes the fields with lowercased names, consistent with `==`.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(fields.count)
        for field in fields {
            hasher.combine(field.name.lowercased())
            hasher.combine(field.value)
        }
    }

    /// The fields as `Name: value` lines, with credential values shown as `***`.
    public var description: String {
        fields.map { "\($0.name): \(Self.isSensitive($0.name) ? "***" : $0.value)" }.joined(separator: "\n")
    }

    /// Same as ``description``: credentials are redacted here too.
    public var debugDescription: String { "HTTPHeaders([\(fields.map { "\"\($0.name)\": \"\(Self.isSensitive($0.name) ? "***" : $0.value)\"" }.joined(separator: ", "))])" }

    /// The credential values these fields carry, as a server might echo them: each matching
    /// field's whole value, the credential after a scheme (`Bearer abc` → `abc`), and each
    /// cookie's value. Values shorter than 4 characters are left out.
    /// - Parameter isCredential: Which field names carry credentials; ``isSensitive(_:)`` by default.
    package func credentialValues(where isCredential: (String) -> Bool = HTTPHeaders.isSensitive) -> [String] {
        var values: [String] = []
        for field in self where isCredential(field.name) {
            values.append(field.value)
            var value = field.value
            let isASCII = value.withUTF8 { bytes in
                guard bytes.allSatisfy({ $0 < 0x80 }) else { return false }
                Self.appendCredentialParts(ofASCII: bytes, to: &values)
                return true
            }
            if isASCII { continue }
            let parts = field.value.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { values.append(String(parts[1])) }
            // `Basic base64(user:password)`: a server that echoes the password decoded must not
            // show it either.
            if parts.count == 2, parts[0].lowercased() == "basic",
                let decoded = Data(base64Encoded: String(parts[1].filter { $0 != " " })),
                let pair = String(validating: decoded, as: UTF8.self)
            {
                values.append(pair)
                if let colon = pair.firstIndex(of: ":") { values.append(String(pair[pair.index(after: colon)...])) }
            }
            for cookie in field.value.split(separator: ";") {
                if let value = cookie.split(separator: "=", maxSplits: 1).dropFirst().first {
                    values.append(String(value.drop { $0 == " " }))
                }
            }
        }
        // `count >= 4` in characters, reading at most four of them.
        return values.filter { !$0.dropFirst(3).isEmpty }
    }

    /// What ``credentialValues(where:)`` takes from an ASCII value, split over its bytes: the
    /// same pieces as its split over characters (in ASCII a character is a byte, or `\r\n`, which
    /// holds no separator), without the grapheme breaking that split costs.
    private static func appendCredentialParts(ofASCII bytes: UnsafeBufferPointer<UInt8>, to values: inout [String]) {
        func string(_ slice: Slice<UnsafeBufferPointer<UInt8>>) -> String { String(decoding: slice, as: UTF8.self) }
        let parts = bytes.split(separator: UInt8(ascii: " "), maxSplits: 1)
        if parts.count == 2 {
            values.append(string(parts[1]))
            // `Basic base64(user:password)`: a server that echoes the password decoded must not
            // show it either.
            if parts[0].count == 5, zip(parts[0], "basic".utf8).allSatisfy({ $0 | 0x20 == $1 }),
                let decoded = Data(base64Encoded: String(decoding: parts[1].filter { $0 != UInt8(ascii: " ") }, as: UTF8.self)),
                let pair = String(validating: decoded, as: UTF8.self)
            {
                values.append(pair)
                if let colon = pair.firstIndex(of: ":") { values.append(String(pair[pair.index(after: colon)...])) }
            }
        }
        for cookie in bytes.split(separator: UInt8(ascii: ";")) {
            if let value = cookie.split(separator: UInt8(ascii: "="), maxSplits: 1).dropFirst().first {
                values.append(string(value.drop { $0 == UInt8(ascii: " ") }))
            }
        }
    }

    /// Whether a header carries credentials and must never be printed: a built-in
    /// ``SensitiveHeaders`` name or one by meaning. Headers rendered on their own use this; a
    /// client's request is rendered with its client's names too (``HTTPRequest/sensitiveHeaders``).
    /// - Parameter name: The field name, in any case.
    package static func isSensitive(_ name: String) -> Bool { SensitiveHeaders.standard.contains(name) }

    /// The fields as `name: value` lines, with the value of every name `sensitive` contains
    /// shown as `***`.
    package func redactedLines(_ sensitive: SensitiveHeaders) -> [String] {
        fields.map { "\($0.name): \(sensitive.contains($0.name) ? "***" : $0.value)" }
    }

    /// ASCII case-insensitive comparison without allocating. Names of different lengths (most
    /// pairs) are told apart without reading them.
    @inlinable
    package static func namesEqual(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        // Native and small strings: their bytes in place (an iterator costs several times more).
        let inPlace = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                for index in 0..<x.count where x[index] != y[index] {
                    if folded(x[index]) != folded(y[index]) { return false }
                }
                return true
            }
        }
        if let inPlace, let equal = inPlace { return equal }
        return namesEqualIterating(a, b)
    }

    /// ``namesEqual(_:_:)`` through the strings' UTF-8 iterators, for strings whose bytes are not
    /// in contiguous storage (a bridged `NSString` on Apple platforms).
    @usableFromInline @inline(never)
    package static func namesEqualIterating(_ a: String, _ b: String) -> Bool {
        var a = a.utf8.makeIterator()
        var b = b.utf8.makeIterator()
        while true {
            switch (a.next(), b.next()) {
            case (nil, nil): return true
            case let (x?, y?): if x != y && folded(x) != folded(y) { return false }
            default: return false
            }
        }
    }

    /// An ASCII letter's lowercase byte; any other byte as it is.
    @inlinable @inline(__always)
    package static func folded(_ byte: UInt8) -> UInt8 { byte &- 65 < 26 ? byte | 0x20 : byte }
}

extension HTTPHeaders {
    /// Why a header cannot be sent.
    package enum ValidationFailure: Sendable, Hashable {
        /// The name is empty.
        case emptyName
        /// The name contains a character outside RFC 9110's token set (space, colon, CR, LF…).
        case invalidName
        /// The value contains CR, LF, NUL or another control character other than tab.
        case invalidValue
    }

    /// Checks a field before it is sent: a name must be a non-empty RFC 9110 token, a value must
    /// not contain CR, LF, NUL or other control characters (tab is allowed).
    /// - Returns: The first problem found, or `nil` when every field can be sent.
    package func firstInvalidField() -> (name: String, failure: ValidationFailure)? {
        for field in fields {
            if field.name.utf8.isEmpty { return (field.name, .emptyName) }
            if !Self.isToken(field.name) { return (field.name, .invalidName) }
            if !Self.isValidValue(field.value) { return (field.name, .invalidValue) }
        }
        return nil
    }

    // These run for every header of every attempt: they read a native string's bytes in place
    // (iterating its `UTF8View` costs several times more) and fall back to the view otherwise.

    package static func isToken(_ string: String) -> Bool {
        string.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes where !isTokenByte(byte) { return false }
            return true
        } ?? string.utf8.allSatisfy(isTokenByte)
    }

    package static func isValidValue(_ string: String) -> Bool {
        string.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes where !isValueByte(byte) { return false }
            return true
        } ?? string.utf8.allSatisfy(isValueByte)
    }

    /// Not CR, LF, NUL, DEL or another control character; tab is allowed.
    @inline(__always)
    private static func isValueByte(_ byte: UInt8) -> Bool {
        (byte >= 0x20 || byte == 0x09) && byte != 0x7F
    }

    /// RFC 9110 `tchar`: letters, digits and ``!#$%&'*+-.^_`|~``.
    @inline(__always)
    package static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
            UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "^"), UInt8(ascii: "`"),
            UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}

extension HTTPHeaders: CustomReflectable {
    /// A mirror that shows credential values as `***`, so `dump(headers)` reveals no secret.
    public var customMirror: Mirror {
        Mirror(
            self,
            unlabeledChildren: fields.map { "\($0.name): \(Self.isSensitive($0.name) ? "***" : $0.value)" },
            displayStyle: .collection)
    }
}
