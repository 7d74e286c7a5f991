package import ConveyorPipeline
import Foundation

/// A digest of the credential headers a request carries, so a stored response is used only for
/// the same credentials. A discriminator, not encryption: a digest (SHA-256, or keyed: see
/// ``CacheCredentialDigest``) over the sorted, lowercased names and their values; empty when
/// there are none. When the cache's `account` names an account for a request with credentials,
/// the digest is of the account instead: every credential of one account is one identity.
enum CredentialFingerprint {
    static func of(
        _ headers: HTTPHeaders, sensitive: SensitiveHeaders = .standard, digest: CacheCredentialDigest = .sha256,
        account: (() -> String?)? = nil
    ) -> String {
        var parts: [String] = []
        for field in headers where sensitive.contains(field.name) {
            parts.append(field.name.lowercased() + ":" + field.value)
        }
        guard !parts.isEmpty else { return "" }
        // A line feed never ends a header's value: an account's digest is never a credentials' one.
        if let name = account?() { return digest.digest("account\n" + name) }
        return digest.digest(parts.sorted().joined(separator: "\n"))
    }

    /// The identity of an entry any credentials may use (a `public` answer, or one with
    /// `s-maxage`), as entries stored before 1.1 have it: who fetched it is not known, so every
    /// request reuses it by the shared cache's rules.
    static let anyone = "*"

    /// The identity of an entry any credentials may use, fetched with `fetcher` (a digest, or
    /// empty for none): `*:` and the digest. The fetcher reuses it by a private cache's rules
    /// (`max-age`), everyone else by a shared cache's (`s-maxage`).
    static func shared(fetchedBy fetcher: String) -> String { anyone + ":" + fetcher }
}

/// `Vary` (RFC 9111 §4.1).
package enum Vary {
    /// The lowercased names every `Vary` field lists; `*` stays `*`.
    package static func names(in headers: HTTPHeaders) -> [String] {
        var names: [String] = []
        var seen: Set<String> = []  // a set, not a scan of `names`: one 64 KB `Vary` stays linear
        for value in headers.values(for: "Vary") {
            do {
                for member in HeaderBytes.listMembers(Array(value.utf8)[...]) {
                    let name = String(decoding: member.map(HeaderBytes.lower), as: UTF8.self)
                    if seen.insert(name).inserted { names.append(name) }
                }
            }
        }
        return names
    }

    /// What a request's header contributes to the match: its fields joined and with spaces
    /// normalized, `nil` when absent, and only a digest for a credential (`sha256:` and SHA-256,
    /// or `hmac:` and the keyed digest).
    static func value(
        of name: String, in headers: HTTPHeaders, sensitive: SensitiveHeaders = .standard,
        digest: CacheCredentialDigest = .sha256
    ) -> CachedResponse.VaryValue {
        let values = headers.values(for: name)
        guard !values.isEmpty else { return .init(name: name, value: nil) }
        let joined = values.map { $0.split(separator: ",").map { $0.trimmingSpaces }.joined(separator: ",") }
            .joined(separator: ",")
        guard sensitive.contains(name) else { return .init(name: name, value: joined) }
        let digested = digest.digest(joined)
        return .init(name: name, value: digested.hasPrefix("hmac:") ? digested : "sha256:" + digested)
    }
}

extension CachedResponse {
    /// Whether any credentials may use it (the server marked it `public` or gave it an
    /// `s-maxage`, without `private`); otherwise only the credentials that fetched it may.
    var isShared: Bool { credentials.hasPrefix(CredentialFingerprint.anyone) }

    /// Whether `requester` (a ``CredentialFingerprint``) is the one that fetched it (or last
    /// revalidated it): its reuse follows a private cache's rules; anyone else's a shared cache's.
    func isFetched(by requester: String) -> Bool {
        isShared ? credentials == CredentialFingerprint.shared(fetchedBy: requester) : credentials == requester
    }

    /// Whether a request may be answered with this entry, once fresh enough for it
    /// (``freshnessLifetime(for:)``): same credentials unless shared, same values of the headers
    /// `Vary` named.
    func matches(
        _ headers: HTTPHeaders, credentials: String, sensitive: SensitiveHeaders = .standard,
        digest: CacheCredentialDigest = .sha256
    ) -> Bool {
        guard isShared || self.credentials == credentials else { return false }
        return varyValues.allSatisfy { Vary.value(of: $0.name, in: headers, sensitive: sensitive, digest: digest) == $0 }
    }

    /// Whether it varies on a credential header (a `Vary: Authorization`): it holds that
    /// credential's digest.
    var variesOnACredential: Bool {
        varyValues.contains { $0.value.map { $0.hasPrefix("sha256:") || $0.hasPrefix("hmac:") } ?? false }
    }

    /// The same entry with another identity (``credentials``).
    func withIdentity(_ identity: String) -> CachedResponse {
        CachedResponse(
            status: status, headers: headers, body: body, requestTime: requestTime, responseTime: responseTime,
            varyValues: varyValues, credentials: identity)
    }

    /// The entry after a `304 Not Modified` to `requester`'s conditional request: its headers
    /// updated with the 304's (RFC 9111 §3.2) except credential headers by the client's
    /// `sensitive` names, times of this exchange, and `requester` as the one that fetched it.
    func updated(
        with notModified: HTTPHeaders, requestTime: Date, responseTime: Date, requester: String,
        sensitive: SensitiveHeaders = .standard
    ) -> CachedResponse {
        var headers = self.headers
        // The stored `Date` and `Age` describe the old exchange: without new ones, this
        // exchange's time is the response's age origin (a kept old `Date` would make the
        // revalidated response look as old as the first one).
        for name in ["Date", "Age"] where !notModified.contains(name) { headers.remove(name: name) }
        let skipped = ["Content-Length", "Content-Encoding", "Content-Type", "Content-Range"]
        var replaced: Set<String> = []
        for field in notModified where CacheBehavior.isStoredHeader(field.name, sensitive: sensitive)
            && !skipped.contains(where: { HTTPHeaders.namesEqual($0, field.name) })
        {
            let lower = field.name.lowercased()
            if replaced.insert(lower).inserted { headers.remove(name: field.name) }
            headers.add(name: field.name, value: field.value)
        }
        // The exchange was `requester`'s: it reuses the entry by the private rules from now on. An
        // answer that is no longer `public` (nor has an `s-maxage`) is `requester`'s alone.
        let shared = isShared && CacheControl(headers).allowsSharing
        let identity = shared ? CredentialFingerprint.shared(fetchedBy: requester) : requester
        return CachedResponse(
            status: status, headers: headers, body: body, requestTime: requestTime, responseTime: responseTime,
            varyValues: varyValues, credentials: identity)
    }
}
