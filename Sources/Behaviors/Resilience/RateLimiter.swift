public import ConveyorPipeline
public import Foundation

/// Keeps every origin's requests within its quota: the one the origin announces in its answers,
/// and one you set for a quota it does not announce. Shared by the ``RateLimitBehavior``s given it.
///
/// **Announced quotas.** After each answer, the limiter reads what the origin said about its
/// quota (`RateLimit`, `RateLimit-Remaining`/`-Reset`, `X-RateLimit-Remaining`/`-Reset`, and
/// `Retry-After` on a `429` or `503`) and holds the origin's next requests to it: while requests
/// remain they go at once; once none remain, the next wait until the count starts again. The
/// count is the server's less the attempts still in flight (the server may not have counted them
/// yet), so the limiter errs on the side of sending less.
///
/// **Your quota.** ``Quota`` allows at most `requests` sends in any `period` (a sliding log, so
/// the quota holds whatever window the server counts in, fixed or sliding).
///
/// **A fleet's quota.** ``init(sharedQuota:ledger:fallbackQuota:honorsAnnouncedLimits:maxWait:maxOrigins:clock:now:)``
/// holds every instance that shares a ``RateLimitLedger`` to one quota together: the limiter
/// takes grants of several sends from the ledger and spends them locally.
///
/// A request that would have to wait longer than ``maxWait``, or past its attempt's timeout,
/// fails at once with ``NetworkError/rateLimited``, whose `retryAfter` says when a request may go.
///
/// ```swift
/// let github = RateLimiter(quota: .init(5_000, per: .seconds(3_600)))
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     RateLimitBehavior(github)
/// }
/// ```
public final class RateLimiter: Sendable {
    /// At most ``requests`` sends in any ``period``, per origin.
    public struct Quota: Sendable, Hashable {
        /// How many sends a period allows (1…100,000).
        public var requests: Int
        /// The period (10 ms … a day).
        public var period: Duration

        /// Creates a quota (out-of-range values are clamped: `requests` to 1…100,000, the period
        /// to 10 ms … a day).
        /// - Parameters:
        ///   - requests: How many sends a period allows.
        ///   - period: The period.
        public init(_ requests: Int, per period: Duration) {
            self.requests = min(max(1, requests), 100_000)
            self.period = min(max(period, .milliseconds(10)), .seconds(86_400))
        }
    }

    /// What the limiter knows of an origin now.
    public struct Snapshot: Sendable, Hashable {
        /// How many more requests the origin's last answer allows before its count starts again
        /// (less those sent since), or `nil` when it announced nothing that still holds.
        public var announcedRemaining: Int?
        /// How long until the announced count starts again, or `nil`.
        public var announcedReset: Duration?
        /// Sends counted against ``RateLimiter/quota`` in its last period (waiting ones included).
        public var sentInPeriod: Int
        /// Attempts sent and not yet answered.
        public var inFlight: Int
        /// Attempts the limiter held back before sending, since it was created.
        public var paced: Int
        /// Attempts the limiter failed with ``NetworkError/rateLimited``, since it was created.
        public var refused: Int
        /// Sends of the ledger's last grant not made yet (0 without a ledger, or once it expired).
        public var heldPermits: Int = 0
    }

    /// Your quota for each origin, if any (announced quotas apply with or without it); with a
    /// ``ledger``, the quota of every instance that shares it, together.
    public let quota: Quota?
    /// The ledger the instances of a fleet share ``quota`` through, or `nil` (the quota is this
    /// limiter's own).
    public let ledger: (any RateLimitLedger)?
    /// While the ledger cannot be reached: the quota this instance holds itself to alone (its
    /// share), or `nil` to refuse every attempt that needs a send of the ledger.
    public let fallbackQuota: Quota?
    /// `ledger != nil`, kept apart: reading the existential on every attempt costs a retain and a
    /// release.
    let sharesQuota: Bool
    /// Whether the quotas origins announce are followed: `true`.
    public let honorsAnnouncedLimits: Bool
    /// The longest a request waits for its turn: 10 s. A longer wait fails it at once.
    public let maxWait: Duration
    /// The most origins kept: 1,024 (one idle longest is forgotten first).
    public let maxOrigins: Int
    let elapsed: any Stopwatch
    let clock: any Clock<Duration>
    let now: @Sendable () -> Date
    let maxWaitNanoseconds: Int64
    let accounts = Locked<OriginRecords<Account>>(OriginRecords())

