import Foundation

/// Finds every known secret in a text, in every encoding a server may echo it in, and masks it:
/// in time linear in the text and in the secrets' total length, over bytes.
///
/// What it masks: each encoding of a secret (a *variant*, see ``variants(of:)``) of 4 to 7 bytes
/// wherever it occurs whole, and every run of 8 bytes that occurs in any variant (a server may
/// echo a secret cut short). Each 8-byte window is one `UInt64`, so one pass over the text with a
/// set lookup per byte finds them all. Masked runs are widened to whole UTF-8 characters and
/// each run becomes one mask.
///
/// The mask is `***` unless a secret contains `*`: then it is three of the first byte in
/// `*#~^|!` that no secret contains, so a mask can never be read as (part of) a secret. Every
/// occurrence of a secret in the output would have to overlap a mask; a mask holds a byte no
/// secret holds; so none is left.
package struct SecretScrubber: Sendable {
    /// Each secret in every encoding, longest first.
    let variants: [[UInt8]]
    /// The mask, three bytes.
    let mask: [UInt8]
    /// The 8-byte windows of every variant of 8 bytes or more.
    private let windows: Set<UInt64>
    /// The variants of 4 to 7 bytes, by length (index 0 is length 4).
    private let short: [Set<UInt64>]

    /// A scrubber for these secrets (those shorter than 4 bytes are ignored).
    package init(secrets: [String]) {
        let variants = Self.variants(of: secrets)
        self.variants = variants
        var windows: Set<UInt64> = []
        var short: [Set<UInt64>] = Array(repeating: [], count: 4)
        var present = [Bool](repeating: false, count: 256)
        for variant in variants {
            for byte in variant { present[Int(byte)] = true }
            if variant.count >= 8 {
                var key: UInt64 = 0
                for (index, byte) in variant.enumerated() {
                    key = key << 8 | UInt64(byte)
                    if index >= 7 { windows.insert(key) }
                }
            } else if variant.count >= 4 {
                short[variant.count - 4].insert(variant.reduce(0) { $0 << 8 | UInt64($1) })
            }
        }
        self.windows = windows
        self.short = short
        let candidates = Array("*#~^|!".utf8) + Array(0x21...0x7E)
        if let free = candidates.first(where: { !present[Int($0)] }) {
            mask = [free, free, free]
        } else {
            mask = []  // every printable byte is in a secret: masked runs are dropped
        }
    }

    /// Whether there is anything to look for.
    package var isEmpty: Bool { variants.isEmpty }

    /// `text` with every secret masked.
    package func scrub(_ text: [UInt8]) -> [UInt8] {
        guard !variants.isEmpty, !text.isEmpty else { return text }
        let covered = coverage(of: text)
        guard covered.contains(true) else { return text }
        var output: [UInt8] = []
        output.reserveCapacity(text.count)
        var index = 0
        while index < text.count {
            if covered[index] {
                output.append(contentsOf: mask)
                while index < text.count, covered[index] { index += 1 }
            } else {
                output.append(text[index])
                index += 1
            }
        }
        return output
    }

    /// Which bytes of `text` belong to an occurrence of a secret, widened to whole UTF-8
    /// characters.
    private func coverage(of text: [UInt8]) -> [Bool] {
        var covered = [Bool](repeating: false, count: text.count)
        var key: UInt64 = 0
        for (index, byte) in text.enumerated() {
            key = key << 8 | UInt64(byte)
            let end = index + 1
            var length = 0
            if end >= 8, windows.contains(key) { length = 8 }
            if length == 0 {
                for k in stride(from: 7, through: 4, by: -1) where end >= k {
                    let mask: UInt64 = (1 << UInt64(8 * k)) - 1
                    if short[k - 4].contains(key & mask) {
                        length = k
                        break
                    }
                }
            }
            guard length > 0 else { continue }
            var start = end - length
            while start > 0, text[start] & 0xC0 == 0x80 { start -= 1 }
            var stop = end
            while stop < text.count, text[stop] & 0xC0 == 0x80 { stop += 1 }
            // At most 14 bytes (8, widened by up to 3 on each side) per byte of text: linear.
            for position in start..<stop { covered[position] = true }
        }
        return covered
    }

    /// The length of the longest suffix of `text` (4 bytes or more, shorter than the variant) that
    /// begins some variant: what is left of a secret that a cut at the end of `text` split.
    /// Linear: a prefix-function pass per variant over at most its length of `text`.
    func cutSecretLength(atEndOf text: [UInt8]) -> Int {
        var longest = 0
        for variant in variants where variant.count > 4 {
            let tail = text.suffix(variant.count - 1)
            // Knuth–Morris–Pratt: after reading the tail, `state` is the longest prefix of the
            // variant that ends the tail.
            var failure = [Int](repeating: 0, count: variant.count)
            var k = 0
            for i in 1..<variant.count {
                while k > 0, variant[i] != variant[k] { k = failure[k - 1] }
                if variant[i] == variant[k] { k += 1 }
                failure[i] = k
            }
            var state = 0
            for byte in tail {
                while state > 0, byte != variant[state] { state = failure[state - 1] }
                if byte == variant[state] { state += 1 }
                if state == variant.count { state = failure[state - 1] }
            }
            if state >= 4 { longest = max(longest, state) }
        }
        return longest
    }

    // MARK: - Encodings

    /// Each secret as a server may echo it: as sent, percent-encoded (upper- and lowercase hex,
    /// strictly or as a URL query or path allows) or form-encoded, and each of those as a JSON
    /// string carries it, once or twice (with `/` as it is or as `\/`, control characters and,
    /// for a secret with non-ASCII text, every non-ASCII character as `\uXXXX`). Longest first.
    static func variants(of secrets: [String]) -> [[UInt8]] {
        var variants: Set<[UInt8]> = []
        for secret in secrets {
            let bytes = Array(secret.utf8)
            guard bytes.count >= 4 else { continue }
            var forms: Set<[UInt8]> = [bytes]
            for allowed in [isUnreserved, isQueryAllowed, isPathAllowed] as [(UInt8) -> Bool] {
                let upper = percentEncoded(bytes, allowed: allowed, upper: true)
                forms.insert(upper)
                forms.insert(percentEncoded(bytes, allowed: allowed, upper: false))
                forms.insert(replacing(upper, Array("%20".utf8), with: [UInt8(ascii: "+")]))
            }
            // A server may echo a secret base64-encoded (the whole `Authorization` value in a debug
            // body): standard and URL-safe, with and without padding.
            let base64 = Array(Data(bytes).base64EncodedString().utf8)
            let unpadded = base64.filter { $0 != UInt8(ascii: "=") }
            let urlSafe = unpadded.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0 }
            forms.formUnion([base64, unpadded, urlSafe])
            variants.formUnion(forms)
            var level = forms
            for _ in 0..<2 {
                var escaped: Set<[UInt8]> = []
                for form in level { escaped.formUnion(jsonEscaped(form)) }
                variants.formUnion(escaped)
                level = escaped
            }
        }
        return variants.sorted { $0.count != $1.count ? $0.count > $1.count : $0.lexicographicallyPrecedes($1) }
    }

    package static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            return true
        default: return false
        }
    }

    private static func isSubDelimOrColonAt(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"):
            return true
        default: return false
        }
    }

    /// What Foundation's `urlQueryAllowed` leaves as it is.
    static func isQueryAllowed(_ byte: UInt8) -> Bool {
        isUnreserved(byte) || isSubDelimOrColonAt(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?")
    }

    /// What Foundation's `urlPathAllowed` leaves as it is.
    static func isPathAllowed(_ byte: UInt8) -> Bool {
        isUnreserved(byte) || isSubDelimOrColonAt(byte) || byte == UInt8(ascii: "/")
    }

    package static func percentEncoded(_ bytes: [UInt8], allowed: (UInt8) -> Bool, upper: Bool) -> [UInt8] {
        let digits = Array((upper ? "0123456789ABCDEF" : "0123456789abcdef").utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for byte in bytes {
            if allowed(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
            }
        }
        return out
    }

    package static func replacing(_ bytes: [UInt8], _ target: [UInt8], with replacement: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if index + target.count <= bytes.count, bytes[index..<(index + target.count)].elementsEqual(target) {
                out += replacement
                index += target.count
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    /// `bytes` as JSON encoders write them inside a string: `\\`, `\"`, control characters
    /// (`\n` or `\u000a`, `\u0000`), `/` as it is or as `\/`, and (when there is non-ASCII text) every
    /// non-ASCII character as `\uXXXX` too.
    static func jsonEscaped(_ bytes: [UInt8]) -> [[UInt8]] {
        let hex = Array("0123456789abcdef".utf8)
        func escape(slash: Bool, ascii: Bool, controlsAsUnicode: Bool = false) -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(bytes.count + 8)
            func unicode(_ unit: UInt16) {
                out += [UInt8(ascii: "\\"), UInt8(ascii: "u"), hex[Int(unit >> 12 & 0xF)], hex[Int(unit >> 8 & 0xF)],
                    hex[Int(unit >> 4 & 0xF)], hex[Int(unit & 0xF)]]
            }
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case 0x5C: out += [0x5C, 0x5C]
                case 0x22: out += [0x5C, 0x22]
                case 0x2F where slash: out += [0x5C, 0x2F]
                case 0..<0x20 where controlsAsUnicode: unicode(UInt16(byte))
                case 0x0A: out += [0x5C, UInt8(ascii: "n")]
                case 0x0D: out += [0x5C, UInt8(ascii: "r")]
                case 0x09: out += [0x5C, UInt8(ascii: "t")]
                case 0x08: out += [0x5C, UInt8(ascii: "b")]
                case 0x0C: out += [0x5C, UInt8(ascii: "f")]
                case 0..<0x20: unicode(UInt16(byte))
                case 0x80... where ascii:
                    // One UTF-8 sequence (the bytes are valid UTF-8: they came from a String).
                    var end = index + 1
                    while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
                    for unit in String(decoding: bytes[index..<end], as: UTF8.self).utf16 { unicode(unit) }
                    index = end
                    continue
                default: out.append(byte)
                }
                index += 1
            }
            return out
        }
        var forms = [escape(slash: false, ascii: false), escape(slash: true, ascii: false)]
        if bytes.contains(where: { $0 >= 0x80 }) {
            forms += [escape(slash: false, ascii: true), escape(slash: true, ascii: true)]
        }
        if bytes.contains(where: { $0 < 0x20 }) {  // `\n` or `\u000a`: encoders differ
            forms += [escape(slash: false, ascii: false, controlsAsUnicode: true),
                escape(slash: false, ascii: true, controlsAsUnicode: true)]
        }
        return forms
    }
}
