public import Foundation

/// Where ``CacheBehavior`` keeps responses: one ``CachedResponse`` per key (the cache makes the
/// key from the request's URL; what a request must match besides it travels in the entry).
///
/// A storage that keeps variants (``keepsVariants``) also gets the private answers of each
/// identity under a key of their own (the URL's key, a line feed, and the identity's digest: a
/// *variant key*; a URL's key never holds a line feed), so one user's private answer does not
/// replace another's.
///
/// Conveyor has two: ``MemoryCacheStorage`` (the default, a size-bounded LRU) and
/// ``DiskCacheStorage`` (files in a directory, kept across launches). A storage of your own must
/// be safe to call from many requests at once and must stay bounded; it may drop anything at any
/// time (a cache is allowed to forget). It never throws: a storage that cannot read or write
/// behaves as a miss.
///
/// ```swift
/// actor DictionaryStorage: CacheStorage {
///     var entries: [String: Data] = [:]
///     func entry(for key: String) -> CachedResponse? { entries[key].flatMap(CachedResponse.init(encoded:)) }
///     func store(_ entry: CachedResponse, for key: String) { entries[key] = entry.encoded() }
///     func removeEntry(for key: String) { entries[key] = nil }
///     func removeAll() { entries = [:] }
/// }
/// ```
public protocol CacheStorage: Sendable {
    /// The entry stored for a key, or `nil`.
    /// - Parameter key: The key.
    func entry(for key: String) async -> CachedResponse?
    /// Stores an entry, replacing the key's previous one. A storage may decline (an entry larger
    /// than its bound) and may evict others to make room.
    /// - Parameters:
    ///   - entry: The response to keep.
    ///   - key: The key.
    func store(_ entry: CachedResponse, for key: String) async
    /// Removes the key's entry, if any.
    /// - Parameter key: The key.
    func removeEntry(for key: String) async
    /// Removes every entry (on sign-out, say).
    func removeAll() async

    /// Whether the storage keeps a private answer per identity under a variant key. Such a
    /// storage must do two things more: a lookup of a variant key returns the variant's entry or,
    /// when it has none, the entry of the URL's key (one call: a shared answer is found by the
    /// same lookup), and ``removeVariants(of:)`` removes the URL's entry and every variant of it.
    /// `false` by default: ``CacheBehavior`` then keeps one entry per URL, as before 1.2, and a
    /// private answer for one identity replaces another's.
    var keepsVariants: Bool { get }

    /// Removes the entry of a URL's key and of every variant key made from it (what a `POST` to
    /// the URL removes, for every identity). By default, ``removeEntry(for:)``.
    /// - Parameter key: A URL's key (no line feed).
    func removeVariants(of key: String) async

    /// How ``CacheBehavior`` writes a credential into what this storage keeps: as a SHA-256
    /// digest (the default), a keyed digest, or not at all. A storage that others can read (a
    /// shared database) asks for a keyed digest, so that a reader cannot confirm a guessed
    /// credential by hashing it.
    var credentialDigest: CacheCredentialDigest { get }
}

extension CacheStorage {
    /// `false`: one entry per URL.
    public var keepsVariants: Bool { false }

    /// Removes the key's entry.
    /// - Parameter key: A URL's key.
    public func removeVariants(of key: String) async { await removeEntry(for: key) }

    /// ``CacheCredentialDigest/sha256``.
    public var credentialDigest: CacheCredentialDigest { .sha256 }
}

/// How a credential, or an account a request is made for, is written into a cache's storage:
/// never its value, only a digest that tells identities apart.
public struct CacheCredentialDigest: Sendable, Equatable {
    enum Kind: Equatable {
        case sha256
        case keyed([UInt8])
        case none
    }

    let kind: Kind

    /// SHA-256 of the credentials (a discriminator, not encryption: a guessable secret can be
    /// confirmed by hashing guesses). Right for storage only this process or device reads.
    public static let sha256 = CacheCredentialDigest(kind: .sha256)

    /// HMAC-SHA256 under a secret key: without the key, a digest confirms nothing. Every process
    /// that shares the storage must use the same key, or their private answers never match.
    /// - Parameter key: At least 16 bytes of a secret from your configuration; a shorter key is
    ///   padded by HMAC's own rule, which adds no secrecy.
    public static func keyed(_ key: [UInt8]) -> CacheCredentialDigest { CacheCredentialDigest(kind: .keyed(key)) }

