public import ConveyorPipeline

/// Limits the attempts in flight to each origin, and learns the limit from how the origin
/// answers (AIMD, as Netflix's concurrency-limits and TCP do): shared by the
/// ``ConcurrencyLimitBehavior``s given it.
///
/// Each origin starts at ``Options/initialLimit``. An attempt that the origin answered in good
/// time raises the limit by `1 / limit` (one more per round of `limit` answers) while the limit
/// is in use (at least half of it in flight); an attempt that failed as the retry rule judges
/// failures (a timeout, a failed connection, 408, 429, 5xx gateway statuses) or that took more
/// than ``Options/latencyTolerance`` times the origin's fastest recent answer lowers it to
/// ``Options/backoffRatio`` of itself, or of twice the most attempts in flight at once over the
/// last 1 to 2 minutes (``Options/floorMemory``) when that is less: a limit the origin was never asked to bear is not one it
/// proved it can (TCP's congestion window validation, RFC 7661, reasons the same way). So a
/// healthy origin gets more in flight, and a slowing or failing one gets fewer before its queue
/// grows, not first the headroom a client never used.
///
/// Attempts over the limit wait, first come first served, in a queue of at most
/// ``Options/maxQueue`` per origin, for at most ``Options/maxWait`` and never past their timeout;
/// one that cannot wait fails at once with ``NetworkError/rateLimited``.
///
/// ```swift
/// let limiter = ConcurrencyLimiter(options: .init(initialLimit: 10, maxLimit: 64))
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     ConcurrencyLimitBehavior(limiter)
/// }
/// ```
public final class ConcurrencyLimiter: Sendable {
    /// How the limit starts, moves and waits.
    public struct Options: Sendable, Hashable {
        /// The limit an origin starts with: 20.
        public var initialLimit: Int
        /// The lowest the limit goes: 1.
        public var minLimit: Int
        /// The highest the limit goes: 200.
        public var maxLimit: Int
        /// What a failure or a slow answer multiplies the limit by (or twice the recent use, when
        /// that is less): 0.9.
        public var backoffRatio: Double
        /// An answer slower than this many times the origin's fastest recent one counts as a sign
        /// of overload: 2.
        public var latencyTolerance: Double
        /// The most attempts waiting per origin: 100. One more fails at once.
        public var maxQueue: Int
        /// The longest an attempt waits for a place: 10 s.
        public var maxWait: Duration
        /// The `K` of the client-side throttling of Google's SRE book, or `nil` (the default): off.
        /// With it, an attempt is refused locally with probability
        /// `max(0, (requests − K × accepts) / (requests + 1))` over the last 2 minutes of the
        /// origin, so a client sends an origin that refuses most of its attempts about `K` times
        /// what it accepts, not everything. 2 is the book's value.
        public var throttle: Double?
        /// How long the origin's fastest answer is remembered as the floor slowness is measured
        /// against: 2 minutes (the fastest answer of the last 1 to 2 minutes counts; used between
        /// 2 s and an hour). Set it after creating the options.
        ///
        /// While an origin's queue stands, every answer includes it, so a floor learned then
        /// already counts the queue, and the tolerance on top of it lets the queue grow again. A
        /// floor remembered longer than the overload lasts holds the origin's queue where the limit
        /// put it; one forgotten sooner reads a brownout as the origin's new normal within the
        /// memory (the `overload-sim` brownout: with 20 s the upstream's queue grew from 40 to 117
        /// in a minute, with 2 minutes it stays at 40). The price: an origin that really became
        /// slower (a new route, a heavier mix of endpoints) is read as overloaded for up to this
        /// long, at a lower limit.
        public var floorMemory: Duration = .seconds(120)

        /// ``floorMemory`` as the length of each of the two windows that keep the fastest answer,
        /// in nanoseconds.
        var floorWindowNanoseconds: Int64 {
            // Whole seconds (the memory is at least 2 s).
            max(2, min(floorMemory.components.seconds, 3_600)) * 500_000_000
        }