    /// Creates a limiter.
    /// - Parameters:
    ///   - quota: Your quota per origin, for one the server does not announce; `nil` (the default)
    ///     follows only what origins announce.
    ///   - honorsAnnouncedLimits: Whether the quotas origins announce are followed.
    ///   - maxWait: The longest a request waits for its turn (clamped to 0 … a day).
    ///   - maxOrigins: The most origins kept.
    ///   - clock: The clock waits are measured and slept on; tests inject a `ManualClock`.
    ///   - now: The current time, for a reset given as a date or a Unix time.
    public convenience init(
        quota: Quota? = nil, honorsAnnouncedLimits: Bool = true, maxWait: Duration = .seconds(10),
        maxOrigins: Int = 1_024, clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(
            quota: quota, ledger: nil, fallbackQuota: nil, honorsAnnouncedLimits: honorsAnnouncedLimits,
            maxWait: maxWait, maxOrigins: maxOrigins, clock: clock, now: now)
    }

    /// Creates a limiter that holds every instance sharing `ledger` to `sharedQuota` together: it
    /// takes grants of several sends from the ledger (at most an eighth of the quota each, more
    /// while it spends them all) and spends them locally; what it was granted and did not send
    /// before the grant expired, it gives back.
    ///
    /// ```swift
    /// let ledger = try PostgresRateLimitLedger(client: database, name: "github")  // ConveyorPostgres
    /// let github = RateLimiter(sharedQuota: .init(5_000, per: .seconds(3_600)), ledger: ledger)
    /// ```
    /// - Parameters:
    ///   - sharedQuota: The quota of the whole fleet, per origin (give every instance the same).
    ///   - ledger: Where the instances take their grants.
    ///   - fallbackQuota: While the ledger cannot be reached, this instance's own quota (its share
    ///     of `sharedQuota`), or `nil` (the default) to refuse what needs a grant until it answers.
    ///   - honorsAnnouncedLimits: Whether the quotas origins announce are followed too.
    ///   - maxWait: The longest a request waits for its turn (clamped to 0 … a day).
    ///   - maxOrigins: The most origins kept.
    ///   - clock: The clock waits and a grant's validity are measured on.
    ///   - now: The current time, for a reset given as a date or a Unix time.
    public convenience init(
        sharedQuota: Quota, ledger: any RateLimitLedger, fallbackQuota: Quota? = nil,
        honorsAnnouncedLimits: Bool = true, maxWait: Duration = .seconds(10), maxOrigins: Int = 1_024,
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(
            quota: sharedQuota, ledger: ledger, fallbackQuota: fallbackQuota,
            honorsAnnouncedLimits: honorsAnnouncedLimits, maxWait: maxWait, maxOrigins: maxOrigins, clock: clock,
            now: now)
    }

    private init(
        quota: Quota?, ledger: (any RateLimitLedger)?, fallbackQuota: Quota?, honorsAnnouncedLimits: Bool,
        maxWait: Duration, maxOrigins: Int, clock: any Clock<Duration>, now: @escaping @Sendable () -> Date
    ) {
        self.quota = quota
        self.ledger = ledger
        self.sharesQuota = ledger != nil
        self.fallbackQuota = fallbackQuota
        self.honorsAnnouncedLimits = honorsAnnouncedLimits
        self.maxWait = min(maxWait.clampedForConveyor, .seconds(86_400))
        self.maxWaitNanoseconds = self.maxWait.nanoseconds
        self.maxOrigins = max(1, maxOrigins)
        self.clock = clock
        self.elapsed = startStopwatch(on: clock)
        self.now = now
    }

