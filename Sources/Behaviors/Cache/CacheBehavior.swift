public import ConveyorPipeline
public import Foundation

/// A private HTTP cache (RFC 9111) for a client: fresh responses are answered from storage
/// without the network, stale ones are revalidated with a conditional request, and a `304 Not
/// Modified` becomes the stored response for the caller.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     AuthTokenBehavior(tokens: keychain)
///     CacheBehavior()                       // in memory, 10 MiB
/// }
/// ```
///
/// What it follows: `Cache-Control` (`max-age`, `no-store`, `no-cache`, `private`, `public`,
/// `must-revalidate`, `s-maxage` for answers shared across credentials; on requests also `max-age`, `min-fresh`,
/// `only-if-cached`), `Expires`, `Date` and `Age` for the age, `ETag`/`If-None-Match` and
/// `Last-Modified`/`If-Modified-Since`, and `Vary`. Only `GET` is served and stored; a successful
/// `POST`, `PUT`, `PATCH` or `DELETE` removes what is stored for its URL and for a same-origin
/// `Location` or `Content-Location`. A response without `max-age` or `Expires` is never fresh
/// (no heuristic freshness): it is stored only if it has a validator, and revalidated on every use.
///
/// ### Credentials
/// A response to a request that carries a credential header (`Authorization`, `Cookie`, an API
/// key: any of ``SensitiveHeaders``) is stored only when the response allows it with `public`,
/// `private`, `s-maxage` or `must-revalidate`. A stored response is used only for a request with
/// the same credentials (the entry keeps a SHA-256 digest of them, never the values), unless the
/// server marked it `public` or gave it an `s-maxage` without `private`: any cache may give such
/// a response to anyone (RFC 9111 §3.5), so it is used whatever the credentials. Other credentials
/// than those that fetched it reuse it as a shared cache would: fresh for its `s-maxage` where it
/// has one, and once stale only after the origin answered their own conditional request (with
/// `s-maxage=0`, always). Stored headers leave out `Set-Cookie` and every other credential header
/// (the client's own ``SensitiveHeaders`` included), from a `304` too.
///
/// ### Where it goes in the chain
/// It answers in `intercept`, so behaviors registered before it see a hit like any response
/// (validation, logging, metrics), and behaviors after it, such as retries of the transport's
/// failures, are not run for a hit. Register it after the behaviors that add headers it should
/// key on (`Authorization`, `Accept-Language` for a `Vary`). Each attempt records a
/// ``CacheOutcome`` in the context.
public struct CacheBehavior: AttemptIntercepting {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String
    /// Where responses are kept.
    package let storage: any CacheStorage
    /// The current time, for freshness and ages; injectable for tests.
    package let now: @Sendable () -> Date
    /// The account a request with credentials is made for, when your code names one.
    let account: (@Sendable (HTTPRequest, RequestContext) -> String?)?
    /// How identities are written into the storage (the storage's ``CacheStorage/credentialDigest``).
    let digest: CacheCredentialDigest
    /// Whether private answers are kept per identity (the storage's ``CacheStorage/keepsVariants``).
    let keepsVariants: Bool
    /// The storage, when it coordinates fills across processes.
    let coordinator: (any CacheFillCoordinating)?

    /// Creates the behavior; identities are told apart by their credentials.
    /// - Parameters:
    ///   - storage: Where responses are kept; a ``MemoryCacheStorage`` of 10 MiB by default.
    ///   - now: The current time, for freshness and ages; injectable for tests.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default.
    public init(
        storage: any CacheStorage = MemoryCacheStorage(), now: @escaping @Sendable () -> Date = { Date() },
        name: String? = nil
    ) {
        self.init(storage: storage, now: now, name: name, account: nil)
    }

