import ConveyorPipeline
public import Foundation

/// One cookie a server set (RFC 6265 §5.3). Its description never shows the value.
public struct Cookie: Sendable, Hashable, CustomStringConvertible {
    /// The cookie's name.
    public let name: String
    /// The cookie's value, a credential as often as not.
    public let value: String
    /// The host it goes to (and, unless ``hostOnly``, that host's subdomains), lowercased.
    public let domain: String
    /// Whether it goes to exactly ``domain`` (no `Domain` attribute was given).
    public let hostOnly: Bool
    /// The path it goes to, and the paths below it.
    public let path: String
    /// When it expires; `nil` for a session cookie, kept until the jar is emptied.
    public let expires: Date?
    /// Whether it goes over HTTPS only.
    public let secure: Bool
    /// Whether the server marked it `HttpOnly` (no script may read it; kept for completeness).
    public let httpOnly: Bool

    /// `name=*** (domain, path)`.
    public var description: String {
        "\(name)=*** (\(hostOnly ? "" : ".")\(domain)\(path)\(secure ? ", Secure" : ""))"
    }
}

/// The cookies of one client: each ``CookieBehavior`` has its own, and no other client, session
/// or process-wide storage sees them.
///
/// It follows RFC 6265 §5 and its update (6265bis): `Set-Cookie` is parsed leniently, the last
/// `Domain` and `Path` attributes count, a `Domain` must domain-match the responding host and may
/// not be a public suffix (`com`, `co.uk`, `github.io`, from the Public Suffix List the library
/// ships; a host that is one itself gets a host-only cookie) nor end with a dot, a `Secure`
/// cookie is only set over HTTPS and only sent over HTTPS, and an `http` response cannot replace
/// it; a name that starts with `__Secure-` needs `Secure` from HTTPS, one that starts with
/// `__Host-` also no `Domain` and `Path=/` (both in any case); `Max-Age` wins over `Expires`, an
/// expired cookie deletes the one it replaces, and a request gets the cookies whose domain and
/// path match it, longest path first. It is bounded: at most 50 cookies per domain
/// and 1,000 in all (the oldest go first), 4,096 bytes per name and value.
///
/// ```swift
/// let jar = CookieJar()
/// let client = NetworkClient(baseURL: api) { CookieBehavior(jar: jar) }
/// // later: await jar.removeAll()   (log out)
/// ```
public final class CookieJar: Sendable {
    private struct Stored {
        var cookie: Cookie
        var created: UInt64
    }

    private let state = Locked<(cookies: [Stored], counter: UInt64)>(([], 0))
    private let now: @Sendable () -> Date

    /// The most cookies kept for one domain.
    package static let maximumPerDomain = 50
    /// The most cookies kept in all.
    package static let maximumCount = 1000
    /// The longest name plus value kept, in bytes.
    package static let maximumSize = 4096

    /// Creates an empty jar.
    /// - Parameter now: The current time, for expiry; injectable for tests.
    public init(now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
    }

    /// Every cookie the jar holds and that has not expired.
    public var cookies: [Cookie] {
        let time = now()
        return state.withLock { $0.cookies.map(\.cookie).filter { $0.expires.map { $0 > time } ?? true } }
    }

    /// Empties the jar (a log-out).
    public func removeAll() { state.withLock { $0.cookies = [] } }

    /// The cookies that go with a request to `url`, in the order they are sent.
    /// - Parameter url: The request's URL.
    public func cookies(for url: URL) -> [Cookie] {
        guard let host = url.host?.lowercased(), let scheme = url.scheme?.lowercased() else { return [] }
        let path = Self.path(of: url)
        let time = now()
        let secure = scheme == "https"
        return state.withLock { state in
            state.cookies.removeAll { $0.cookie.expires.map { $0 <= time } ?? false }
            return state.cookies.filter { stored in
                let cookie = stored.cookie
                let domainMatches = cookie.hostOnly ? host == cookie.domain : Self.domainMatches(host, cookie.domain)
                return domainMatches && Self.pathMatches(path, cookie.path) && (!cookie.secure || secure)
            }
            .sorted { ($0.cookie.path.count, $1.created) > ($1.cookie.path.count, $0.created) }
            .map(\.cookie)
        }
    }