    /// What the limiter knows of `origin` now.
    /// - Parameter origin: The origin.
    public func snapshot(for origin: Origin) -> Snapshot {
        let now = elapsed.nanoseconds()
        return accounts.withLock { accounts in
            guard let account = accounts[origin] else {
                return Snapshot(sentInPeriod: 0, inFlight: 0, paced: 0, refused: 0)
            }
            let announced = account.announced.flatMap { $0.resetAt > now ? $0 : nil }
            let period = quota.map { $0.period.nanoseconds } ?? 0
            let fallback = fallbackQuota.map { $0.period.nanoseconds } ?? 0
            return Snapshot(
                announcedRemaining: announced?.remaining,
                announcedReset: announced.map { .nanoseconds($0.resetAt - now) },
                sentInPeriod: account.sends.filter { $0 > now - (sharesQuota ? fallback : period) }.count,
                inFlight: account.inFlight, paced: account.paced, refused: account.refused,
                heldPermits: now < account.permitsUntil ? account.permits : 0)
        }
    }

    /// Takes a turn for one attempt to `origin`, without waiting, and returns the account to
    /// ``finish(_:status:headers:)`` it in.
    /// - Parameters:
    ///   - origin: The origin.
    ///   - within: The longest the attempt may wait besides ``maxWait`` (its timeout's rest); asked
    ///     only when the turn is not now.
    /// - Returns: How long the attempt must wait before it is sent (zero: at once), its account,
    /// and whether it must then get a send of the ledger (``permit(_:after:within:)``).
    /// - Throws: ``NetworkError/rateLimited`` when the turn is further away than it may wait.
    package func take(_ origin: Origin, within: () -> Duration?) throws(NetworkError)
        -> (wait: Duration, account: Account, needsPermit: Bool)
    {
        // An origin always gives an account.
        try take(context: nil, origin: origin, within: within) ?? (.zero, Account(origin), false)
    }

    /// ``take(_:within:)`` for the request of `context` (found by its client's scope, else its
    /// origin), or without one for `origin`; `nil` for a request with no origin.
    @inline(__always)
    func take(context: RequestContext?, origin: Origin? = nil, within: () -> Duration?) throws(NetworkError)
        -> (wait: Duration, account: Account, needsPermit: Bool)?
    {
        let now = elapsed.nanoseconds()
        let taken: (Turn, Account)? = accounts.withLock { accounts in
            let account: Account
            switch accounts.find(context: context, origin: origin) {
            case .found(let found):
                account = found
            case .missing(let origin):
                if accounts.count >= maxOrigins { evict(&accounts) }
                account = Account(origin)
                accounts.insert(account, for: origin, context: context)
            case .noOrigin:
                return nil
            }
            // The attempt's own deadline is read only when its turn is not now (it costs a lock).
            let longest = { within().map { min(self.maxWaitNanoseconds, $0.nanoseconds) } ?? self.maxWaitNanoseconds }
            guard sharesQuota else { return (account.take(at: now, longest: longest, quota: quota), account) }
            // With a ledger: the origin's announcements as before, then a send of the last grant
            // when the attempt goes now and one is left; otherwise it gets one when its turn comes.
            let turn = account.take(at: now, longest: longest, quota: nil)
            guard case .send(let at) = turn else { return (turn, account) }
            return (at == now && account.spendPermit(at: now) ? turn : .permit(at: at), account)
        }
        guard let (decision, account) = taken else { return nil }
        switch decision {
        case .refuse(let wait):
            throw NetworkError.rateLimited(origin: account.originText, retryAfter: .nanoseconds(wait))
        case .send(let at):
            return (at > now ? .nanoseconds(at - now) : .zero, account, false)
        case .permit(let at):
            return (at > now ? .nanoseconds(at - now) : .zero, account, true)
        }
    }