    /// Creates the behavior, with the account each request is made for.
    ///
    /// ```swift
    /// // The signed-in user's ID, set on each request by the caller:
    /// enum UserID: RequestContextKey { static let defaultValue: String? = nil }
    /// let cache = CacheBehavior(storage: MemoryCacheStorage(), account: { _, context in context[UserID.self] })
    /// // let me = try await client.send(Request<Profile>(path: "/me").setting(UserID.self, to: user.id))
    /// ```
    /// - Parameters:
    ///   - storage: Where responses are kept; a ``MemoryCacheStorage`` of 10 MiB by default.
    ///   - now: The current time, for freshness and ages; injectable for tests.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default.
    ///   - account: The account a request with credentials is made for (a user's ID your session
    ///     knows, a token's subject), or `nil` to tell identities apart by their credentials. Every
    ///     credential of one account then shares the account's private answers: a refreshed token
    ///     keeps them. Called with the request as the cache sees it (credentials added) and its
    ///     context (where `Request.setting(_:to:)` puts what the caller knows). Never called for a
    ///     request without credentials. Name only what the credentials prove: an answer is given
    ///     to any request you name the same account for, without asking the server.
    public init(
        storage: any CacheStorage = MemoryCacheStorage(), now: @escaping @Sendable () -> Date = { Date() },
        name: String? = nil, account: (@Sendable (HTTPRequest, RequestContext) -> String?)?
    ) {
        self.name = name ?? String(describing: Self.self)
        self.storage = storage
        self.now = now
        self.account = account
        digest = storage.credentialDigest
        keepsVariants = storage.keepsVariants
        coordinator = storage as? any CacheFillCoordinating
    }

    /// Answers a `GET` from storage when it can, revalidates a stale entry, stores what may be
    /// stored, and lets an unsafe method remove what is stored for its URL.
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        guard request.method == .get else {
            context[CacheOutcome.self] = .bypassed
            return try await passUnsafe(request, next: next)
        }
        let requestControl = request.headers.contains("Cache-Control") ? CacheControl(request.headers) : CacheControl()
        // A download or streamed response reaches this behavior with an empty body: never kept.
        if requestControl.noStore || context.streamsResponseBody
            || Self.bypassingHeaders.contains(where: request.headers.contains)
        {
            context[CacheOutcome.self] = .bypassed
            return try await next(request)
        }
        let key = Self.key(for: request.url)
        let credentials = identity(of: request, context: context)
        // With variants, one lookup finds the requester's own private entry or else the URL's.
        var stored = await lookUp(request, key: key, credentials: credentials)