    /// The `Cookie` header value for a request to `url`, or `nil` when no cookie goes with it.
    /// - Parameter url: The request's URL.
    public func header(for url: URL) -> String? {
        let cookies = cookies(for: url)
        guard !cookies.isEmpty else { return nil }
        return cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    /// Stores what a response's `Set-Cookie` fields say.
    /// - Parameters:
    ///   - setCookies: The `Set-Cookie` field values (a value that joins several with `, `, as
    ///     some transports hand them over, is split again).
    ///   - url: The URL that answered.
    public func store(setCookies: [String], from url: URL) {
        guard let host = url.host?.lowercased(), let scheme = url.scheme?.lowercased() else { return }
        let time = now()
        for value in setCookies {
            for line in Self.split(value) {
                guard let cookie = Self.parse(line, host: host, secureOrigin: scheme == "https", url: url, now: time)
                else { continue }
                insert(cookie, at: time, fromSecureOrigin: scheme == "https")
            }
        }
    }

    private func insert(_ cookie: Cookie, at time: Date, fromSecureOrigin: Bool) {
        state.withLock { state in
            // 6265bis §5.7 step 16: an insecure origin leaves a `Secure` cookie of that name alone
            // (it would otherwise replace a session cookie that is then sent over HTTPS).
            if !fromSecureOrigin, state.cookies.contains(where: { stored in
                let old = stored.cookie
                return old.secure && old.name == cookie.name
                    && (Self.domainMatches(old.domain, cookie.domain) || Self.domainMatches(cookie.domain, old.domain))
                    && Self.pathMatches(cookie.path, old.path)
            }) {
                return
            }
            let replaced = state.cookies.firstIndex {
                $0.cookie.name == cookie.name && $0.cookie.domain == cookie.domain && $0.cookie.path == cookie.path
            }
            let created = replaced.map { state.cookies[$0].created } ?? state.counter
            if let replaced { state.cookies.remove(at: replaced) }
            if let expires = cookie.expires, expires <= time { return }  // an expired cookie deletes
            state.counter += 1
            state.cookies.append(Stored(cookie: cookie, created: created))
            let sameDomain = state.cookies.indices.filter { state.cookies[$0].cookie.domain == cookie.domain }
            if sameDomain.count > Self.maximumPerDomain, let oldest = sameDomain.first { state.cookies.remove(at: oldest) }
            if state.cookies.count > Self.maximumCount { state.cookies.removeFirst() }
        }
    }

    // MARK: Parsing (RFC 6265 §5.2)

    /// A `Set-Cookie` value that a transport joined with `, ` split again: a comma starts a new
    /// cookie only where the text after it, up to the next `;`, holds an `=` (the comma of an
    /// `Expires` date does not).
    static func split(_ value: String) -> [Substring] {
        var lines: [Substring] = []
        var start = value.startIndex
        var index = value.startIndex
        while index < value.endIndex {
            if value[index] == "," {
                let rest = value[value.index(after: index)...]
                let segment = rest.prefix { $0 != ";" && $0 != "," }
                if segment.contains("=") {
                    lines.append(value[start..<index])
                    start = value.index(after: index)
                }
            }
            index = value.index(after: index)
        }
        lines.append(value[start...])
        return lines
    }

    static func parse(_ line: Substring, host: String, secureOrigin: Bool, url: URL, now: Date) -> Cookie? {
        let parts = line.split(separator: ";", omittingEmptySubsequences: false)
        guard let pair = parts.first, let equals = pair.firstIndex(of: "=") else { return nil }
        let name = pair[..<equals].trimmingCharacters(in: .whitespaces)
        let value = pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.utf8.count + value.utf8.count <= maximumSize,
            !(name + value).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { return nil }
        var expires: Date?
        var maxAge: Date?
        var domain: String?
        var path: String?
        var secure = false
        var httpOnly = false
        for attribute in parts.dropFirst() {
            let (key, rawValue): (Substring, Substring) =
                attribute.firstIndex(of: "=").map { (attribute[..<$0], attribute[attribute.index(after: $0)...]) }
                ?? (attribute, "")
            let attributeValue = rawValue.trimmingCharacters(in: .whitespaces)
            switch key.trimmingCharacters(in: .whitespaces).lowercased() {
            case "expires":
                if let date = HTTPDate.parse(attributeValue, now: now) { expires = date }
            case "max-age":
                let digits = attributeValue.hasPrefix("-") ? attributeValue.dropFirst() : attributeValue[...]
                guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { continue }
                let seconds = Double(digits.prefix(12)) ?? 0
                maxAge = attributeValue.hasPrefix("-") || seconds == 0 ? .distantPast : now.addingTimeInterval(seconds)
            case "domain":
                var text = attributeValue.lowercased()
                if text.hasPrefix(".") { text.removeFirst() }
                if !text.isEmpty { domain = text }  // an empty value is ignored (§5.2.3)
            case "path":
                // The last one counts, and one that does not start with `/` is the default (§5.2.4).
                path = attributeValue.hasPrefix("/") ? attributeValue : defaultPath(of: url)
            case "secure": secure = true
            case "httponly": httpOnly = true
            default: continue
            }
        }
        if secure && !secureOrigin { return nil }  // RFC 6265bis §5.6: only a secure origin sets a Secure cookie
        // Cookie prefixes (6265bis §4.1.3), matched in any case as browsers now do.
        let lowered = name.lowercased()
        if lowered.hasPrefix("__secure-") || lowered.hasPrefix("__host-") {
            guard secure, secureOrigin else { return nil }
        }
        if lowered.hasPrefix("__host-") {
            guard domain == nil, path == "/" else { return nil }
        }
        var hostOnly = true
        var cookieDomain = host
        if let domain {
            // `com.` from `example.com.`: a trailing dot would make a public suffix look like a name.
            guard !domain.hasSuffix("."), !host.hasSuffix(".") else { return nil }
            // A suffix by the list, or as short as the host's own suffix (`kobe.jp` from
            // `x.city.kobe.jp`, under the exception rule `!city.kobe.jp`).
            let labels = domain.split(separator: ".", omittingEmptySubsequences: false).count
            if PublicSuffixes.isPublicSuffix(domain)
                || (domainMatches(host, domain) && labels <= PublicSuffixes.suffixLabelCount(of: host))
            {
                // §5.3 step 5: a public suffix only for the host that is one, as a host-only cookie.
                guard domain == host else { return nil }
            } else {
                // The responding host must domain-match it.
                guard domainMatches(host, domain), !isIPAddress(host) || domain == host else { return nil }
                hostOnly = false
                cookieDomain = domain
            }
        }
        return Cookie(
            name: name, value: value, domain: cookieDomain, hostOnly: hostOnly, path: path ?? defaultPath(of: url),
            expires: maxAge ?? expires, secure: secure, httpOnly: httpOnly)
    }

    /// The URL's path as sent (a trailing `/` kept, which `URL.path` drops), `/` when empty.
    static func path(of url: URL) -> String {
        let path = URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedPath ?? url.path
        return path.isEmpty ? "/" : path
    }

    /// RFC 6265 §5.1.4: the request path up to its last `/`, or `/`.
    static func defaultPath(of url: URL) -> String {
        let path = path(of: url)
        guard path.hasPrefix("/"), let last = path.lastIndex(of: "/"), last != path.startIndex else { return "/" }
        return String(path[..<last])
    }

    /// RFC 6265 §5.1.3.
    static func domainMatches(_ host: String, _ domain: String) -> Bool {
        host == domain || (host.hasSuffix("." + domain) && !isIPAddress(host))
    }

    /// RFC 6265 §5.1.4.
    static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
        guard requestPath.hasPrefix(cookiePath) else { return false }
        return requestPath.count == cookiePath.count || cookiePath.hasSuffix("/")
            || requestPath[requestPath.index(requestPath.startIndex, offsetBy: cookiePath.count)] == "/"
    }

    static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || (!host.isEmpty && host.allSatisfy { $0 == "." || $0.isNumber })
    }
}
