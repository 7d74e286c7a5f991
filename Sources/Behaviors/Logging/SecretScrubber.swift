import ConveyorPipeline
import Foundation

/// Finds every known secret in a text, in every encoding a server may echo it in, and masks it:
/// in time linear in the text and in the secrets' total length, over bytes.
///
/// What it masks: each encoding of a secret (a *variant*, see ``variants(of:)``) of 4 to 7 bytes
/// wherever it occurs whole, and every run of 8 bytes that occurs in any variant (a server may
/// echo a secret cut short, so a search for whole variants would not do). Each 8-byte window is
/// one `UInt64`, so one pass over the text with a lookup per byte finds them all. The lookup is
/// a bit table first (one multiply and one load: a window of no variant almost never passes it),
/// and the exact set only for the windows that pass. Masked runs are widened to whole UTF-8
/// characters and each run becomes one mask.
///
/// The mask is `***` unless a secret contains `*`: then it is three of the first byte in
/// `*#~^|!` that no secret contains, so a mask can never be read as (part of) a secret. Every
/// occurrence of a secret in the output would have to overlap a mask; a mask holds a byte no
/// secret holds; so none is left.
///
/// Building one derives every encoding of every secret: build it once per set of secrets
/// (``SecretScrubberCache`` keeps the last few).
package struct SecretScrubber: Sendable {
    /// Each secret in every encoding, longest first.
    let variants: [[UInt8]]
    /// The mask, three bytes.
    let mask: [UInt8]
    /// The 8-byte windows of every variant of 8 bytes or more.
    private let windows: Set<UInt64>
    /// The variants of 4 to 7 bytes, by length (index 0 is length 4).
    private let short: [Set<UInt64>]
    /// The lengths (7 to 4) that some variant has, longest first.
    private let shortLengths: [Int]
    /// One bit per slot (``slot(_:)``), set for each window and each short variant: a key whose
    /// bit is clear is in neither set. About 32 bits per key, so few keys of a text pass.
    private let filter: [UInt64]
    /// `64 - log2(bits in filter)`: a slot is the top bits of the key times an odd constant.
    private let filterShift: UInt64
    /// Each variant's Knuth–Morris–Pratt failure function (``cutSecretLength(atEndOf:)``).
    private let failures: [[UInt32]]

    /// A scrubber with nothing to look for.
    package static let none = SecretScrubber(secrets: [])

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
        shortLengths = stride(from: 7, through: 4, by: -1).filter { !short[$0 - 4].isEmpty }
        let keys = windows.count + short.reduce(0) { $0 + $1.count }
        var bits = 9
        while bits < 22, 1 << bits < keys * 32 { bits += 1 }
        let shift = UInt64(64 - bits)
        var filter = [UInt64](repeating: 0, count: 1 << (bits - 6))
        for key in windows { Self.set(key, in: &filter, shift: shift) }
        for set in short { for key in set { Self.set(key, in: &filter, shift: shift) } }
        self.filter = filter
        filterShift = shift
        failures = variants.map(Self.failureFunction)
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
        return text.withUnsafeBufferPointer { buffer in
            guard let covered = coverage(of: buffer) else { return text }
            return masked(buffer, covered)
        }
    }

    /// `text` with every secret masked; `text` itself (no copy) when it holds none.
    package func scrub(_ text: String) -> String {
        guard !variants.isEmpty, !text.isEmpty else { return text }
        var text = text
        let scrubbed = text.withUTF8 { buffer -> [UInt8]? in coverage(of: buffer).map { masked(buffer, $0) } }
        return scrubbed.map { String(decoding: $0, as: UTF8.self) } ?? text
    }

    /// `text` with each covered run replaced by one mask.
    private func masked(_ text: UnsafeBufferPointer<UInt8>, _ covered: [Bool]) -> [UInt8] {
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

    /// The slot of a key in ``filter``: the top bits of a multiplicative hash.
    @inline(__always)
    private static func slot(_ key: UInt64, shift: UInt64) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    private static func set(_ key: UInt64, in filter: inout [UInt64], shift: UInt64) {
        let slot = slot(key, shift: shift)
        filter[slot >> 6] |= 1 << UInt64(slot & 63)
    }

    /// Which bytes of `text` belong to an occurrence of a secret, widened to whole UTF-8
    /// characters; `nil` when none does (nothing is allocated for a text with no secret).
    private func coverage(of text: UnsafeBufferPointer<UInt8>) -> [Bool]? {
        var covered: [Bool] = []
        filter.withUnsafeBufferPointer { filter in
            let shift = filterShift
            @inline(__always) func passes(_ key: UInt64) -> Bool {
                let slot = Self.slot(key, shift: shift)
                return filter[slot >> 6] & (1 << UInt64(slot & 63)) != 0
            }
            var key: UInt64 = 0
            for index in 0..<text.count {
                key = key << 8 | UInt64(text[index])
                let end = index + 1
                var length = 0
                if end >= 8, passes(key), windows.contains(key) { length = 8 }
                if length == 0 {
                    for k in shortLengths where end >= k {
                        let masked = key & ((1 << UInt64(8 * k)) - 1)
                        if passes(masked), short[k - 4].contains(masked) {
                            length = k
                            break
                        }
                    }
                }
                guard length > 0 else { continue }
                if covered.isEmpty { covered = [Bool](repeating: false, count: text.count) }
                var start = end - length
                while start > 0, text[start] & 0xC0 == 0x80 { start -= 1 }
                var stop = end
                while stop < text.count, text[stop] & 0xC0 == 0x80 { stop += 1 }
                // At most 14 bytes (8, widened by up to 3 on each side) per byte of text: linear.
                for position in start..<stop { covered[position] = true }
            }
        }
        return covered.isEmpty ? nil : covered
    }

    /// The Knuth–Morris–Pratt failure function of a variant: for each prefix, the length of its
    /// longest proper prefix that is also its suffix.
    private static func failureFunction(_ variant: [UInt8]) -> [UInt32] {
        guard variant.count > 4 else { return [] }
        var failure = [UInt32](repeating: 0, count: variant.count)
        var k = 0
        for i in 1..<variant.count {
            while k > 0, variant[i] != variant[k] { k = Int(failure[k - 1]) }
            if variant[i] == variant[k] { k += 1 }
            failure[i] = UInt32(k)
        }
        return failure
    }

    /// The length of the longest suffix of `text` (4 bytes or more, shorter than the variant) that
    /// begins some variant: what is left of a secret that a cut at the end of `text` split.
    /// Linear: a pass per variant over at most its length of `text`, with the failure functions
    /// built with the scrubber.
    func cutSecretLength(atEndOf text: [UInt8]) -> Int {
        var longest = 0
        for (variant, failure) in zip(variants, failures) where variant.count > 4 {
            // Knuth–Morris–Pratt: after reading the tail, `state` is the longest prefix of the
            // variant that ends the tail.
            var state = 0
            for byte in text.suffix(variant.count - 1) {
                while state > 0, byte != variant[state] { state = Int(failure[state - 1]) }
                if byte == variant[state] { state += 1 }
                if state == variant.count { state = Int(failure[state - 1]) }
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

/// The scrubbers of the last few sets of secrets: a client sends the same token with every
/// request, and building a scrubber (every encoding of every secret) costs far more than the line
/// it scrubs.
///
/// A set is found only by its exact secrets, byte for byte and in order (not by `String`'s `==`,
/// which equates canonically equivalent spellings whose bytes, and so whose echoes, differ): a
/// changed token gets a scrubber of its own, never one built for another. It keeps at most
/// `capacity` sets, the most recently used, so it holds no more secrets than the last few
/// requests sent.
package struct SecretScrubberCache: Sendable {
    /// A set of secrets and its scrubber.
    struct Entry {
        let secrets: [String]
        let scrubber: SecretScrubber
    }

    private let entries = Locked<[Entry]>([])
    /// How many sets it keeps.
    package let capacity: Int

    /// A cache of the last `capacity` sets (at least one).
    package init(capacity: Int = 4) {
        self.capacity = max(1, capacity)
    }

    /// The scrubber for exactly these secrets, built on the first call for them.
    package func scrubber(for secrets: [String]) -> SecretScrubber {
        guard secrets.contains(where: { $0.utf8.count >= 4 }) else { return .none }
        let found = entries.withLock { entries -> SecretScrubber? in
            guard let index = entries.firstIndex(where: { Self.same($0.secrets, secrets) }) else { return nil }
            if index > 0 { entries.insert(entries.remove(at: index), at: 0) }
            return entries[0].scrubber
        }
        if let found { return found }
        // Built outside the lock: another thread's lookup does not wait for it.
        let built = SecretScrubber(secrets: secrets)
        entries.withLock { entries in
            entries.removeAll { Self.same($0.secrets, secrets) }
            entries.insert(Entry(secrets: secrets, scrubber: built), at: 0)
            if entries.count > capacity { entries.removeLast(entries.count - capacity) }
        }
        return built
    }

    /// How many sets it holds now.
    var count: Int { entries.withLock { $0.count } }

    /// Whether two lists hold the same strings, byte for byte, in the same order.
    static func same(_ a: [String], _ b: [String]) -> Bool {
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where !sameBytes(x, y) { return false }
        return true
    }

    private static func sameBytes(_ x: String, _ y: String) -> Bool {
        guard x.utf8.count == y.utf8.count else { return false }
        let compared = x.utf8.withContiguousStorageIfAvailable { a in
            y.utf8.withContiguousStorageIfAvailable { b in
                a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
            }
        }
        return (compared ?? nil) ?? x.utf8.elementsEqual(y.utf8)
    }
}
