import ConveyorPipeline
import Foundation

/// Joins a base URL, a path and query parameters into a URL, percent-encoding as needed.
enum URLBuilder {
    static func url(base: String, path: String, query: QueryParameters) throws(NetworkError) -> URL {
        var string: String
        if path.hasPrefix("http://") || path.hasPrefix("https://") {
            string = encodePath(path)
        } else {
            let pathPart = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            if pathPart.split(separator: "/").contains(where: { $0 == "." || $0 == ".." || $0.lowercased() == "%2e%2e" }) {
                throw .invalidRequest("the path contains a '.' or '..' segment, which could leave the base URL")
            }
            string = base
            if !path.isEmpty && !path.hasPrefix("/") { string.append("/") }
            string.append(encodePath(path))
        }
        if !query.isEmpty {
            string.append(string.contains("?") ? "&" : "?")
            string.append(query.encoded)
        }
        guard let url = URL(string: string), url.scheme != nil, url.host != nil else {
            throw .invalidRequest("'\(path)' does not make a valid URL with the base URL")
        }
        return url
    }

    /// Percent-encodes bytes that may not appear in a URL path; keeps `%XX` escapes and treats
    /// the first `?` as the start of a raw query, which is kept as it is (minus invalid bytes).
    static func encodePath(_ path: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        let bytes = Array(path.utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var inQuery = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "?") && !inQuery {
                inQuery = true
                result.append(byte)
            } else if byte == UInt8(ascii: "%"), index + 2 < bytes.count, isHex(bytes[index + 1]),
                isHex(bytes[index + 2])
            {
                result.append(byte)
            } else if isAllowed(byte) || (inQuery && (byte == UInt8(ascii: "?") || byte == UInt8(ascii: "/"))) {
                result.append(byte)
            } else {
                result.append(UInt8(ascii: "%"))
                result.append(hex[Int(byte >> 4)])
                result.append(hex[Int(byte & 0x0F)])
            }
            index += 1
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// RFC 3986 `pchar` plus `/`: unreserved, sub-delims, `:` and `@`.
    private static func isAllowed(_ byte: UInt8) -> Bool {
        if QueryParameters.isUnreserved(byte) { return true }
        return "!$&'()*+,;=:@/".utf8.contains(byte)
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }
}