        /// Creates options (clamped: limits to 1…10,000 with `minLimit ≤ initialLimit ≤ maxLimit`,
        /// the ratio to 0.1…0.99, the tolerance to at least 1.1, the queue to 0…100,000, the wait
        /// to 0 … a day).
        /// - Parameters:
        ///   - initialLimit: The limit an origin starts with.
        ///   - minLimit: The lowest the limit goes.
        ///   - maxLimit: The highest the limit goes.
        ///   - backoffRatio: What a failure or a slow answer multiplies the limit by.
        ///   - latencyTolerance: How many times the fastest recent answer counts as slow.
        ///   - maxQueue: The most attempts waiting per origin.
        ///   - maxWait: The longest an attempt waits for a place.
        ///   - throttle: The `K` of the SRE book's client-side throttling (clamped to at least 1),
        ///     or `nil`: off.
        public init(
            initialLimit: Int = 20, minLimit: Int = 1, maxLimit: Int = 200, backoffRatio: Double = 0.9,
            latencyTolerance: Double = 2, maxQueue: Int = 100, maxWait: Duration = .seconds(10),
            throttle: Double? = nil
        ) {
            self.minLimit = min(max(1, minLimit), 10_000)
            self.maxLimit = min(max(self.minLimit, maxLimit), 10_000)
            self.initialLimit = min(max(self.minLimit, initialLimit), self.maxLimit)
            self.backoffRatio = backoffRatio.isNaN ? 0.9 : min(max(0.1, backoffRatio), 0.99)
            self.latencyTolerance = latencyTolerance.isNaN ? 2 : max(1.1, latencyTolerance)
            self.maxQueue = min(max(0, maxQueue), 100_000)
            self.maxWait = min(maxWait.clampedForConveyor, .seconds(86_400))
            self.throttle = throttle.flatMap { $0.isNaN ? nil : max(1, $0) }
        }
    }

    /// What the limiter knows of an origin now.
    public struct Snapshot: Sendable, Hashable {
        /// Attempts that may be in flight at once now.
        public var limit: Int
        /// Attempts in flight.
        public var inFlight: Int
        /// Attempts waiting for a place.
        public var queued: Int
        /// Attempts failed with ``NetworkError/rateLimited`` since the limiter was created.
        public var rejected: Int
        /// The probability that ``Options/throttle`` refuses the next attempt: 0 when it is off.
        public var throttleProbability: Double = 0
    }

    /// How the limit starts, moves and waits.
    public let options: Options
    /// The most origins kept: 1,024 (one with nothing in flight or waiting, used longest ago,
    /// is forgotten first).
    public let maxOrigins: Int
    let elapsed: any Stopwatch
    let clock: any Clock<Duration>
    let policy: RetryPolicy
    let onChange: (@Sendable (Origin, Int) -> Void)?
    let random: @Sendable () -> Double
    /// ``Options/floorWindowNanoseconds``, worked out once (from a `Duration`, about 190
    /// instructions: too many for every answer).
    let floorWindow: Int64
    let origins = Locked<OriginRecords<Account>>(OriginRecords())

    /// Creates a limiter.
    /// - Parameters:
    ///   - options: How the limit starts, moves and waits.
    ///   - policy: Whose judgment of a failure lowers the limit (the statuses ``RetryBehavior``
    ///     retries); the default policy's by default.
    ///   - maxOrigins: The most origins kept.
    ///   - clock: The clock latencies and waits are measured on; tests inject a `ManualClock`.
    ///   - onChange: Told when an origin's whole limit changes (after it did, outside the lock):
    ///     for a log line or a metric.
    public convenience init(
        options: Options = Options(), policy: RetryPolicy = RetryPolicy(), maxOrigins: Int = 1_024,
        clock: any Clock<Duration> = ContinuousClock(), onChange: (@Sendable (Origin, Int) -> Void)? = nil
    ) {
        self.init(options: options, policy: policy, maxOrigins: maxOrigins, clock: clock, onChange: onChange) {
            Double.random(in: 0..<1)
        }
    }

    /// Creates a limiter whose throttling draws from `random` (a number in 0..<1): for tests.
    package init(
        options: Options, policy: RetryPolicy = RetryPolicy(), maxOrigins: Int = 1_024,
        clock: any Clock<Duration>, onChange: (@Sendable (Origin, Int) -> Void)? = nil,
        random: @escaping @Sendable () -> Double
    ) {
        self.random = random
        self.options = options
        self.floorWindow = options.floorWindowNanoseconds
        self.policy = policy
        self.maxOrigins = max(1, maxOrigins)
        self.clock = clock
        self.elapsed = startStopwatch(on: clock)
        self.onChange = onChange
    }