    /// What ``permit(_:after:within:)`` does next, decided under the lock.
    private enum PermitStep {
        /// A send of the grant was taken.
        case spent
        /// Wait for the grant asked for (by this attempt or another).
        case refill(Task<Void, Never>)
        /// The quota has no room until then.
        case noRoom(until: Int64)
        /// The ledger cannot be reached until then, and there is no fallback quota.
        case unreachable(until: Int64)
        /// The ledger cannot be reached: sent by the fallback quota at that time (logged).
        case fallback(at: Int64)
        /// The ledger cannot be reached, and the fallback quota's turn is this far away: too far.
        case fallbackRefused(wait: Int64)
    }

    /// After waiting `wait` (the origin's announced turn), gets the attempt a send of the ledger:
    /// one of the last grant, or of a new one asked for by one attempt for all that wait for it;
    /// when the quota has no room, waits until it may (within `within`, and ``maxWait``).
    /// - Returns: How long the attempt waited in all.
    /// - Throws: ``NetworkError/rateLimited`` when the quota has no room within what it may wait
    ///   (or the ledger cannot be reached and there is no ``fallbackQuota``), ``NetworkError``'s
    ///   cancellation when cancelled; either way the attempt is no longer in flight.
    package func permit(_ account: Account, after wait: Duration, within: Duration?) async throws(NetworkError)
        -> Duration
    {
        guard let ledger, let quota else { return wait }
        let longest = within.map { min(maxWaitNanoseconds, $0.nanoseconds) } ?? maxWaitNanoseconds
        var waited = wait.nanoseconds
        accounts.withLock { _ in account.permitWaiters += 1 }
        defer { accounts.withLock { _ in account.permitWaiters -= 1 } }
        do {
            if wait > .zero { try await TimerSleep.sleep(for: wait, on: clock) }
            while true {
                let now = elapsed.nanoseconds()
                let step: PermitStep = accounts.withLock { _ in
                    if account.spendPermit(at: now) { return .spent }
                    if now < account.unreachableUntil {
                        guard let fallbackQuota else { return .unreachable(until: account.unreachableUntil) }
                        // Found and logged under one lock: two attempts never take one turn.
                        let at = account.earliestSend(at: now, quota: fallbackQuota)
                        guard waited + (at - now) <= longest else { return .fallbackRefused(wait: at - now) }
                        account.logSend(at: at, quota: fallbackQuota)
                        return .fallback(at: at)
                    }
                    if now < account.noRoomUntil { return .noRoom(until: account.noRoomUntil) }
                    if let refill = account.refill { return .refill(refill) }
                    // Twice what the grant it replaces spent: more while all is spent, less when it expires unspent.
                    let spent = account.grant == nil ? 0 : account.spentOfGrant
                    let wanted = min(max(1, quota.requests / 8), max(1, account.permitWaiters, 2 * spent))
                    let refill = Task { await self.refill(account, wanted: wanted, quota: quota, ledger: ledger) }
                    account.refill = refill
                    return .refill(refill)
                }
                switch step {
                case .spent:
                    if waited > 0 { accounts.withLock { _ in account.paced += 1 } }
                    return .nanoseconds(waited)
                case .refill(let refill):
                    await refill.value
                    try Task.checkCancellation()
                case .noRoom(let until):
                    guard waited + (until - now) <= longest else { throw refusal(account, wait: until - now) }
                    try await TimerSleep.sleep(for: .nanoseconds(until - now), on: clock)
                    waited += until - now
                case .unreachable(let until):
                    throw refusal(account, wait: until - now)
                case .fallbackRefused(let wait):
                    throw refusal(account, wait: wait)
                case .fallback(let at):
                    if at > now { try await TimerSleep.sleep(for: .nanoseconds(at - now), on: clock) }
                    waited += at - now
                    if waited > 0 { accounts.withLock { _ in account.paced += 1 } }
                    return .nanoseconds(waited)
                }
            }
        } catch let error as NetworkError {
            throw error
        } catch {
            // Cancelled while waiting: no longer in flight.
            finish(account, status: nil, headers: nil)
            throw NetworkError(transportError: error)
        }
    }

