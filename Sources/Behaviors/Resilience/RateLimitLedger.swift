/// Where the instances of a fleet take their share of one ``RateLimiter/Quota``: a ledger they all
/// read and write (a table of a database), so that their sends **together** stay within the
/// quota. A ``RateLimiter`` made with a ledger asks it for a *grant* of several sends at a time and
/// spends them locally, so the ledger is not on every request's path.
///
/// The contract a ledger keeps (Docs/Resilience.md, "One quota for a fleet"):
/// - **Never more than the quota.** A grant's sends are made within ``RateLimitGrant/validFor``
///   of the moment the limiter asked for it; the ledger counts a grant from the moment it made
///   it until `period + validFor` later, and grants only what leaves the count at or under
///   `requests`. Then any period holds at most `requests` sends of the whole fleet, whatever
///   window the upstream counts in.
/// - **An answer in bounded time.** A ledger that cannot be reached answers
///   ``RateLimitGrant/unavailable(retryAfter:)`` within its own timeout, never hangs.
/// - **Unused sends come back.** ``giveBack(_:of:for:)`` subtracts sends of a grant that were not,
///   and will not be, made.
///
/// `ConveyorPostgres`'s `PostgresRateLimitLedger` keeps the ledger in PostgreSQL.
public protocol RateLimitLedger: Sendable {
    /// Grants up to `wanted` sends of `quota` for `key` (fewer, or none, when the quota has less
    /// room), each to be made within the grant's ``RateLimitGrant/validFor`` of this call's start.
    /// - Parameters:
    ///   - wanted: How many sends the limiter would like (at least 1).
    ///   - quota: The fleet's quota (every instance should be given the same).
    ///   - key: What the quota is for: the limiter's origin (`https://api.example.com:443`).
    /// - Returns: The grant; ``RateLimitGrant/exhausted(retryAfter:)`` when the quota has no room,
    ///   ``RateLimitGrant/unavailable(retryAfter:)`` when the ledger could not be asked.
    func grant(_ wanted: Int, of quota: RateLimiter.Quota, for key: String) async -> RateLimitGrant

    /// Gives back `unused` sends of `grant`: sends that were not made and never will be (the
    /// grant expired first).
    /// - Parameters:
    ///   - unused: How many of the grant's sends were not made (1…`grant.permits`).
    ///   - grant: A grant this ledger made for `key`.
    ///   - key: The key it was made for.
    func giveBack(_ unused: Int, of grant: RateLimitGrant, for key: String) async
}

/// What a ``RateLimitLedger`` granted: a number of sends to make within a time, none until a
/// time, or no answer.
public struct RateLimitGrant: Sendable, Hashable {
    /// How many sends are granted (0 when none are).
    public var permits: Int
    /// How long after the request for the grant began its sends may be made.
    public var validFor: Duration
    /// When nothing is granted: how long until the quota may have room, or until the ledger is
    /// worth asking again.
    public var retryAfter: Duration
    /// Whether the ledger answered (`false`: it could not be reached in time).
    public var isAvailable: Bool
    /// The ledger's own name for the grant, given back to ``RateLimitLedger/giveBack(_:of:for:)``.
    public var id: String

    /// A grant of `permits` sends to make within `validFor`.
    /// - Parameters:
    ///   - permits: How many sends (at least 1).
    ///   - validFor: How long after the request for the grant began they may be made.
    ///   - id: The ledger's name for the grant.
    public init(permits: Int, validFor: Duration, id: String) {
        self.permits = max(0, permits)
        self.validFor = max(.zero, validFor)
        self.retryAfter = .zero
        self.isAvailable = true
        self.id = id
    }

    /// Nothing granted: the quota has no room for `retryAfter`.
    /// - Parameter retryAfter: How long until a grant made now leaves the count.
    public static func exhausted(retryAfter: Duration) -> RateLimitGrant {
        var grant = RateLimitGrant(permits: 0, validFor: .zero, id: "")
        grant.retryAfter = max(.zero, retryAfter)
        return grant
    }

    /// No answer: the ledger could not be reached; worth asking again after `retryAfter`.
    /// - Parameter retryAfter: How long until the ledger is worth asking again.
    public static func unavailable(retryAfter: Duration) -> RateLimitGrant {
        var grant = exhausted(retryAfter: retryAfter)
        grant.isAvailable = false
        return grant
    }
}
