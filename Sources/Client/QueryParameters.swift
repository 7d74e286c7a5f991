public import Foundation

/// A value that can stand in a query: strings, integers, floating-point numbers, `Bool`
/// (`true`/`false`), `UUID`, and optionals (`nil` adds nothing) and arrays (one item per
/// element) of them. A `RawRepresentable` type you conform (an enum with `String` or `Int` raw
/// values) is written as its raw value; any other type you conform, with `String(describing:)`.
///
/// ```swift
/// enum Sort: String, QueryParameterValue { case newest = "created_at", oldest = "created_at.asc" }
/// let query: QueryParameters = ["page": 2, "tag": ["a", "b"], "sort": Sort.newest]  // sort=created_at
/// ```
public protocol QueryParameterValue: Sendable {}

/// How Conveyor writes each value it knows; internal, so `String`, `Int`… get no public member.
protocol QueryValueRendering {
    var queryTexts: [String] { get }
}

extension String: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [self] } }
extension Substring: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [String(self)] } }
extension Int: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [String(self)] } }
extension Int64: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [String(self)] } }
extension Int32: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [String(self)] } }
extension UInt: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [String(self)] } }
extension UInt64: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [String(self)] } }
extension Double: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [String(self)] } }
extension Float: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [String(self)] } }
extension Bool: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [self ? "true" : "false"] } }
extension UUID: QueryParameterValue, QueryValueRendering { var queryTexts: [String] { [uuidString] } }
extension Optional: QueryParameterValue where Wrapped: QueryParameterValue {}
extension Optional: QueryValueRendering where Wrapped: QueryParameterValue {
    var queryTexts: [String] { self.map(queryTexts(of:)) ?? [] }
}
extension Array: QueryParameterValue where Element: QueryParameterValue {}
extension Array: QueryValueRendering where Element: QueryParameterValue {
    var queryTexts: [String] { flatMap(queryTexts(of:)) }
}

/// The texts a value adds to a query.
func queryTexts(of value: any QueryParameterValue) -> [String] {
    if let value = value as? any QueryValueRendering { return value.queryTexts }
    if let value = value as? any RawRepresentable, let texts = rawValueTexts(of: value) { return texts }
    return [String(describing: value)]
}

/// The texts of a raw value that can stand in a query itself.
private func rawValueTexts<Value: RawRepresentable>(of value: Value) -> [String]? {
    (value.rawValue as? any QueryParameterValue).map(queryTexts(of:))
}

/// Ordered query parameters (or form fields), written as a dictionary literal:
///
/// ```swift
/// let query: QueryParameters = ["q": "rock & roll", "page": 2, "tag": ["a", "b"], "debug": nil as Bool?]
/// query.encoded   // "q=rock%20%26%20roll&page=2&tag=a&tag=b"
/// ```
///
/// Names and values are percent-encoded strictly (everything but RFC 3986's unreserved
/// characters), so `+`, `&`, `=`, spaces and non-ASCII text arrive as written.
public struct QueryParameters: Sendable, Hashable, ExpressibleByDictionaryLiteral {
    /// One name/value pair.
    public struct Item: Sendable, Hashable {
        /// The parameter name.
        public var name: String
        /// The parameter value.
        public var value: String

        /// Creates a pair.
        /// - Parameters:
        ///   - name: The name.
        ///   - value: The value.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The pairs in order.
    public var items: [Item]

    /// Creates parameters from pairs.
    /// - Parameter items: The pairs in order.
    public init(_ items: [Item] = []) { self.items = items }

    /// Creates parameters from a dictionary literal, keeping its order.
    /// - Parameter elements: Names and values.
    public init(dictionaryLiteral elements: (String, any QueryParameterValue)...) {
        items = []
        for (name, value) in elements {
            for text in queryTexts(of: value) { items.append(Item(name: name, value: text)) }
        }
    }

    /// Whether there is no pair.
    public var isEmpty: Bool { items.isEmpty }

    /// Appends a parameter.
    /// - Parameters:
    ///   - name: The name.
    ///   - value: The value; `nil` adds nothing, an array adds one pair per element.
    public mutating func append(_ name: String, _ value: any QueryParameterValue) {
        for text in queryTexts(of: value) { items.append(Item(name: name, value: text)) }
    }

    /// The percent-encoded `name=value&…` form, as used in a URL query or a form body.
    public var encoded: String {
        var result = ""
        for (index, item) in items.enumerated() {
            if index > 0 { result.append("&") }
            result.append(Self.percentEncode(item.name))
            result.append("=")
            result.append(Self.percentEncode(item.value))
        }
        return result
    }

    /// Percent-encodes every byte outside RFC 3986's unreserved set (`A–Z a–z 0–9 - . _ ~`).
    static func percentEncode(_ string: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(string.utf8.count)
        for byte in string.utf8 {
            if isUnreserved(byte) {
                bytes.append(byte)
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }
}