    /// Refuses an attempt that was taken: counted, no longer in flight.
    private func refusal(_ account: Account, wait: Int64) -> NetworkError {
        accounts.withLock { _ in
            account.refused += 1
            account.inFlight = max(0, account.inFlight - 1)
        }
        return NetworkError.rateLimited(origin: account.originText, retryAfter: .nanoseconds(max(0, wait)))
    }

    /// Asks the ledger for a grant for `account` and keeps what it answered; gives back what the
    /// expired grant it replaces did not spend.
    private func refill(_ account: Account, wanted: Int, quota: Quota, ledger: any RateLimitLedger) async {
        let started = elapsed.nanoseconds()
        let grant = await ledger.grant(wanted, of: quota, for: account.originText)
        let now = elapsed.nanoseconds()
        let unused: (grant: RateLimitGrant, count: Int)? = accounts.withLock { _ in
            account.refill = nil
            guard grant.isAvailable else {
                account.unreachableUntil = now &+ max(1_000_000, grant.retryAfter.nanoseconds)
                return nil
            }
            account.unreachableUntil = 0
            guard grant.permits > 0 else {
                account.noRoomUntil = now &+ max(1_000_000, grant.retryAfter.nanoseconds)
                return nil
            }
            let unused = account.grant.flatMap { account.permits > 0 ? ($0, account.permits) : nil }
            account.grant = grant
            account.permits = grant.permits
            account.spentOfGrant = 0
            // Counted from before the ledger was asked: its sends are made within `validFor` of
            // the moment the ledger counts the grant from, or sooner.
            account.permitsUntil = started &+ grant.validFor.nanoseconds
            return unused
        }
        if let unused { await ledger.giveBack(unused.count, of: unused.grant, for: account.originText) }
    }

    /// Sleeps until a turn ``take(_:within:)`` gave; cancelled, the attempt is no longer in flight.
    package func wait(_ wait: Duration, account: Account) async throws {
        do {
            try await TimerSleep.sleep(for: wait, on: clock)
        } catch {
            // Cancelled while waiting: its turn stays taken (the quota errs on the side of
            // sending less); it is no longer in flight.
            finish(account, status: nil, headers: nil)
            throw error
        }
    }

    /// Ends an attempt in the account ``take(_:within:)`` returned: no longer in flight, and what
    /// the origin announced (its status and headers, when it answered) is learned.
    package func finish(_ account: Account, status: Int?, headers: HTTPHeaders?) {
        var announced: AnnouncedRateLimit?
        if honorsAnnouncedLimits, let status, let headers, !headers.isEmpty {
            announced = AnnouncedRateLimit.parse(status: status, headers: headers, now: self.now())
        }
        guard let announced else {
            accounts.withLock { _ in account.inFlight = max(0, account.inFlight - 1) }
            return
        }
        let now = elapsed.nanoseconds()
        accounts.withLock { _ in
            account.inFlight = max(0, account.inFlight - 1)
            account.learn(announced, at: now)
        }
    }

    /// Makes room for one origin: the one used longest ago with nothing in flight goes.
    private func evict(_ accounts: inout OriginRecords<Account>) {
        let idle = accounts.all.filter { $0.value.inFlight == 0 }.min { $0.value.lastUsed < $1.value.lastUsed }
        if let origin = idle?.key ?? accounts.all.keys.first { accounts[origin] = nil }
    }