    /// What the limiter knows of `origin` now.
    /// - Parameter origin: The origin.
    public func snapshot(for origin: Origin) -> Snapshot {
        origins.withLock { origins in
            guard let account = origins[origin] else {
                return Snapshot(limit: options.initialLimit, inFlight: 0, queued: 0, rejected: 0)
            }
            return Snapshot(
                limit: Int(account.limit), inFlight: account.inFlight, queued: account.queue.count,
                rejected: account.rejected,
                throttleProbability: options.throttle.map {
                    account.throttleWindow.refusalProbability(k: $0, at: elapsed.nanoseconds())
                } ?? 0)
        }
    }

    /// Takes a place for one attempt to `origin` if one is free, or a place in its queue.
    /// - Parameters:
    ///   - origin: The origin.
    ///   - within: The longest the attempt may wait besides ``Options/maxWait`` (its timeout's rest).
    /// - Returns: `.placed` with the time the attempt started (for ``release(_:started:failed:)``),
    ///   or `.queued` with the ticket to ``wait(_:origin:within:)`` with.
    /// - Throws: ``NetworkError/rateLimited`` when the queue is full or the attempt may not wait.
    package func enter(_ origin: Origin, within: @autoclosure () -> Duration?) throws(NetworkError) -> Entry {
        // An origin always gives an account.
        try enter(context: nil, origin: origin, within: within()) ?? .placed(started: 0, account: Account(origin, limit: 1))
    }

    /// ``enter(_:within:)`` for the request of `context` (found by its client's scope, else its
    /// origin), or without one for `origin`; `nil` for a request with no origin.
    @inline(__always)
    func enter(context: RequestContext?, origin: Origin? = nil, within: @autoclosure () -> Duration?)
        throws(NetworkError) -> Entry?
    {
        let draw = options.throttle == nil ? 0 : random()
        let entered: (Int?, Account)? = origins.withLock { origins in
            guard let account = self.account(context: context, origin: origin, in: &origins) else { return nil }
            if let k = options.throttle {
                let now = elapsed.nanoseconds()
                if draw < account.throttleWindow.refusalProbability(k: k, at: now) {
                    account.throttleWindow.count(accepted: false, at: now)
                    account.rejected += 1
                    return (-1, account)
                }
            }
            if account.inFlight < Int(account.limit) && account.queue.isEmpty {
                account.inFlight += 1
                return (nil, account)
            }
            guard account.queue.count < options.maxQueue, within().map({ $0 > .zero }) ?? true, options.maxWait > .zero
            else {
                account.rejected += 1
                return (-1, account)
            }
            account.nextTicket += 1
            account.queue.append(Waiter(ticket: account.nextTicket))
            return (account.nextTicket, account)
        }
        guard let (ticket, account) = entered else { return nil }
        guard let ticket else { return .placed(started: elapsed.nanoseconds(), account: account) }
        guard ticket >= 0 else { throw NetworkError.rateLimited(origin: account.originText, retryAfter: .zero) }
        return .queued(ticket: ticket, account: account)
    }

    /// What ``enter(_:within:)`` did.
    package enum Entry {
        /// A place was free: the attempt started at this time (release it in `account`).
        case placed(started: Int64, account: Account)
        /// The attempt waits in the queue with this ticket.
        case queued(ticket: Int, account: Account)
    }

    /// Waits with a ticket ``enter(_:within:)`` gave until a place is handed over.
    /// - Returns: When the attempt started.
    package func wait(_ ticket: Int, origin: Origin, within: Duration?) async throws -> Int64 {
        try await wait(ticket, origin: origin, longest: min(options.maxWait, within ?? .conveyorMaximum))
        return elapsed.nanoseconds()
    }

    /// Waits in `origin`'s queue until a place is handed over, `longest` passes, or the task is
    /// cancelled; a place handed over too late is given back.
    private func wait(_ ticket: Int, origin: Origin, longest: Duration) async throws {
        let admitted = (try? await waitOrTimeOut(ticket, origin: origin, longest: longest)) ?? false
        // The queue may have handed over a place as the wait ended: keep it only when admitted.
        let placed = origins.withLock { origins -> Bool in
            guard let account = origins[origin] else { return false }
            if let index = account.queue.firstIndex(where: { $0.ticket == ticket }) {
                account.queue.remove(at: index)
                return false
            }
            return account.placed.remove(ticket) != nil
        }
        if admitted && placed && !Task.isCancelled { return }
        if placed { release(origin, started: nil, failed: nil) }
        if Task.isCancelled { throw CancellationError() }
        origins.withLock { $0[origin]?.rejected += 1 }
        throw NetworkError.rateLimited(origin: origin.description, retryAfter: .zero)
    }

