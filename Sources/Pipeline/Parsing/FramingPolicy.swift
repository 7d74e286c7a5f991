/// What a received response head must satisfy, checked once above every transport so that all
/// transports accept and refuse the same responses (contract rule 17):
///
/// - **One `Content-Length`** (RFC 9112 §6.3): a response with two `Content-Length` fields, or
///   one whose value is a list (`2, 9`, which is how FoundationNetworking hands over two
///   fields) or not a number, is refused, even when the values agree: AsyncHTTPClient's parser
///   refuses any duplicate, and agreeing with it is the point.
/// - **No CR, LF or NUL in a header name or value** (RFC 9112 §2.2, RFC 9110 §5.5): refused.
///   FoundationNetworking hands over a value with a bare CR; AsyncHTTPClient refuses it.
/// - **Header text that is not UTF-8 is refused**: FoundationNetworking fails such a response on
///   its own, AsyncHTTPClient hands it over with U+FFFD in place of the bytes, so a value with
///   U+FFFD is refused on every transport. Valid UTF-8 beyond ASCII (obs-text) is kept as it is,
///   on every transport.
///
/// A refusal is ``NetworkError/transportFailed(_:)`` with a ``MalformedResponse`` that names the
/// rule and the header, never its value.
package enum FramingPolicy {
    /// Checks the head of a response a transport received.
    @inline(__always)
    package static func check(_ headers: HTTPHeaders) throws(NetworkError) {
        var lengths = 0
        for field in headers {
            if HTTPHeaders.namesEqual(field.name, "Content-Length") {
                lengths += 1
                guard lengths == 1, field.value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), !field.value.isEmpty else {
                    throw .transportFailed(MalformedResponse(rule: .contentLength, header: "Content-Length"))
                }
            }
            if let rule = violation(in: field.name) ?? violation(in: field.value) {
                throw .transportFailed(MalformedResponse(rule: rule, header: MalformedResponse.safeName(field.name)))
            }
        }
    }

    @inline(__always)
    private static func violation(in text: String) -> MalformedResponse.Rule? {
        // Most heads hold nothing to look at twice: one pass over the bytes in place (a native or
        // small string; ~1 instruction per byte instead of an iterator's ~10) clears them.
        let suspicious = text.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.contains { $0 < 0x20 || $0 == 0xEF }
        }
        if suspicious == false { return nil }
        for byte in text.utf8 where byte < 0x20 || byte == 0xEF {
            switch byte {
            case 0x0D, 0x0A, 0x00: return .controlCharacter
            case 0xEF: if text.unicodeScalars.contains("\u{FFFD}") { return .notUTF8 }
            default: continue  // HTAB and other controls are the transports' business
            }
        }
        return nil
    }
}

/// A response whose head breaks the framing rules every transport is held to (see the
/// documentation of ``NetworkError/transportFailed(_:)`` and Docs/Reliability.md).
public struct MalformedResponse: Error, Hashable, Sendable, SafelyDescribable {
    /// The rule a response broke.
    public enum Rule: String, Sendable, Hashable {
        /// Two `Content-Length` fields, a list, or a value that is not a number.
        case contentLength = "more than one Content-Length, or one that is not a number"
        /// A CR, LF or NUL in a header name or value.
        case controlCharacter = "a CR, LF or NUL in a header"
        /// Header bytes that are not UTF-8.
        case notUTF8 = "header bytes that are not UTF-8"
    }

    /// The rule the response broke.
    public let rule: Rule
    /// The header's name (never its value); `?` when the name itself broke the rule.
    public let header: String

    package init(rule: Rule, header: String) {
        self.rule = rule
        self.header = header
    }

    /// `?` for a name that holds a control character or replaced bytes, the name otherwise.
    static func safeName(_ name: String) -> String {
        name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } ? name : "?"
    }

    /// `malformed response: a CR, LF or NUL in a header (X-Name)`.
    public var description: String { "malformed response: \(rule.rawValue) (\(header))" }
}
