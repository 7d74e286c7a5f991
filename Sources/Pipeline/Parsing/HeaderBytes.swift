/// Small, total helpers for reading header values as bytes. Every parser of outside bytes in
/// Conveyor is built on these, never on `String` index arithmetic or Foundation's range and
/// formatter APIs (which can trap on odd input on Linux): each is linear in its input and
/// returns `nil` (or an empty result) for anything it does not understand.
package enum HeaderBytes {
    /// Optional whitespace (RFC 9110 §5.6.3): space or horizontal tab.
    @inline(__always)
    package static func isOWS(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// `bytes` without leading and trailing spaces and tabs.
    package static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, isOWS(bytes[start]) { start += 1 }
        while end > start, isOWS(bytes[end - 1]) { end -= 1 }
        return bytes[start..<end]
    }

    /// The value of a run of ASCII digits, at most `cap` (a longer run is `cap`); `nil` when
    /// `bytes` is empty or holds anything but digits.
    package static func digits(_ bytes: ArraySlice<UInt8>, cap: Int = Int.max) -> Int? {
        guard !bytes.isEmpty else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            if value < cap {
                let (times, o1) = value.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times.addingReportingOverflow(Int(byte - 0x30))
                value = o1 || o2 ? cap : min(sum, cap)
            }
        }
        return value
    }

    /// ASCII letters lowercased; every other byte as it is.
    @inline(__always)
    package static func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }

    /// Whether `bytes` equals the ASCII text `lowercase` ignoring ASCII case.
    package static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        return lowercase.withUTF8Buffer { expected in
            var i = 0
            for byte in bytes {
                guard lower(byte) == expected[i] else { return false }
                i += 1
            }
            return true
        }
    }

    /// The members of a comma-separated list (RFC 9110 §5.6.1), each trimmed, empty members left
    /// out; a comma inside a quoted string (with `\` escapes) does not split.
    package static func listMembers(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var members: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var quoted = false
        var escaped = false
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if escaped {
                escaped = false
            } else if quoted, byte == 0x5C {
                escaped = true
            } else if byte == 0x22 {
                quoted.toggle()
            } else if byte == 0x2C, !quoted {
                let member = trimmed(bytes[start..<index])
                if !member.isEmpty { members.append(member) }
                start = index + 1
            }
            index += 1
        }
        let last = trimmed(bytes[start..<bytes.endIndex])
        if !last.isEmpty { members.append(last) }
        return members
    }

    /// A quoted string's content with its escapes removed, or `bytes` as they are when not quoted
    /// (an unterminated quote is kept as it is).
    package static func unquoted(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        guard bytes.count >= 2, bytes.first == 0x22, bytes.last == 0x22 else { return bytes }
        let inner = bytes.dropFirst().dropLast()
        guard inner.contains(0x5C) else { return inner }
        var out: [UInt8] = []
        out.reserveCapacity(inner.count)
        var escaped = false
        for byte in inner {
            if !escaped, byte == 0x5C {
                escaped = true
                continue
            }
            escaped = false
            out.append(byte)
        }
        return out[...]
    }
}

extension HeaderBytes {
    /// delta-seconds (RFC 9111 §1.2.2): digits only, surrounding spaces ignored, at most 2^31
    /// (a larger value is 2^31); `nil` for anything else.
    package static func deltaSeconds(_ value: String) -> Int? {
        digits(trimmed(Array(value.utf8)[...]), cap: 2_147_483_648)
    }
}