    /// `true` when a place was handed over, `false` when `longest` passed first.
    private func waitOrTimeOut(_ ticket: Int, origin: Origin, longest: Duration) async throws -> Bool {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        let resumeNow: Bool = self.origins.withLock { origins in
                            guard let waiter = origins[origin]?.queue.first(where: { $0.ticket == ticket }) else {
                                return true  // already handed a place, or given up
                            }
                            waiter.continuation = continuation
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                    return true
                } onCancel: {
                    self.giveUp(ticket, origin: origin)
                }
            }
            group.addTask {
                try await TimerSleep.sleep(for: longest, on: self.clock)
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    private func giveUp(_ ticket: Int, origin: Origin) {
        let continuation = origins.withLock { origins -> CheckedContinuation<Void, any Error>? in
            guard let account = origins[origin], let index = account.queue.firstIndex(where: { $0.ticket == ticket })
            else { return nil }
            return account.queue.remove(at: index).continuation
        }
        continuation?.resume(throwing: CancellationError())
    }

    /// Ends an attempt ``enter(_:within:)`` let through: moves the limit by how it went and
    /// hands its place to the next waiting attempt.
    /// - Parameters:
    ///   - origin: The origin.
    ///   - started: What ``enter(_:within:)`` returned, or `nil` for a place given back unused.
    ///   - failed: Whether the origin failed (`true`), answered (`false`), or the attempt ended
    ///     without saying anything of it (`nil`: cancelled).
    package func release(_ origin: Origin, started: Int64?, failed: Bool?) {
        guard let account = origins.withLock({ $0[origin] }) else { return }
        release(account, started: started, failed: failed)
    }

    /// Ends an attempt ``enter(_:within:)`` let through, in the account it returned.
    package func release(_ account: Account, started: Int64?, failed: Bool?) {
        let now = elapsed.nanoseconds()
        var changed: Int?
        var next: CheckedContinuation<Void, any Error>?
        var handed = false
        origins.withLock { _ in
            let before = Int(account.limit)
            if let started, let failed {
                account.adjust(latency: now - started, failed: failed, at: now, options: options, floorWindow: floorWindow)
                if options.throttle != nil { account.throttleWindow.count(accepted: !failed, at: now) }
            }
            account.inFlight = max(0, account.inFlight - 1)
            account.lastUsed = now
            if account.inFlight < Int(account.limit), !account.queue.isEmpty {
                let waiter = account.queue.removeFirst()
                account.inFlight += 1
                account.placed.insert(waiter.ticket)
                next = waiter.continuation
                handed = true
            }
            if Int(account.limit) != before { changed = Int(account.limit) }
        }
        if handed { next?.resume() }
        if let changed { onChange?(account.origin, changed) }
    }

    private func account(context: RequestContext?, origin given: Origin?, in origins: inout OriginRecords<Account>)
        -> Account?
    {
        let origin: Origin
        switch origins.find(context: context, origin: given) {
        case .found(let account): return account
        case .missing(let missing): origin = missing
        case .noOrigin: return nil
        }
        if origins.count >= maxOrigins {
            let idle = origins.all.filter { $0.value.inFlight == 0 && $0.value.queue.isEmpty }
                .min { $0.value.lastUsed < $1.value.lastUsed }
            if let key = idle?.key { origins[key] = nil }
        }
        let account = Account(origin, limit: Double(options.initialLimit))
        origins.insert(account, for: origin, context: context)
        return account
    }

    /// An attempt waiting for a place.
    final class Waiter: @unchecked Sendable {
        // @unchecked: `continuation` is only touched under the owning limiter's `origins` lock.
        let ticket: Int
        var continuation: CheckedContinuation<Void, any Error>?
        init(ticket: Int) { self.ticket = ticket }
    }

    /// One origin's limit and queue. Its fields are read and written only under the limiter's lock.
    package final class Account: @unchecked Sendable {
        // @unchecked: every field is only touched under the owning limiter's `origins` lock.
        /// The origin this account is for.
        let origin: Origin
        /// `origin.description`, made once: every refusal names it (formatting it per refusal
        /// cost the failing-fast path 700 instructions).
        let originText: String
        /// The mutable fields, in storage of their own (see ``LockedFields``).
        private let fields: LockedFields<Fields>
        struct Fields {
            var limit: Double = 0
            var inFlight = 0
            var queue: [Waiter] = []
            /// Tickets handed a place by ``release(_:started:failed:)`` whose waiter has not taken it yet.
            var placed = Set<Int>()
            var nextTicket = 0
            var rejected = 0
            var lastUsed: Int64 = 0
            /// The fastest answer in this window and the one before (windows of half
            /// ``Options/floorMemory``): the floor slowness is measured against.
            var fastest: (window: Int64, current: Int64, previous: Int64) = (-1, .max, .max)
            /// The most attempts in flight at once in the same two windows: what a lowered limit is
            /// taken from when the limit is more than twice it.
            var peak: (current: Int, previous: Int) = (0, 0)
            /// The attempts and accepts of the last 2 minutes, for ``Options/throttle``.
            var throttleWindow = ThrottleWindow()
        }
        var limit: Double {
            get { fields.pointer.pointee.limit }
            _modify { yield &fields.pointer.pointee.limit }
        }
        var inFlight: Int {
            get { fields.pointer.pointee.inFlight }
            _modify { yield &fields.pointer.pointee.inFlight }
        }
        var queue: [Waiter] {
            get { fields.pointer.pointee.queue }
            _modify { yield &fields.pointer.pointee.queue }
        }
        var placed: Set<Int> {
            get { fields.pointer.pointee.placed }
            _modify { yield &fields.pointer.pointee.placed }
        }
        var nextTicket: Int {
            get { fields.pointer.pointee.nextTicket }
            _modify { yield &fields.pointer.pointee.nextTicket }
        }
        var rejected: Int {
            get { fields.pointer.pointee.rejected }
            _modify { yield &fields.pointer.pointee.rejected }
        }
        var lastUsed: Int64 {
            get { fields.pointer.pointee.lastUsed }
            _modify { yield &fields.pointer.pointee.lastUsed }
        }
        var fastest: (window: Int64, current: Int64, previous: Int64) {
            get { fields.pointer.pointee.fastest }
            _modify { yield &fields.pointer.pointee.fastest }
        }
        var peak: (current: Int, previous: Int) {
            get { fields.pointer.pointee.peak }
            _modify { yield &fields.pointer.pointee.peak }
        }
        var throttleWindow: ThrottleWindow {
            get { fields.pointer.pointee.throttleWindow }
            _modify { yield &fields.pointer.pointee.throttleWindow }
        }

        init(_ origin: Origin, limit: Double) {
            self.origin = origin
            self.originText = origin.description
            self.fields = LockedFields(Fields(limit: limit))
        }

        func adjust(latency: Int64, failed: Bool, at now: Int64, options: Options, floorWindow: Int64) {
            let window = now / floorWindow
            if window != fastest.window {
                peak = (0, window == fastest.window + 1 ? peak.current : 0)
                fastest = (window, .max, window == fastest.window + 1 ? fastest.current : .max)
            }
            // In flight falls only when an attempt ends, so its most at the ends judged here is its
            // most (but for attempts cancelled before an answer, which are not judged).
            peak.current = max(peak.current, inFlight)
            let floor = min(fastest.current, fastest.previous)
            let slow = floor != .max && floor > 0 && Double(latency) > options.latencyTolerance * Double(floor)
            if !failed { fastest.current = min(fastest.current, max(1, latency)) }
            if failed || slow {
                let used = Double(2 * max(peak.current, peak.previous))
                limit = max(Double(options.minLimit), min(limit, used) * options.backoffRatio)
            } else if Double(inFlight) * 2 >= limit {
                limit = min(Double(options.maxLimit), limit + 1 / limit)
            }
        }
    }
}

/// The attempts an origin answered or the throttle refused, and the ones it accepted, over the
/// last 2 minutes (the SRE book's window), in 12 buckets of 10 s.
struct ThrottleWindow {
    private var requests = [Int](repeating: 0, count: 12)
    private var accepts = [Int](repeating: 0, count: 12)
    /// The 10 s bucket the newest counts are in; -1 before the first.
    private var newest: Int64 = -1

