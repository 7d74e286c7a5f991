public import ConveyorPipeline
public import Foundation

/// A stored response, as a ``CacheStorage`` keeps it: status, headers and body, when it was
/// fetched, and what a later request must match to be answered with it (the values of the request
/// headers its `Vary` names, and a digest of the credentials the request carried).
///
/// It never holds a credential: credential headers and `Set-Cookie` are left out of its headers,
/// and credential values that `Vary` names are kept as SHA-256 digests.
///
/// A storage of your own can keep the value as it is, or as bytes: ``encoded()`` gives the
/// versioned format ``DiskCacheStorage`` writes, and ``init(encoded:)`` reads it back (`nil` for
/// anything truncated, corrupt or of another version).
public struct CachedResponse: Sendable, Hashable {
    /// The status code.
    public let status: Int
    /// The response's headers, without `Set-Cookie`, other credential headers and hop-by-hop fields.
    public let headers: HTTPHeaders
    /// The body.
    public let body: Data
    /// When the request that fetched (or last revalidated) it was sent.
    let requestTime: Date
    /// When that response arrived.
    let responseTime: Date
    /// For each header the response's `Vary` names (lowercased): the request's value, `nil` when
    /// the request had none; a credential's value as `sha256:` and its digest.
    let varyValues: [VaryValue]
    /// ``CredentialFingerprint`` of the request; empty when it carried no credential. For an
    /// entry any credentials may use, `*:` and the fetcher's digest (`*` alone from before 1.1).
    let credentials: String

    // Derived from the above, so a hit parses nothing.
    /// The response's lifetime in seconds (RFC 9111 §4.2.1) for a private cache: the credentials
    /// that fetched it; 0 without explicit freshness.
    let freshnessLifetime: Double
    /// Its lifetime for a shared cache (§4.2.1): `s-maxage` where present (§5.2.2.10), else
    /// ``freshnessLifetime``. What other credentials reuse a shared entry by.
    let sharedFreshnessLifetime: Double
    /// `corrected_initial_age` (RFC 9111 §4.2.3).
    let initialAge: Double
    /// The response said `no-cache`: every use is revalidated.
    let requiresRevalidation: Bool
    /// The `ETag`, if any.
    let entityTag: String?
    /// The `Last-Modified`, if any.
    let lastModified: String?

    struct VaryValue: Sendable, Hashable {
        let name: String
        let value: String?
    }

    /// An entry with no `Vary` values and no credentials, received at `date` (for tests of storages).
    package init(status: Int, headers: HTTPHeaders, body: Data, receivedAt date: Date) {
        self.init(
            status: status, headers: headers, body: body, requestTime: date, responseTime: date, varyValues: [],
            credentials: "")
    }

    init(
        status: Int, headers: HTTPHeaders, body: Data, requestTime: Date, responseTime: Date, varyValues: [VaryValue],
        credentials: String
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.varyValues = varyValues
        self.credentials = credentials

        let control = CacheControl(headers)
        let date = headers["Date"].flatMap { HTTPDate.parse($0) } ?? responseTime
        if let maxAge = control.maxAge {
            freshnessLifetime = Double(maxAge)
        } else if let expires = headers["Expires"] {
            // An invalid date (`0`, `-1`) means "already expired" (RFC 9111 §5.3).
            freshnessLifetime = HTTPDate.parse(expires).map { max(0, $0.timeIntervalSince(date)) } ?? 0
        } else {
            freshnessLifetime = 0  // no heuristic freshness (Docs/Decisions.md, "Caching")
        }
        sharedFreshnessLifetime = control.sharedMaxAge.map { Double($0) } ?? freshnessLifetime
        let apparentAge = max(0, responseTime.timeIntervalSince(date))
        let ageValue = headers["Age"].flatMap { HeaderBytes.deltaSeconds($0) }.map { Double($0) } ?? 0
        let correctedAge = ageValue + max(0, responseTime.timeIntervalSince(requestTime))
        initialAge = max(apparentAge, correctedAge)
        requiresRevalidation = control.noCache
        entityTag = headers["ETag"]
        lastModified = headers["Last-Modified"]
    }

    /// Whether it carries a validator (`ETag` or `Last-Modified`), so that a stale copy can still
    /// be revalidated with a conditional request. A storage may drop a stale entry without one:
    /// ``CacheBehavior`` never uses it again.
    public var hasValidator: Bool { entityTag != nil || lastModified != nil }

    /// When it stops being fresh (RFC 9111 §4.2) for every request that may use it, on the clock
    /// of the ``CacheBehavior`` that stored it: until then some request may be answered with it
    /// without the network; after, only once the server confirmed it (``hasValidator``).
    /// `Date.distantPast` for an entry that is never fresh (stored with `no-cache`, or already as
    /// old as its lifetime when it arrived).
    ///
    /// An entry that any credentials may use (`public`, or an `s-maxage`) is fresh for the
    /// credentials that fetched it by `max-age` and for all others by `s-maxage` where present:
    /// this is the later of the two.
    public var freshUntil: Date {
        let remaining = longestFreshnessLifetime - initialAge
        guard !requiresRevalidation, remaining > 0 else { return .distantPast }
        return responseTime.addingTimeInterval(remaining)
    }

    /// The lifetime by which `requester` (a ``CredentialFingerprint``) may reuse it: a private
    /// cache's for the credentials that fetched it, a shared cache's for anyone else.
    func freshnessLifetime(for requester: String) -> Double {
        isFetched(by: requester) ? freshnessLifetime : sharedFreshnessLifetime
    }

    /// The longest lifetime any request may reuse it by.
    var longestFreshnessLifetime: Double {
        guard isShared else { return freshnessLifetime }
        // `*` alone (stored before 1.1): its fetcher is not known, so no one has the private rule.
        return credentials == CredentialFingerprint.anyone
            ? sharedFreshnessLifetime : max(freshnessLifetime, sharedFreshnessLifetime)
    }

    /// `current_age` at `now`, in seconds (RFC 9111 §4.2.3).
    func age(at now: Date) -> Double { initialAge + max(0, now.timeIntervalSince(responseTime)) }

    /// Roughly how many bytes it occupies: body, headers, match data and a fixed overhead.
    /// ``MemoryCacheStorage`` counts entries by it.
    public var byteCount: Int {
        var count = 128 + body.count + credentials.utf8.count
        for field in headers { count += field.name.utf8.count + field.value.utf8.count + 16 }
        for vary in varyValues { count += vary.name.utf8.count + (vary.value?.utf8.count ?? 0) + 16 }
        return count
    }
}
