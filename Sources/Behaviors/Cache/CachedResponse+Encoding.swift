import ConveyorPipeline
public import Foundation

/// The byte format of a stored response (version 1), as ``DiskCacheStorage`` writes it:
///
/// ```text
/// "CNVC"  version(1 byte)  status(u16)  requestTime(f64)  responseTime(f64)
/// credentials(str)  varyCount(u32) {name(str) present(u8) value(str)}…
/// headerCount(u32) {name(str) value(str)}…  body(u64 length + bytes)  checksum(u64)
/// ```
/// Integers are big-endian, a `str` is a u32 length and UTF-8 bytes, and the checksum is 64-bit
/// FNV-1a of every byte before it (it detects a damaged file; it is no protection against a
/// forged one). `credentials` is a SHA-256 digest in hex (empty for none), or for an answer any
/// credentials may use `*:` and the fetcher's digest (`*` alone, as written before 1.1: fetcher
/// not known).
extension CachedResponse {
    package static let magic: [UInt8] = Array("CNVC".utf8)
    package static let formatVersion: UInt8 = 1

    /// The response in the versioned byte format that ``init(encoded:)`` reads.
    public func encoded() -> Data {
        var out = ByteWriter()
        out.bytes(Self.magic)
        out.byte(Self.formatVersion)
        out.integer(UInt16(clamping: status))
        out.integer(requestTime.timeIntervalSince1970.bitPattern)
        out.integer(responseTime.timeIntervalSince1970.bitPattern)
        out.string(credentials)
        out.integer(UInt32(clamping: varyValues.count))
        for vary in varyValues {
            out.string(vary.name)
            out.byte(vary.value == nil ? 0 : 1)
            out.string(vary.value ?? "")
        }
        out.integer(UInt32(clamping: headers.count))
        for field in headers {
            out.string(field.name)
            out.string(field.value)
        }
        out.integer(UInt64(body.count))
        out.data.append(body)
        out.integer(FNV1a.hash(out.data))
        return out.data
    }

    /// Reads a response written by ``encoded()``.
    /// - Parameter data: The bytes.
    /// - Returns: `nil` when the bytes are truncated, damaged, of another format version, or not
    ///   a stored response at all.
    public init?(encoded data: Data) {
        guard data.count >= 8 else { return nil }
        let payload = data.prefix(data.count - 8)
        var reader = ByteReader(data)
        reader.offset = payload.count
        guard let checksum = reader.integer(UInt64.self), checksum == FNV1a.hash(payload) else { return nil }
        reader = ByteReader(payload)
        guard reader.bytes(4) == Self.magic, reader.byte() == Self.formatVersion,
            let status = reader.integer(UInt16.self), let requestBits = reader.integer(UInt64.self),
            let responseBits = reader.integer(UInt64.self), let credentials = reader.string(),
            let varyCount = reader.count(UInt32.self, minimumItemSize: 9)
        else { return nil }
        var varyValues: [VaryValue] = []
        for _ in 0..<varyCount {
            guard let name = reader.string(), let present = reader.byte(), let value = reader.string() else { return nil }
            varyValues.append(VaryValue(name: name, value: present == 0 ? nil : value))
        }
        guard let headerCount = reader.count(UInt32.self, minimumItemSize: 8) else { return nil }
        var headers = HTTPHeaders()
        for _ in 0..<headerCount {
            guard let name = reader.string(), let value = reader.string() else { return nil }
            headers.add(name: name, value: value)
        }
        guard let bodyLength = reader.integer(UInt64.self), let body = reader.data(bodyLength), reader.isAtEnd else {
            return nil
        }
        let requestTime = Double(bitPattern: requestBits)
        let responseTime = Double(bitPattern: responseBits)
        guard requestTime.isFinite, responseTime.isFinite else { return nil }
        self.init(
            status: Int(status), headers: headers, body: body,
            requestTime: Date(timeIntervalSince1970: requestTime), responseTime: Date(timeIntervalSince1970: responseTime),
            varyValues: varyValues, credentials: credentials)
    }
}

/// 64-bit FNV-1a: a fast checksum, not a secure hash.
package enum FNV1a {
    package static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }
}

private struct ByteWriter {
    var data = Data()
    mutating func byte(_ value: UInt8) { data.append(value) }
    mutating func bytes(_ values: [UInt8]) { data.append(contentsOf: values) }
    mutating func integer<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { data.append(contentsOf: $0) }
    }
    mutating func string(_ value: String) {
        let utf8 = Array(value.utf8)
        integer(UInt32(clamping: utf8.count))
        data.append(contentsOf: utf8.prefix(Int(UInt32.max)))
    }
}

/// Reads with every length checked against what is left: damaged input gives `nil`, never a trap.
private struct ByteReader {
    let bytes: Data
    var offset = 0
    init(_ data: Data) { bytes = Data(data) }  // rebased: indices from 0

    var isAtEnd: Bool { offset == bytes.count }
    var remaining: Int { bytes.count - offset }

    mutating func byte() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func data(_ count: UInt64) -> Data? {
        guard count <= UInt64(remaining) else { return nil }
        let length = Int(count)
        defer { offset += length }
        return bytes.subdata(in: offset..<offset + length)
    }

    mutating func integer<T: FixedWidthInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { return nil }
        var value: T = 0
        for byte in bytes[offset..<offset + size] { value = value << 8 | T(byte) }
        offset += size
        return value
    }

    /// A count of items, each at least `minimumItemSize` bytes: larger than the rest could hold is damage.
    mutating func count<T: FixedWidthInteger>(_ type: T.Type, minimumItemSize: Int) -> Int? {
        guard let value = integer(type), let count = Int(exactly: value), count <= remaining / minimumItemSize else {
            return nil
        }
        return count
    }

    mutating func string() -> String? {
        guard let length = integer(UInt32.self), let raw = bytes(Int(length)) else { return nil }
        return String(decoding: raw, as: UTF8.self)
    }
}