    /// Counts an attempt at `now` (nanoseconds on the limiter's stopwatch).
    mutating func count(accepted: Bool, at now: Int64) {
        let bucket = advance(to: now)
        requests[bucket] += 1
        if accepted { accepts[bucket] += 1 }
    }

    /// The attempts and accepts counted in the window as it was last advanced.
    var totals: (requests: Int, accepts: Int) { (requests.reduce(0, +), accepts.reduce(0, +)) }

    /// `max(0, (requests − k × accepts) / (requests + 1))` over the window ending at `now`.
    mutating func refusalProbability(k: Double, at now: Int64) -> Double {
        _ = advance(to: now)
        let total = Double(requests.reduce(0, +))
        let accepted = Double(accepts.reduce(0, +))
        return max(0, (total - k * accepted) / (total + 1))
    }

    /// Empties the buckets that fell out of the window by `now`; returns the current one's index.
    private mutating func advance(to now: Int64) -> Int {
        let current = max(newest, max(0, now) / 10_000_000_000)  // a stopwatch never goes back; be sure
        if newest < 0 || current - newest >= 12 {
            for index in 0..<12 {
                requests[index] = 0
                accepts[index] = 0
            }
        } else if current > newest {
            for passed in (newest + 1)...current {
                requests[Int(passed % 12)] = 0
                accepts[Int(passed % 12)] = 0
            }
        }
        newest = max(newest, current)
        return Int(current % 12)
    }
}

/// Holds the attempts in flight to each origin to a limit a ``ConcurrencyLimiter`` learns from the
/// origin's answers: more while it answers fast, fewer when it slows down or fails; the rest wait
/// in a bounded queue or fail at once with ``NetworkError/rateLimited``.
///
/// An `intercept` member, run per attempt. Put it after ``RetryBehavior`` and
/// ``RateLimitBehavior`` and before ``CircuitBreakerBehavior``.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     ConcurrencyLimitBehavior()
/// }
/// ```
public struct ConcurrencyLimitBehavior: AttemptIntercepting, AttemptGating {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String
    /// The limits this behavior holds attempts to.
    public let limiter: ConcurrencyLimiter

