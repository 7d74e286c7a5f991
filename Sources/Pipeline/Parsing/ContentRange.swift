/// A `Content-Range` of a `206 Partial Content` (RFC 9110 §14.4): `bytes first-last/complete`,
/// where the complete length may be `*`. Read over bytes, total and linear; anything else
/// (another unit, `bytes */1234`, last before first, an overflowing number) is `nil`.
package struct ContentRange: Sendable, Hashable {
    /// The offset of the first byte the response holds.
    package var first: Int64
    /// The offset of the last byte the response holds (inclusive).
    package var last: Int64
    /// The representation's whole length, `nil` when the server sent `*`.
    package var completeLength: Int64?

    /// Reads a header value.
    package init?(_ value: String) {
        guard let parsed = Self.parse(HeaderBytes.trimmed(Array(value.utf8)[...])) else { return nil }
        self = parsed
    }

    private init(first: Int64, last: Int64, completeLength: Int64?) {
        self.first = first
        self.last = last
        self.completeLength = completeLength
    }

    private static func parse(_ b: ArraySlice<UInt8>) -> ContentRange? {
        guard b.count > 6, HeaderBytes.equalsIgnoringCase(b.prefix(6), "bytes "),
            let dash = b.firstIndex(of: UInt8(ascii: "-")), let slash = b.firstIndex(of: UInt8(ascii: "/")), dash < slash
        else { return nil }
        let cap = Int(Int64.max)
        guard let first = HeaderBytes.digits(HeaderBytes.trimmed(b[(b.startIndex + 6)..<dash]), cap: cap),
            let last = HeaderBytes.digits(b[(dash + 1)..<slash], cap: cap), first < cap, last < cap, first <= last
        else { return nil }
        let lengthBytes = b[(slash + 1)...]
        if lengthBytes.elementsEqual([UInt8(ascii: "*")]) {
            return ContentRange(first: Int64(first), last: Int64(last), completeLength: nil)
        }
        guard let length = HeaderBytes.digits(lengthBytes, cap: cap), length < cap, last < length else { return nil }
        return ContentRange(first: Int64(first), last: Int64(last), completeLength: Int64(length))
    }
}
