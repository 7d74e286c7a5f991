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
/// A name is also a credential **by meaning**, by the one rule over the words of a name that
/// also decides which body fields and query items are secrets (`X-Tenant-Token`,
/// `X-Goog-Api-Key`, `Session-Id`, `X-Functions-Key`; not `Idempotency-Key` or `Sec-WebSocket-Key`):
/// a credential header no one registered is still stripped on a cross-origin redirect, redacted,
/// and part of the cache's and de-duplication's identity. The Reliability guide lists the rule.
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

    /// Whether a name means a credential by the one rule that every place uses
    /// (``SecretName``): header names, body fields, query items, HAR files and logs.
    package static func isCredentialByMeaning(_ name: String) -> Bool { SecretName.isSecret(name) }
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
