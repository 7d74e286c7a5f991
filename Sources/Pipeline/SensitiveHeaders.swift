public import Foundation

/// The header names whose values are credentials (contract rule 11), for one client. They drive
/// three things: a cross-origin redirect strips these headers, renderings of the client's
/// requests (`description`, `dump`, log lines, `curlCommand()`) show `***` for their values, and
/// the credential behaviors add them only for the origins they are scoped to.
///
/// A value, not a process-wide list: each ``NetworkClient`` has its own (its configuration's,
/// plus the names its behaviors declare, such as an ``AuthTokenBehavior``'s header), and every
/// ``HTTPRequest`` it sends carries it to the transport. Nothing one client adds reaches another.
///
/// ```swift
/// var configuration = NetworkClient.Configuration()
/// configuration.sensitiveHeaders = .standard.adding(["X-Session"])   // your own credential header
/// ```
///
/// Built in: `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`, `X-API-Key`,
/// `API-Key`, `X-Auth-Token`, `X-Access-Token`, `X-CSRF-Token`, `X-XSRF-Token`,
/// `X-Amz-Security-Token`. Names compare case-insensitively.
///
/// A name is also a credential **by meaning**: when, lowercased and without `-`, `_` and `.`, it
/// contains `token`, `auth`, `secret`, `session`, `cookie`, `password`, `passwd`, `signature`,
/// `credential`, `apikey`, `accesskey`, `privatekey`, `csrf` or `xsrf` (`X-Tenant-Token`,
/// `X-Goog-Api-Key`, `Session-Id`), so a credential header no one registered is still stripped on a
/// cross-origin redirect, redacted, and part of the cache's and de-duplication's identity.
///
/// ``HTTPHeaders`` rendered on their own (`print(request.headers)`) know no client: they hide the
/// built-in names and the names that mean a credential, not a client's additions. Render the
/// request (`dump(request)`, `curlCommand()`), which carries its client's names.
public struct SensitiveHeaders: Sendable, Hashable {
    /// The names that are always sensitive.
    public static let builtIn: [String] = [
        "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-API-Key", "API-Key", "X-Auth-Token",
        "X-Access-Token", "X-CSRF-Token", "X-XSRF-Token", "X-Amz-Security-Token",
    ]

    /// The built-in names and the by-meaning rule, nothing added.
    public static let standard = SensitiveHeaders(added: [])

    /// The names added to the built-in ones, in the order they were added.
    public let added: [String]

    private init(added: [String]) { self.added = added }

    /// These names and `names`.
    /// - Parameter names: Header names, in any case.
    /// - Returns: The larger set; this one is unchanged.
    public func adding(_ names: some Sequence<String>) -> SensitiveHeaders {
        var list = added
        for name in names where !isListed(name) && !list.contains(where: { HTTPHeaders.namesEqual($0, name) }) {
            list.append(name)
        }
        return list.count == added.count ? self : SensitiveHeaders(added: list)
    }

    /// Every listed name: the built-in ones, then the added ones.
    public var names: [String] { Self.builtIn + added }

    /// Whether a header with this name carries a credential: listed, or one by meaning.
    /// - Parameter name: The field name, in any case.
    public func contains(_ name: String) -> Bool {
        // Every built-in name is one by meaning (SensitiveHeaderTests pins it), so only the
        // added names need a lookup of their own.
        Self.isCredentialByMeaning(name) || added.contains(where: { HTTPHeaders.namesEqual($0, name) })
    }

    /// Whether the name is one of ``names``, without the by-meaning rule: for a body field or
    /// query item, whose names (`token_type`, `tokenizer`) are not headers.
    package func isListed(_ name: String) -> Bool {
        if Self.builtIn.contains(where: { HTTPHeaders.namesEqual($0, name) }) { return true }
        return added.contains(where: { HTTPHeaders.namesEqual($0, name) })
    }

    /// The words that make a header name a credential, lowercased, without separators.
    private static let credentialWords: [[UInt8]] = [
        "token", "auth", "secret", "session", "cookie", "password", "passwd", "signature", "credential", "apikey",
        "accesskey", "privatekey", "csrf", "xsrf",
    ].map { Array($0.utf8) }

    /// ``credentialWords`` by their first byte: 256 lists, most of them empty.
    private static let wordsByFirstLetter: [[[UInt8]]] = (0..<256).map { byte in
        credentialWords.filter { $0[0] == UInt8(byte) }
    }

    /// The letters of each of ``credentialWords``, one bit per letter `a`–`z`.
    private static let wordLetterMasks: [UInt32] = credentialWords.map(letterMask)

    /// One bit per lowercase letter `a`–`z` that `bytes` contain.
    private static func letterMask(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var mask: UInt32 = 0
        for byte in bytes where byte &- UInt8(ascii: "a") < 26 { mask |= 1 << UInt32(byte &- UInt8(ascii: "a")) }
        return mask
    }

    /// Whether a name holds one of ``credentialWords`` once lowercased and without `-`, `_`, `.`.
    package static func isCredentialByMeaning(_ name: String) -> Bool {
        let count = name.utf8.count
        guard count >= 4 else { return false }
        // Most names (Content-Type, Date) lack a letter of every word: told apart in one pass over
        // the bytes in place, before any folding.
        let mayHoldAWord = name.utf8.withContiguousStorageIfAvailable { bytes in
            var letters: UInt32 = 0
            for byte in bytes {
                // `| 0x20` lowercases a letter and turns no other byte into one.
                let letter = (byte | 0x20) &- UInt8(ascii: "a")
                if letter < 26 { letters |= 1 << UInt32(letter) }
            }
            return wordLetterMasks.contains { $0 & letters == $0 }
        }
        if mayHoldAWord == false { return false }
        // Folded on the stack (a name is short): this runs for every header a redaction or a
        // check sees, and a heap buffer would cost a malloc each time.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
            var length = 0
            for byte in name.utf8 {
                switch byte {
                case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."): continue
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): buffer[length] = byte + 32
                default: buffer[length] = byte
                }
                length += 1
            }
            guard length >= 4 else { return false }
            let folded = UnsafeBufferPointer(rebasing: buffer[..<length])
            // Most names (Content-Type, Date) lack a letter of every word: no search then.
            let letters = letterMask(folded)
            guard wordLetterMasks.contains(where: { $0 & letters == $0 }) else { return false }
            // Every word starts with one of a few letters: look only where one of them is.
            for start in 0..<length - 3 {
                for word in wordsByFirstLetter[Int(folded[start])] where start + word.count <= length {
                    if folded[start..<start + word.count].elementsEqual(word) { return true }
                }
            }
            return false
        }
    }
}

/// The scheme, host and port of a URL: what a credential is scoped to (RFC 6454).
public struct Origin: Hashable, Sendable, CustomStringConvertible {
    /// `http` or `https`, lowercased.
    public let scheme: String
    /// The host, lowercased.
    public let host: String
    /// The port, the scheme's default if the URL gives none.
    public let port: Int

    /// The origin of a URL, or `nil` if it has no scheme or host.
    /// - Parameter url: The URL.
    public init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else {
            return nil
        }
        let port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1)
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    /// `scheme://host:port`.
    public var description: String { "\(scheme)://\(host):\(port)" }
}