    /// What ``Account/take(at:longest:quota:)`` decided.
    enum Turn: Equatable {
        /// Send at this time (now or later).
        case send(at: Int64)
        /// Do not send: the turn is this far away.
        case refuse(wait: Int64)
        /// Send at this time, with a send of the ledger's (taken then).
        case permit(at: Int64)
    }

    /// One origin's counts. Its fields are read and written only under the limiter's lock.
    package final class Account: @unchecked Sendable {
        // @unchecked: every field is only touched under the owning limiter's `accounts` lock.
        /// The origin this account is for.
        let origin: Origin
        /// `origin.description`, made once: every refusal names it (formatting it per refusal
        /// cost the failing-fast path 700 instructions).
        let originText: String
        /// The times of the last sends against the quota (up to its `requests`), oldest at
        /// `oldest` once full; never decreasing, since each is at least the one before.
        var sends: [Int64] = []
        var oldest = 0
        /// What the origin last announced, with the time its count starts again and how many
        /// attempts already wait for that time.
        var announced: (remaining: Int, resetAt: Int64, limit: Int?, waitingForReset: Int)?
        var inFlight = 0
        var paced = 0
        var refused = 0
        var lastUsed: Int64 = 0
        /// With a ledger: its last grant, the sends of it left and until when they may be made,
        /// and how many of it were spent.
        var grant: RateLimitGrant?
        var permits = 0
        var permitsUntil: Int64 = 0
        var spentOfGrant = 0
        /// The grant being asked for, the attempts waiting for a send, and until when the ledger
        /// said the quota has no room or could not be reached.
        var refill: Task<Void, Never>?
        var permitWaiters = 0
        var noRoomUntil: Int64 = 0
        var unreachableUntil: Int64 = 0

        /// The time an attempt may be sent at: the later of the quota's and the announcement's.
        init(_ origin: Origin) {
            self.origin = origin
            self.originText = origin.description
        }

        /// Takes a turn at `now`; `longest` (how far the turn may be) is asked only when it is not now.
        func take(at now: Int64, longest: () -> Int64, quota: Quota?) -> Turn {
            lastUsed = max(lastUsed, now)
            var at = now
            if let quota { at = earliestSend(at: now, quota: quota) }
            var waitsForReset = false
            if var announced {
                if now >= announced.resetAt {
                    self.announced = nil
                } else if announced.remaining > 0 {
                    announced.remaining -= 1
                    self.announced = announced
                } else if let limit = announced.limit, announced.waitingForReset >= limit {
                    // The next window is full too, and when it ends is unknown: do not send.
                    refused += 1
                    return .refuse(wait: announced.resetAt - now)
                } else {
                    at = max(at, announced.resetAt)
                    waitsForReset = true
                }
            }
            if at > now, at - now > longest() {
                if !waitsForReset, var announced, now < announced.resetAt {
                    announced.remaining += 1  // give back the turn taken above
                    self.announced = announced
                }
                refused += 1
                return .refuse(wait: at - now)
            }
            if waitsForReset { self.announced?.waitingForReset += 1 }
            if let quota { logSend(at: at, quota: quota) }
            if at > now { paced += 1 }
            inFlight += 1
            return .send(at: at)
        }

        /// The earliest time at or after `now` a send keeps `quota` (by the sliding log).
        func earliestSend(at now: Int64, quota: Quota) -> Int64 {
            guard sends.count >= quota.requests, !sends.isEmpty else { return now }
            return max(now, sends[oldest] &+ quota.period.nanoseconds)
        }

        /// Logs a send at `at` against `quota`.
        func logSend(at: Int64, quota: Quota) {
            if sends.count < quota.requests {
                sends.append(at)
            } else if !sends.isEmpty {
                sends[oldest] = at
                oldest = (oldest + 1) % sends.count
            }
        }

        /// Takes a send of the ledger's last grant, if one is left and it has not expired.
        func spendPermit(at now: Int64) -> Bool {
            guard permits > 0, now < permitsUntil else { return false }
            permits -= 1
            spentOfGrant += 1
            return true
        }

        /// Follows what an answer announced: its count, less the attempts still in flight.
        func learn(_ announced: AnnouncedRateLimit, at now: Int64) {
            let resetAt = now &+ announced.reset.nanoseconds
            let waiting = self.announced.map { abs($0.resetAt - resetAt) < 1_000_000_000 ? $0.waitingForReset : 0 } ?? 0
            self.announced = (max(0, announced.remaining - inFlight), resetAt, announced.limit, waiting)
        }
    }
}

