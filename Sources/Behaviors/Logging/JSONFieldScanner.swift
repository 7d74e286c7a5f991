import ConveyorPipeline
import Foundation

/// Reads JSON (or JSON-like text cut anywhere) as a stream of tokens, without building objects,
/// to find the values of hidden keys: one pass over the bytes, memory linear in the input.
///
/// A key is a string followed (after any whitespace, newlines included) by `:`; it is compared
/// after its escapes are decoded (`"\u0061ccess_token"` is `access_token`). Its value is the
/// whole JSON value that follows: a string, a number or literal, or an array or object with
/// everything nested in it (strings inside are skipped whole, so brackets in them do not count).
/// A value cut by the end of the text runs to the end.
///
/// Which keys hide their value is a ``SecretName/Verdict`` per key: a secret's value is always
/// hidden, an ambiguous one's unless ``SecretName/shows(value:json:under:)`` says the value
/// cannot be a credential (`{"key":"theme"}`, `{"pin":true}`).
struct JSONFieldScanner {
    let bytes: [UInt8]

    /// The text with the value of every key whose verdict hides it replaced by `"<mask>"`: still
    /// valid JSON where the input was.
    func masking(where verdict: (String) -> SecretName.Verdict, mask: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        forEachHiddenValue(where: verdict) { copyUpTo, valueRange in
            output.append(contentsOf: bytes[index..<copyUpTo])
            output.append(UInt8(ascii: "\""))
            output.append(contentsOf: mask)
            output.append(UInt8(ascii: "\""))
            index = valueRange.upperBound
        }
        output.append(contentsOf: bytes[index...])
        return output
    }

