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
    }

    /// Your quota for each origin, if any (announced quotas apply with or without it).
    public let quota: Quota?
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
    public init(
        quota: Quota? = nil, honorsAnnouncedLimits: Bool = true, maxWait: Duration = .seconds(10),
        maxOrigins: Int = 1_024, clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.quota = quota
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
            return Snapshot(
                announcedRemaining: announced?.remaining,
                announcedReset: announced.map { .nanoseconds($0.resetAt - now) },
                sentInPeriod: account.sends.filter { $0 > now - period }.count,
                inFlight: account.inFlight, paced: account.paced, refused: account.refused)
        }
    }

    /// Takes a turn for one attempt to `origin`, without waiting, and returns the account to
    /// ``finish(_:status:headers:)`` it in.
    /// - Parameters:
    ///   - origin: The origin.
    ///   - within: The longest the attempt may wait besides ``maxWait`` (its timeout's rest); asked
    ///     only when the turn is not now.
    /// - Returns: How long the attempt must wait before it is sent (zero: at once), and its account.
    /// - Throws: ``NetworkError/rateLimited`` when the turn is further away than it may wait.
    package func take(_ origin: Origin, within: () -> Duration?) throws(NetworkError) -> (wait: Duration, account: Account) {
        let now = elapsed.nanoseconds()
        let (decision, account): (Turn, Account) = accounts.withLock { accounts in
            let account: Account
            if let found = accounts.find(origin) {
                account = found
            } else {
                if accounts.count >= maxOrigins { evict(&accounts) }
                account = Account(origin)
                accounts[origin] = account
            }
            // The attempt's own deadline is read only when its turn is not now (it costs a lock).
            let longest = { within().map { min(self.maxWaitNanoseconds, $0.nanoseconds) } ?? self.maxWaitNanoseconds }
            return (account.take(at: now, longest: longest, quota: quota), account)
        }
        switch decision {
        case .refuse(let wait):
            throw NetworkError.rateLimited(origin: account.originText, retryAfter: .nanoseconds(wait))
        case .send(let at):
            return (at > now ? .nanoseconds(at - now) : .zero, account)
        }
    }

    /// Sleeps until a turn ``take(_:within:)`` gave; cancelled, the attempt is no longer in flight.
    package func wait(_ wait: Duration, account: Account) async throws {
        do {
            try await Self.sleep(for: wait, on: clock)
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

    private static func sleep(for wait: Duration, on clock: any Clock<Duration>) async throws {
        try await sleep(wait, on: clock)
    }

    private static func sleep<C: Clock<Duration>>(_ wait: Duration, on clock: C) async throws {
        try await TimerSleep.sleep(until: clock.now.advanced(by: wait), on: clock)
    }

    /// What ``Account/take(at:longest:quota:)`` decided.
    enum Turn: Equatable {
        /// Send at this time (now or later).
        case send(at: Int64)
        /// Do not send: the turn is this far away.
        case refuse(wait: Int64)
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

        /// The time an attempt may be sent at: the later of the quota's and the announcement's.
        init(_ origin: Origin) {
            self.origin = origin
            self.originText = origin.description
        }

        /// Takes a turn at `now`; `longest` (how far the turn may be) is asked only when it is not now.
        func take(at now: Int64, longest: () -> Int64, quota: Quota?) -> Turn {
            lastUsed = max(lastUsed, now)
            var at = now
            if let quota, sends.count >= quota.requests {
                at = max(at, sends[oldest] &+ quota.period.nanoseconds)
            }
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
            if let quota {
                if sends.count < quota.requests {
                    sends.append(at)
                } else {
                    sends[oldest] = at
                    oldest = (oldest + 1) % sends.count
                }
            }
            if at > now { paced += 1 }
            inFlight += 1
            return .send(at: at)
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
        guard let origin = context.requestOrigin else { return .uncounted }
        let (wait, account) = try limiter.take(origin, within: { context.attemptTimeRemaining })
        guard wait > .zero else { return GatePass(record: account) }
        return GatePass(record: account, number: wait.nanoseconds, waits: true)
    }

    package func waitForTurn(_ pass: GatePass, context: RequestContext) async throws(NetworkError) -> GatePass {
        guard let account = pass.record as? RateLimiter.Account else { return pass }
        let wait = Duration.nanoseconds(pass.number)
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