/// Holds each attempt to its origin's quota with a ``RateLimiter``: the quota the origin
/// announces (`RateLimit`, `X-RateLimit-*`, `Retry-After` on a `429`/`503`) and the one you set.
///
/// An `intercept` member: it runs per attempt, so a retry takes a turn like any request (the
/// server counts it too). An attempt waits for its turn on the limiter's clock, within the
/// attempt's timeout; one whose turn is further away than ``RateLimiter/maxWait`` or its timeout
/// fails at once with ``NetworkError/rateLimited``, which no ``RetryBehavior`` retries. Put it
/// after ``RetryBehavior`` and before ``CircuitBreakerBehavior``.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     RateLimitBehavior(RateLimiter(quota: .init(100, per: .seconds(60))))
/// }
/// ```
public struct RateLimitBehavior: AttemptIntercepting, AttemptGating {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String
    /// The quotas this behavior holds attempts to.
    public let limiter: RateLimiter

    /// Creates the behavior.
    /// - Parameters:
    ///   - limiter: The quotas; pass one instance to several clients to share them.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions.
    public init(_ limiter: RateLimiter = RateLimiter(), name: String? = nil) {
        self.name = name ?? String(describing: Self.self)
        self.limiter = limiter
    }

    /// Waits for the attempt's turn (or fails it at once), sends it, and reads the quota its
    /// answer announces.
    /// The engine runs this behavior at the transport's door (a gate), next to the transport.
    public static var _declaredHooks: UInt16 { HookBits.gates | HookBits.intercept }

    /// Waits for the attempt's turn (or fails it at once when the turn is too far), sends it, and
    /// learns what the origin announces. (The engine does the same without calling this: a
    /// client's chain admits and counts each exchange at the transport's door.)
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await exchange(request, context: context, next: next)
    }

    package func admit(_ request: HTTPRequest, context: RequestContext) throws(NetworkError) -> GatePass {
        guard let (wait, account, needsPermit) = try limiter.take(context: context, within: { context.attemptTimeRemaining })
        else { return .uncounted }
        guard wait > .zero || needsPermit else { return GatePass(record: account) }
        return GatePass(record: account, number: wait.nanoseconds, flag: needsPermit, waits: true)
    }

    package func waitForTurn(_ pass: GatePass, context: RequestContext) async throws(NetworkError) -> GatePass {
        guard let account = pass.record as? RateLimiter.Account else { return pass }
        let wait = Duration.nanoseconds(pass.number)
        if pass.flag {
            let waited = try await limiter.permit(account, after: wait, within: context.attemptTimeRemaining)
            if waited > .zero { context.notePaced(waited) }
            return GatePass(record: account)
        }
        do {
            try await limiter.wait(wait, account: account)
        } catch {
            throw NetworkError(transportError: error)
        }
        context.notePaced(wait)
        return GatePass(record: account)
    }

    package func release(_ pass: GatePass, answered response: HTTPResponse, context: RequestContext) {
        guard let account = pass.record as? RateLimiter.Account else { return }
        limiter.finish(account, status: response.status, headers: response.headers)
    }

    package func release(_ pass: GatePass, failed failure: NetworkError, context: RequestContext) {
        guard let account = pass.record as? RateLimiter.Account else { return }
        let head = failure.responseHead
        limiter.finish(account, status: head?.status, headers: head?.headers)
    }
}