    /// Every string (decoded) and every other scalar (as written) inside the values of hidden
    /// keys.
    func hiddenLeaves(where verdict: (String) -> SecretName.Verdict) -> [String] {
        var leaves: [String] = []
        forEachHiddenValue(where: verdict) { _, range in
            var index = range.lowerBound
            while index < range.upperBound {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let end = stringEnd(from: index)
                    leaves.append(decodedString(index, end))
                    index = end
                } else if Self.isStructural(byte) || Self.isSpace(byte) {
                    index += 1
                } else {
                    var end = index
                    while end < range.upperBound, !Self.isStructural(bytes[end]), !Self.isSpace(bytes[end]),
                        bytes[end] != UInt8(ascii: "\"")
                    {
                        end += 1
                    }
                    let literal = String(decoding: bytes[index..<end], as: UTF8.self)
                    if literal != "true" && literal != "false" && literal != "null" { leaves.append(literal) }
                    index = end
                }
            }
        }
        return leaves
    }

    /// Calls `body` for each hidden key's value, in order, with the index where the value's
    /// replacement goes (after the key, its colon and the whitespace after it) and the value's
    /// range. Values never overlap.
    private func forEachHiddenValue(where judge: (String) -> SecretName.Verdict, _ body: (Int, Range<Int>) -> Void) {
        var index = 0
        while index < bytes.count {
            index = self.index(of: UInt8(ascii: "\""), from: index, to: bytes.count)
            guard index < bytes.count else { break }
            let end = stringEnd(from: index)
            let colon = skipSpace(end)
            guard colon < bytes.count, bytes[colon] == UInt8(ascii: ":") else {
                index = end
                continue
            }
            let verdict = judge(decodedString(index, end))
            guard verdict != .plain else {
                index = end
                continue
            }
            let valueStart = skipSpace(colon + 1)
            let valueEnd = self.valueEnd(from: valueStart)
            // Only a scalar can be shown, so what follows it is read on from its end.
            if verdict != .secret, SecretName.shows(value: bytes[valueStart..<valueEnd], json: true, under: verdict) {
                index = valueEnd
                continue
            }
            body(valueStart, valueStart..<valueEnd)
            index = valueEnd
        }
    }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    private static func isStructural(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ",") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "{") || byte == UInt8(ascii: "}")
            || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")
    }

    private func skipSpace(_ start: Int) -> Int {
        var index = start
        while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 }
        return index
    }

    /// The index after the closing quote of the string that opens at `start`, or the end: the
    /// first quote that no backslash escapes. Each quote and each backslash is found by `memchr`,
    /// and each byte is searched at most once for each: linear, and a long string costs a few
    /// calls instead of a loop over its bytes.
    private func stringEnd(from start: Int) -> Int {
        let count = bytes.count
        var index = start + 1
        var quote = index - 1  // the first quote at or after `index`, once searched for
        while index < count {
            if quote < index { quote = self.index(of: UInt8(ascii: "\""), from: index, to: count) }
            let backslash = self.index(of: UInt8(ascii: "\\"), from: index, to: quote)
            if backslash == quote { return quote == count ? count : quote + 1 }
            index = backslash + 2  // the escaped byte is skipped, whatever it is
        }
        return count
    }

    /// The index of the first `byte` in `bytes[start..<end]`, or `end`.
    private func index(of byte: UInt8, from start: Int, to end: Int) -> Int {
        guard start < end else { return end }
        return bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, let found = memchr(base + start, Int32(byte), end - start) else { return end }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// The end of the value that starts at `start`: a string, a balanced array or object, or a
    /// scalar up to `,`, `}`, `]` or a line break.
    private func valueEnd(from start: Int) -> Int {
        guard start < bytes.count else { return start }
        switch bytes[start] {
        case UInt8(ascii: "\""):
            return stringEnd(from: start)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            var index = start
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    index = stringEnd(from: index)
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return index + 1 }
                default: break
                }
                index += 1
            }
            return bytes.count
        default:
            var index = start
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x0A, 0x0D: return index
                default: index += 1
                }
            }
            return index
        }
    }

    /// The text of the string whose opening quote is at `start` and which ends before `end`,
    /// with its escapes decoded (`\uXXXX` with surrogate pairs; anything invalid as U+FFFD).
    private func decodedString(_ start: Int, _ end: Int) -> String {
        var contentEnd = end
        if contentEnd > start + 1, bytes[contentEnd - 1] == UInt8(ascii: "\"") { contentEnd -= 1 }
        let content = bytes[min(start + 1, contentEnd)..<contentEnd]
        guard content.contains(UInt8(ascii: "\\")) else { return String(decoding: content, as: UTF8.self) }
        var units: [UInt16] = []  // decoded as UTF-16, so that surrogate pairs join
        var index = content.startIndex
        func hexValue(_ at: Int) -> UInt16? {
            guard at + 4 <= content.endIndex else { return nil }
            var value: UInt16 = 0
            for byte in content[at..<(at + 4)] {
                let digit: UInt8
                switch byte {
                case 0x30...0x39: digit = byte - 0x30
                case 0x41...0x46: digit = byte - 0x41 + 10
                case 0x61...0x66: digit = byte - 0x61 + 10
                default: return nil
                }
                value = value << 4 | UInt16(digit)
            }
            return value
        }
        while index < content.endIndex {
            let byte = content[index]
            guard byte == UInt8(ascii: "\\"), index + 1 < content.endIndex else {
                // Plain text: copy one UTF-8 sequence as UTF-16.
                var next = index + 1
                while next < content.endIndex, content[next] & 0xC0 == 0x80 { next += 1 }
                units += String(decoding: content[index..<next], as: UTF8.self).utf16
                index = next
                continue
            }
            let escaped = content[index + 1]
            index += 2
            switch escaped {
            case UInt8(ascii: "n"): units.append(0x0A)
            case UInt8(ascii: "r"): units.append(0x0D)
            case UInt8(ascii: "t"): units.append(0x09)
            case UInt8(ascii: "b"): units.append(0x08)
            case UInt8(ascii: "f"): units.append(0x0C)
            case UInt8(ascii: "u"):
                if let unit = hexValue(index) {
                    units.append(unit)
                    index += 4
                } else {
                    units.append(0xFFFD)
                }
            default: units.append(UInt16(escaped))
            }
        }
        return String(decoding: units, as: UTF16.self)
    }
}