        let requestTime = now()
        if let entry = stored, isFresh(entry, at: requestTime, for: requestControl, requester: credentials) {
            context[CacheOutcome.self] = .hit
            return Self.hit(entry, at: requestTime, for: request)
        }
        if requestControl.onlyIfCached {
            context[CacheOutcome.self] = .miss
            return HTTPResponse(status: 504, request: request)  // RFC 9111 §5.2.1.7
        }
        guard let coordinator else {
            return try await exchange(request, key: key, stored: stored, credentials: credentials, control: requestControl,
                context: context, next: next).response
        }
        // Across a fleet, one process fetches what is missing or stale; the others wait for it.
        // A fill that stored nothing this request may use (the origin answered 503, the
        // connection failed) hands the turn on: the waiters ask again and one of them fetches,
        // so the origin is asked one at a time, never by every waiter at once.
        var lease: CacheFillLease?
        var waits = 0
        turns: while true {
            switch await coordinator.beginFill(of: key) {
            case .fill(let taken):
                // Another process may have stored the answer and ended its lease between this
                // request's lookup and its turn: look once more before asking the origin.
                if let filled = await lookUp(request, key: key, credentials: credentials) {
                    let filledTime = now()
                    if isFresh(filled, at: filledTime, for: requestControl, requester: credentials) {
                        await coordinator.endFill(taken, stored: .nothing)
                        context[CacheOutcome.self] = .hit
                        return Self.hit(filled, at: filledTime, for: request)
                    }
                    stored = filled
                }
                lease = taken
                break turns
            case .wait:
                await coordinator.waitForFill(of: key)
                waits += 1
                if let filled = await lookUp(request, key: key, credentials: credentials) {
                    let filledTime = now()
                    if isFresh(filled, at: filledTime, for: requestControl, requester: credentials) {
                        context[CacheOutcome.self] = .hit
                        return Self.hit(filled, at: filledTime, for: request)
                    }
                    stored = filled
                }
                // Cancelled (its deadline passed while it waited), or waited its share: fetch.
                if Task.isCancelled || waits >= Self.fillWaits { break turns }
            case .fetch:
                break turns
            }
        }
        guard let lease else {
            return try await exchange(request, key: key, stored: stored, credentials: credentials, control: requestControl,
                context: context, next: next).response
        }
        let outcome: (response: HTTPResponse, stored: CacheFillResult)
        do {
            outcome = try await exchange(
                request, key: key, stored: stored, credentials: credentials, control: requestControl, context: context,
                next: next)
        } catch {
            await coordinator.endFill(lease, stored: .nothing)
            throw error
        }
        await coordinator.endFill(lease, stored: outcome.stored)
        return outcome.response
    }

    /// How many fills of another process a request waits for before it fetches without a turn:
    /// each wait ends by the other's lease at the latest, and a fill that stores nothing hands
    /// the turn to one of its waiters.
    static let fillWaits = 16

    /// The entry a request may be answered with or revalidate: its identity's own, or the URL's.
    private func lookUp(_ request: HTTPRequest, key: String, credentials: String) async -> CachedResponse? {
        guard let entry = await storage.entry(for: lookupKey(key, credentials)),
            entry.matches(request.headers, credentials: credentials, sensitive: request.sensitiveHeaders, digest: digest)
        else { return nil }
        return entry
    }

    /// A stored entry as the answer to `request`, with its `Age`.
    private static func hit(_ entry: CachedResponse, at now: Date, for request: HTTPRequest) -> HTTPResponse {
        var headers = entry.headers
        headers["Age"] = String(Int(min(entry.age(at: now), Double(CacheControl.maximumDelta))))
        return HTTPResponse(status: entry.status, headers: headers, body: entry.body, request: request)
    }

    /// Sends the request (conditional when `stored` has a validator) and stores what may be
    /// stored. Returns the response and what was stored: under the URL's key (every identity
    /// finds it), under the requester's variant, or nothing.
    private func exchange(
        _ request: HTTPRequest, key: String, stored: CachedResponse?, credentials: String,
        control requestControl: CacheControl, context: RequestContext, next: InterceptNext
    ) async throws -> (response: HTTPResponse, stored: CacheFillResult) {
        let place = Place(key: key, stored: stored.map { storageKey(of: $0, url: key) })
        let requestTime = now()
        var conditional = request
        if let entry = stored {
            if let tag = entry.entityTag { conditional.headers["If-None-Match"] = tag }
            if let date = entry.lastModified { conditional.headers["If-Modified-Since"] = date }
        }
        let response = try await next(conditional)
        let responseTime = now()
        if let entry = stored, entry.hasValidator, response.status == 304 {
            if let tag = response.headers["ETag"], let storedTag = entry.entityTag, tag != storedTag {
                // The 304 is about another representation than ours (RFC 9111 §4.3.4): ours is
                // useless; ask again without conditions.
                if let old = place.stored { await storage.removeEntry(for: old) }
                return try await fetch(
                    request, place: Place(key: key, stored: nil), credentials: credentials, control: requestControl,
                    context: context, next: next)
            }
            let updated = entry.updated(
                with: response.headers, requestTime: requestTime, responseTime: responseTime, requester: credentials,
                sensitive: request.sensitiveHeaders)
            var kept = CacheFillResult.nothing
            if CacheControl(response.headers).noStore {
                if let old = place.stored { await storage.removeEntry(for: old) }
            } else {
                kept = await put(updated, place: place)
            }
            context[CacheOutcome.self] = .revalidated
            let answer = HTTPResponse(status: updated.status, headers: updated.headers, body: updated.body, request: response.request)
            return (answer, kept)
        }
        context[CacheOutcome.self] = .miss
        let kept = await keep(
            response, sentAt: requestTime, receivedAt: responseTime, place: place, credentials: credentials,
            control: requestControl)
        return (response, kept)
    }

    /// Where a request's entry is looked up and stored: the URL's key, and the key the entry the
    /// lookup found lives at (`nil` when none was found).
    struct Place {
        let key: String
        let stored: String?
    }

    /// The identity a request's entry is kept for: a digest of its credentials or of the account
    /// `account` names for it; empty without credentials.
    func identity(of request: HTTPRequest, context: RequestContext) -> String {
        CredentialFingerprint.of(
            request.headers, sensitive: request.sensitiveHeaders, digest: digest,
            account: account.map { name in { name(request, context) } })
    }

    /// The key a lookup for `identity` reads: its variant key when the storage keeps variants
    /// (which answers with the URL's entry when the variant has none), the URL's key otherwise.
    func lookupKey(_ key: String, _ identity: String) -> String {
        keepsVariants && !identity.isEmpty ? Self.variantKey(key, identity) : key
    }

    /// The key `entry` is kept under: its identity's variant key for a private answer when the
    /// storage keeps variants, the URL's key otherwise.
    func storageKey(of entry: CachedResponse, url key: String) -> String {
        keepsVariants && !entry.isShared && !entry.credentials.isEmpty ? Self.variantKey(key, entry.credentials) : key
    }

    /// A variant key: the URL's key, a line feed (never in a URL's key) and the identity.
    static func variantKey(_ key: String, _ identity: String) -> String { key + "\n" + identity }

    /// The URL's key of a variant key (before its line feed); `nil` for a URL's key.
    static func urlKey(of key: String) -> Substring? {
        guard let end = key.utf8.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        return key[..<end]
    }

    /// Stores `entry` where it belongs, as the storage's ``CacheStorage/credentialDigest`` allows.
    /// The entry the request's lookup found is superseded by it wherever it was: under the
    /// requester's variant (a private answer that is now shared: it would hide the new one) or the
    /// URL's key (a shared answer that a `304` made private is no longer anyone's to share).
    @discardableResult
    private func put(_ entry: CachedResponse, place: Place) async -> CacheFillResult {
        guard let entry = Self.allowed(entry, by: digest) else {
            if let old = place.stored { await storage.removeEntry(for: old) }
            return .nothing
        }
        let target = storageKey(of: entry, url: place.key)
        await storage.store(entry, for: target)
        if let old = place.stored, old != target { await storage.removeEntry(for: old) }
        return target == place.key ? .sharedAnswer : .privateAnswer
    }

    /// `entry` as a storage with digests `digest` may keep it: as it is, without its fetcher's
    /// digest (a shared answer, under ``CacheCredentialDigest/none``), or `nil`.
    static func allowed(_ entry: CachedResponse, by digest: CacheCredentialDigest) -> CachedResponse? {
        guard !digest.keepsDigests else { return entry }
        if entry.variesOnACredential { return nil }
        if entry.isShared {
            return entry.credentials == CredentialFingerprint.anyone ? entry : entry.withIdentity(CredentialFingerprint.anyone)
        }
        return entry.credentials.isEmpty ? entry : nil
    }

    /// Sends without conditions and stores the answer if allowed.
    private func fetch(
        _ request: HTTPRequest, place: Place, credentials: String, control: CacheControl, context: RequestContext,
        next: InterceptNext
    ) async throws -> (response: HTTPResponse, stored: CacheFillResult) {
        let requestTime = now()
        let response = try await next(request)
        context[CacheOutcome.self] = .miss
        let kept = await keep(
            response, sentAt: requestTime, receivedAt: now(), place: place, credentials: credentials, control: control)
        return (response, kept)
    }

    /// Stores a response if it may be stored; otherwise removes the entry it supersedes (unless
    /// the response is a server error).
    private func keep(
        _ response: HTTPResponse, sentAt requestTime: Date, receivedAt responseTime: Date, place: Place,
        credentials: String, control: CacheControl
    ) async -> CacheFillResult {
        if let entry = Self.storable(response, credentials: credentials, requestControl: control,
            requestTime: requestTime, responseTime: responseTime, digest: digest)
        {
            return await put(entry, place: place)
        } else if let old = place.stored, response.status != 304, response.status < 500 {
            // A new answer supersedes the entry; a server error says nothing about it.
            await storage.removeEntry(for: old)
        }
        return .nothing
    }

    /// Whether a plain request (no `Cache-Control` of its own) with credentials of digest
    /// `requester` (none by default) would be answered with `entry` at `now`.
    package func isFreshForTesting(_ entry: CachedResponse, at now: Date, requester: String = "") -> Bool {
        isFresh(entry, at: now, for: CacheControl(), requester: requester)
    }

    /// Whether `entry` may answer `requester`'s request without the network. The credentials that
    /// fetched it reuse it as a private cache would (`max-age`); other credentials reuse a shared
    /// entry as a shared cache would (RFC 9111 §3.5): by `s-maxage` where present, and once stale
    /// only after the origin confirmed it to them (this cache never serves a stale answer).
    private func isFresh(_ entry: CachedResponse, at now: Date, for control: CacheControl, requester: String) -> Bool {
        guard !control.noCache, !entry.requiresRevalidation else { return false }
        let age = entry.age(at: now)
        // A request's `max-age=0` asks for validation (what a reload sends), even at age 0.
        if let maxAge = control.maxAge, maxAge == 0 || age > Double(maxAge) { return false }
        let left = entry.freshnessLifetime(for: requester) - age
        return left > Double(control.minFresh ?? 0) && left > 0
    }

    /// Sends an unsafe (or other non-`GET`) request; a success of an unsafe method removes the
    /// stored responses it may have changed (RFC 9111 §4.4). So does a failure with no response,
    /// since the server may have acted on the request before the connection broke.
    private func passUnsafe(_ request: HTTPRequest, next: InterceptNext) async throws -> HTTPResponse {
        let isSafe = [HTTPMethod.head, .options, .trace].contains(request.method)
        guard !isSafe else { return try await next(request) }
        let response: HTTPResponse
        do {
            response = try await next(request)
        } catch {
            await invalidate(request.url, locations: [])
            throw error
        }
        if response.status < 400 {
            await invalidate(request.url, locations: [response.headers["Location"], response.headers["Content-Location"]])
        }
        return response
    }

    /// Removes what is stored for `url` and the same-origin `locations`, for every identity.
    private func invalidate(_ url: URL, locations: [String?]) async {
        await storage.removeVariants(of: Self.key(for: url))
        let origin = Origin(url)
        for location in locations.compactMap({ $0 }) {
            guard let target = URL(string: location, relativeTo: url)?.absoluteURL, origin != nil, Origin(target) == origin
            else { continue }
            await storage.removeVariants(of: Self.key(for: target))
        }
    }

    /// Request headers that mean the caller manages caching itself.
    static let bypassingHeaders = ["If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"]

    /// Statuses stored (RFC 9110 §15.1's heuristically cacheable ones, which covers what a `GET` to
    /// an API meets); they still need explicit freshness or a validator.
    static let storableStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Response headers never stored: credentials (`Set-Cookie` among them) and hop-by-hop fields.
    static func isStoredHeader(_ name: String, sensitive: SensitiveHeaders = .standard) -> Bool {
        !sensitive.contains(name)
            && !["Connection", "Keep-Alive", "Transfer-Encoding", "Proxy-Connection", "Upgrade"].contains {
                HTTPHeaders.namesEqual($0, name)
            }
    }

    /// The storage key of a URL: the URL without its fragment.
    static func key(for url: URL) -> String {
        let string = url.absoluteString
        guard let hash = string.firstIndex(of: "#") else { return string }
        return String(string[..<hash])
    }

    /// The entry to store for a response, or `nil` when it may not (or need not) be stored.
    static func storable(
        _ response: HTTPResponse, credentials: String, requestControl: CacheControl, requestTime: Date,
        responseTime: Date, digest: CacheCredentialDigest = .sha256
    ) -> CachedResponse? {
        guard storableStatuses.contains(response.status), !requestControl.noStore else { return nil }
        let headers = response.headers
        let control = CacheControl(headers)
        guard !control.noStore else { return nil }
        if !credentials.isEmpty {
            // RFC 9111 §3.5 (written for shared caches; applied here to every credential, see
            // Docs/Decisions.md): the server must say the response may be kept.
            guard control.isPublic || control.isPrivate || control.sharedMaxAge != nil || control.mustRevalidate else {
                return nil
            }
        }
        // `public` or `s-maxage` without `private`: the server says any cache may give it to
        // anyone (RFC 9111 §3.5), so every credential may use it (others by `s-maxage`);
        // otherwise only the same ones. `must-revalidate` alone lets it be stored, not shared.
        let identity = control.allowsSharing ? CredentialFingerprint.shared(fetchedBy: credentials) : credentials
        let varied = Vary.names(in: headers)
        guard !varied.contains("*") else { return nil }
        let entry = CachedResponse(
            status: response.status,
            headers: HTTPHeaders(headers.filter { isStoredHeader($0.name, sensitive: response.request.sensitiveHeaders) }),
            body: response.body, requestTime: requestTime, responseTime: responseTime,
            varyValues: varied.map {
                Vary.value(of: $0, in: response.request.headers, sensitive: response.request.sensitiveHeaders, digest: digest)
            },
            credentials: identity)
        // Useful only if it can be fresh, or revalidated.
        guard entry.longestFreshnessLifetime > 0 || entry.hasValidator else { return nil }
        return entry
    }
}
