public import Foundation

/// The one list of header names whose values are credentials (contract rule 11). It drives three
/// things: a cross-origin redirect strips these headers, every rendering (`description`, `dump`,
/// log lines, `curlCommand()`) shows `***` for their values, and the credential behaviors add
/// them only for the origins they are scoped to.
///
/// ```swift
/// SensitiveHeaders.add(["X-Session"])      // your own credential header, once at start-up
/// ```
///
/// Built in: `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`, `X-API-Key`,
/// `API-Key`, `X-Auth-Token`, `X-Access-Token`, `X-CSRF-Token`, `X-XSRF-Token`,
/// `X-Amz-Security-Token`. `AuthTokenBehavior` adds its header's name, and `HeadersBehavior` the
/// names it is told are sensitive. Names compare case-insensitively; the list only grows.
///
/// A name is also a credential **by meaning**: when, lowercased and without `-`, `_` and `.`, it
/// contains `token`, `auth`, `secret`, `session`, `cookie`, `password`, `passwd`, `signature`,
/// `credential`, `apikey`, `accesskey`, `privatekey`, `csrf` or `xsrf` (`X-Tenant-Token`,
/// `X-Goog-Api-Key`, `Session-Id`), so a credential header no one registered is still stripped on a
/// cross-origin redirect, redacted, and part of the cache's and de-duplication's identity.
public enum SensitiveHeaders {
    /// The names that are always sensitive.
    public static let builtIn: [String] = [
        "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-API-Key", "API-Key", "X-Auth-Token",
        "X-Access-Token", "X-CSRF-Token", "X-XSRF-Token", "X-Amz-Security-Token",
    ]

    private static let added = Locked<[String]>([])

    /// Marks more header names as credentials, for the whole process.
    /// - Parameter names: Header names, in any case.
    public static func add(_ names: some Sequence<String>) {
        let fresh = names.filter { !contains($0) }
        guard !fresh.isEmpty else { return }
        added.withLock { list in
            for name in fresh where !list.contains(where: { HTTPHeaders.namesEqual($0, name) }) { list.append(name) }
        }
    }

    /// Every sensitive name: the built-in ones, then the added ones.
    public static var names: [String] { builtIn + added.withLock { $0 } }

    /// Whether a header with this name carries a credential.
    /// - Parameter name: The field name, in any case.
    public static func contains(_ name: String) -> Bool {
        isListed(name) || isCredentialByMeaning(name)
    }

    /// Whether the name is one of ``names`` (built in or added), without the by-meaning rule: for
    /// a body field or query item, whose names (`token_type`, `tokenizer`) are not headers.
    package static func isListed(_ name: String) -> Bool {
        if builtIn.contains(where: { HTTPHeaders.namesEqual($0, name) }) { return true }
        return added.withLock { $0.contains(where: { HTTPHeaders.namesEqual($0, name) }) }
    }

    /// The words that make a header name a credential, lowercased, without separators.
    private static let credentialWords: [[UInt8]] = [
        "token", "auth", "secret", "session", "cookie", "password", "passwd", "signature", "credential", "apikey",
        "accesskey", "privatekey", "csrf", "xsrf",
    ].map { Array($0.utf8) }

    /// Whether a name holds one of ``credentialWords`` once lowercased and without `-`, `_`, `.`.
    package static func isCredentialByMeaning(_ name: String) -> Bool {
        var folded: [UInt8] = []
        folded.reserveCapacity(name.utf8.count)
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."): continue
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): folded.append(byte + 32)
            default: folded.append(byte)
            }
        }
        guard folded.count >= 4 else { return false }
        for word in credentialWords where word.count <= folded.count {
            var start = 0
            while start + word.count <= folded.count {
                if folded[start] == word[0], folded[start..<start + word.count].elementsEqual(word) { return true }
                start += 1
            }
        }
        return false
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