    /// No digest is kept: a private answer is not stored, an answer any credentials may use is
    /// stored without who fetched it (everyone, its fetcher too, reuses it by a shared cache's
    /// rules), and an answer that varies on a credential header is not stored.
    public static let none = CacheCredentialDigest(kind: .none)

    /// Whether a digest is kept at all.
    var keepsDigests: Bool { kind != .none }

    /// The digest of `text`: 64 hex digits for SHA-256, `hmac:` and 64 hex digits keyed. For
    /// ``none``, the SHA-256 digest (kept in memory only, to tell requests apart).
    func digest(_ text: String) -> String {
        switch kind {
        case .sha256, .none: SHA256.hex(text)
        case .keyed(let key): "hmac:" + SHA256.hexString(SHA256.hmac(key: key, message: Array(text.utf8)))
        }
    }
}

/// A storage several processes share that lets one of them fetch a missing or stale answer while
/// the others wait for it, instead of every process asking the origin at once (a cold entry, or
/// one that expires under load, across a fleet). ``CacheBehavior`` asks for a turn before it
/// sends a `GET` it would store, by the URL's key: with ``CacheFillTurn/fill(_:)`` it fetches,
/// stores and calls ``endFill(_:stored:)``; with ``CacheFillTurn/wait`` it calls
/// ``waitForFill(of:)``, looks the entry up again, and if the wait brought nothing it may use (the
/// filler's exchange failed, or its answer may not be kept) asks for the turn again, so that one
/// of the waiters fetches next and the others wait once more (after 16 waits it fetches without a
/// turn); with ``CacheFillTurn/fetch`` it fetches at once.
///
/// A lease must end on its own (a process that took one may die): a storage bounds it in time,
/// and ``waitForFill(of:)`` returns by then at the latest. None of the three ever throws: a
/// storage that cannot coordinate says ``CacheFillTurn/fetch``.
public protocol CacheFillCoordinating: CacheStorage {
    /// Asks for the turn to fetch the answer for a URL's key.
    /// - Parameter key: A URL's key.
    func beginFill(of key: String) async -> CacheFillTurn
    /// Ends a lease this process holds: its answer is stored, or nothing is. Waiting processes
    /// then look the entry up.
    /// - Parameters:
    ///   - lease: The lease ``beginFill(of:)`` gave.
    ///   - stored: What was stored. After a private answer (which other identities could not
    ///     use), a storage may say ``CacheFillTurn/fetch`` for the URL for a while, so that the
    ///     requests of other identities do not wait for the next one.
    func endFill(_ lease: CacheFillLease, stored: CacheFillResult) async
    /// Waits until another process's lease on the key has ended: released, or expired. Returns
    /// at once when the storage cannot tell, and by the lease's end at the latest.
    /// - Parameter key: A URL's key.
    func waitForFill(of key: String) async
}

/// What ``CacheFillCoordinating/beginFill(of:)`` answers.
public enum CacheFillTurn: Sendable, Equatable {
    /// This process fetches; end the lease with ``CacheFillCoordinating/endFill(_:stored:)``.
    case fill(CacheFillLease)
    /// Another process is fetching: wait for it, then look the entry up again.
    case wait
    /// Fetch without a lease (no coordination for this URL now).
    case fetch
}

/// What a filler stored, for ``CacheFillCoordinating/endFill(_:stored:)``.
public enum CacheFillResult: Sendable, Equatable {
    /// An answer every identity finds (under the URL's key).
    case sharedAnswer
    /// An answer for the filler's identity alone.
    case privateAnswer
    /// Nothing: the exchange failed, or its answer may not be kept.
    case nothing
}

/// A lease on fetching one URL's answer.
public struct CacheFillLease: Sendable, Hashable {
    /// The URL's key.
    public let key: String
    /// Who holds it: unique per lease.
    public let holder: UUID

    /// Creates a lease for a storage's own bookkeeping.
    /// - Parameters:
    ///   - key: The URL's key.
    ///   - holder: Unique per lease.
    public init(key: String, holder: UUID) {
        self.key = key
        self.holder = holder
    }
}