    /// Creates the behavior.
    /// - Parameters:
    ///   - limiter: The limits; pass one instance to several clients to share them.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions.
    public init(_ limiter: ConcurrencyLimiter = ConcurrencyLimiter(), name: String? = nil) {
        self.name = name ?? String(describing: Self.self)
        self.limiter = limiter
    }

    /// Takes a place for the attempt (waiting for one if need be), sends it, and moves the limit
    /// by how it went.
    /// The engine runs this behavior at the transport's door (a gate), next to the transport.
    public static var _declaredHooks: UInt16 { HookBits.gates | HookBits.intercept }

    /// Takes a place for the attempt (waiting for one if it must), sends it, and moves the limit
    /// by how it went. (The engine does the same without calling this: a client's chain admits and
    /// counts each exchange at the transport's door.)
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await exchange(request, context: context, next: next)
    }

    package func admit(_ request: HTTPRequest, context: RequestContext) throws(NetworkError) -> GatePass {
        switch try limiter.enter(context: context, within: context.attemptTimeRemaining) {
        case nil: return .uncounted
        case .placed(let started, let account): return GatePass(record: account, number: started)
        case .queued(let ticket, let account): return GatePass(record: account, number: Int64(ticket), waits: true)
        }
    }

    package func waitForTurn(_ pass: GatePass, context: RequestContext) async throws(NetworkError) -> GatePass {
        guard let account = pass.record as? ConcurrencyLimiter.Account else { return pass }
        do {
            let started = try await limiter.wait(Int(pass.number), origin: account.origin, within: context.attemptTimeRemaining)
            return GatePass(record: account, number: started)
        } catch {
            throw NetworkError(transportError: error)
        }
    }

    package func release(_ pass: GatePass, answered response: HTTPResponse, context: RequestContext) {
        guard let account = pass.record as? ConcurrencyLimiter.Account else { return }
        limiter.release(account, started: pass.number, failed: limiter.policy.isUpstreamFailure(nil, status: response.status))
    }

    package func release(_ pass: GatePass, failed failure: NetworkError, context: RequestContext) {
        guard let account = pass.record as? ConcurrencyLimiter.Account else { return }
        let failed = limiter.policy.upstreamFailed(failure) { context.attemptDeadlineHasPassed }
        limiter.release(account, started: pass.number, failed: failed)
    }
}
