import ConveyorPipeline
import Foundation

/// Joins a base URL, a path and query parameters into a URL, percent-encoding as needed.
///
/// It runs on every request. A relative path the client has built before comes from its
/// ``PathURLCache`` (one lookup); otherwise the common case (a plain relative path) is one scan
/// of the path's bytes for dot segments, one for characters to encode, one concatenation and
/// one `URL` parse.
enum URLBuilder {
    /// - Parameters:
    ///   - base: The client's base URL as a string, without a trailing slash; already validated.
    ///   - baseProblem: Why the base URL cannot make request URLs, if it can't; only relative
    ///     paths fail with it.
    ///   - path: The request's path, or an absolute `http(s)` URL. In a relative path `#` is data
    ///     (encoded as `%23`: `/files/report #1.pdf`); an absolute URL's fragment is dropped.
    ///   - absolute: Whether `path` is an absolute URL (``isAbsolute(_:)``).
    ///   - query: Parameters to append.
    ///   - cache: The client's URLs for relative paths.
    static func url(
        base: String, baseProblem: String?, path: String, absolute: Bool, query: QueryParameters, cache: PathURLCache
    ) throws(NetworkError) -> URL {
        if absolute {
            // A fragment is never sent (RFC 9110 §4.2.4): cut at the first `#`, never encoded into
            // the path, where it would reach the server (and the logs) as `%23access_token=…`.
            let sent = path.utf8.firstIndex(of: UInt8(ascii: "#")).map { String(path[..<$0]) } ?? path
            let url = try parse(encodePath(sent), query: query.isEmpty ? "" : query.encoded, path: sent)
            // The base URL was checked when the client was made; an absolute path needs its own check.
            guard url.host != nil else { throw .invalidRequest("the absolute URL has no host") }
            return url
        }
        if let baseProblem { throw .invalidRequest(baseProblem) }
        let key = PathURLCache.Key(path: path, query: query.isEmpty ? "" : query.encoded)
        if let cached = cache.url(for: key) { return cached }
        if hasDotSegment(path) {
            throw .invalidRequest("the path contains a '.' or '..' segment, which could leave the base URL")
        }
        var string = base
        if !path.isEmpty && path.utf8.first != UInt8(ascii: "/") { string.append("/") }
        string.append(encodePath(path))
        let url = try parse(string, query: key.query, path: path)
        cache.store(url, for: key)
        return url
    }

    /// Whether the path is a whole `http://` or `https://` URL (a pagination link).
    static func isAbsolute(_ path: String) -> Bool {
        // Most paths start with "/": one byte read decides.
        guard path.utf8.first == UInt8(ascii: "h") else { return false }
        var bytes = path.utf8.makeIterator()
        for byte in "http".utf8 where bytes.next() != byte { return false }
        var next = bytes.next()
        if next == UInt8(ascii: "s") { next = bytes.next() }
        return next == UInt8(ascii: ":") && bytes.next() == UInt8(ascii: "/") && bytes.next() == UInt8(ascii: "/")
    }

    /// Appends the encoded query (after `&` if the string already has a query) and parses.
    private static func parse(_ string: String, query: String, path: String) throws(NetworkError) -> URL {
        var string = string
        if !query.isEmpty {
            string.append(string.utf8.contains(UInt8(ascii: "?")) ? "&" : "?")
            string.append(query)
        }
        guard let url = URL(string: string) else {
            throw .invalidRequest("the path does not make a valid URL with the base URL")
        }
        return url
    }

    /// Whether the path part (before any `?`) has a `.` or `..` segment, literal or `%2e`-encoded.
    static func hasDotSegment(_ path: String) -> Bool {
        var segmentStart = true
        var dots = 0
        var other = false
        func isDotSegment() -> Bool { !other && (dots == 1 || dots == 2) }
        var bytes = path.utf8.makeIterator()
        var pending: [UInt8] = []
        while let byte = pending.isEmpty ? bytes.next() : pending.removeFirst() {
            switch byte {
            case UInt8(ascii: "/"), UInt8(ascii: "?"):
                if !segmentStart && isDotSegment() { return true }
                if byte == UInt8(ascii: "?") { return false }
                segmentStart = true
                dots = 0
                other = false
                continue
            case UInt8(ascii: "."):
                dots += 1
            case UInt8(ascii: "%"):
                let first = bytes.next()
                let second = bytes.next()
                if first == UInt8(ascii: "2"), second == UInt8(ascii: "e") || second == UInt8(ascii: "E") {
                    dots += 1
                } else {
                    other = true
                    pending = [first, second].compactMap { $0 }
                }
            default:
                other = true
            }
            segmentStart = false
        }
        return !segmentStart && isDotSegment()
    }

    /// Percent-encodes bytes that may not appear in a URL path; keeps `%XX` escapes and treats
    /// the first `?` as the start of a raw query, which is kept as it is (minus invalid bytes).
    /// Returns `path` itself when nothing needs encoding.
    static func encodePath(_ path: String) -> String {
        var needsWork = false
        var inQuery = false
        for byte in path.utf8 {
            if byte == UInt8(ascii: "?") { inQuery = true }
            if !(isAllowed(byte) || byte == UInt8(ascii: "%") || (inQuery && byte == UInt8(ascii: "?"))) {
                needsWork = true
                break
            }
        }
        if !needsWork && !path.utf8.contains(UInt8(ascii: "%")) { return path }

        let hex = Array("0123456789ABCDEF".utf8)
        let bytes = Array(path.utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count + 16)
        inQuery = false
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
            } else if isAllowed(byte) || (inQuery && byte == UInt8(ascii: "?")) {
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
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"), UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","),
            UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"):
            true
        default: false
        }
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
