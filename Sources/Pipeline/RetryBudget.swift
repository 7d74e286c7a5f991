#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// How many requests a client may send that its caller did not: retries, event-stream
/// reconnects, the retry after a token refresh. One budget per origin (scheme, host, port), kept
/// over a sliding window (contract rule 19).
///
/// In a window (10 s by default) an origin's retries may number the larger of ``ratio`` of its
/// requests (a fifth by default) and the floor, ``minimumPerSecond`` × the window's seconds (10
/// by default), so a quiet client can still retry. When an upstream fails every request, each
/// client then sends about 1.2 attempts per request instead of its policy's maximum: the retry
/// storm that turns a blip into an outage does not start. A retry the budget refuses ends the
/// request with the failure it retried (the server's answer or the transport's error, never a
/// new error), and the logging behavior's line says why.
///
/// ```swift
/// var configuration = NetworkClient.Configuration()
/// configuration.retryBudget = RetryBudget(ratio: 0.1, minimumPerSecond: 0.5)
/// // configuration.retryBudget = nil  // no budget: every retry the behaviors ask for is sent
/// ```
///
/// Every ``NetworkClient/Configuration`` gets its own budget. Clients share one only when they
/// are given the same instance (the same configuration value, say); since its accounts are per
/// origin, clients of different origins never take from each other. It keeps at most
/// ``maxOrigins`` accounts: an origin not seen for a window is forgotten first.
public final class RetryBudget: Sendable {
    /// The part of an origin's requests in the window that may be retried: 0.2.
    public let ratio: Double
    /// The floor, in retries per second of the window, whatever the requests: 1.
    public let minimumPerSecond: Double
    /// The sliding window: 10 s.
    public let window: Duration
    /// The most origins the budget keeps an account for: 1,024.
    public let maxOrigins: Int

    /// Time since the budget was made, on its clock.
    let elapsed: any Stopwatch
    /// The length of one of the window's slots, in nanoseconds.
    let slotNanoseconds: Int64
    let accounts = Locked<[Origin: RetryBudgetAccount]>([:])

    /// Creates a budget.
    /// - Parameters:
    ///   - ratio: The part of the requests in the window that may be retried (0.2); clamped to
    ///     0…1000, and `NaN` counts as 0.
    ///   - minimumPerSecond: The floor, in retries per second of the window (1); at least 0.
    ///   - window: How far back requests and retries count (10 s); at least 10 ms.
    ///   - maxOrigins: The most origins kept (1,024); at least 1.
    ///   - clock: The clock the window slides on; tests inject a `ManualClock`.
    public init(
        ratio: Double = 0.2, minimumPerSecond: Double = 1, window: Duration = .seconds(10), maxOrigins: Int = 1_024,
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.ratio = ratio.isNaN ? 0 : min(max(0, ratio), 1_000)
        self.minimumPerSecond = minimumPerSecond.isNaN ? 0 : min(max(0, minimumPerSecond), 1_000_000)
        let window = min(max(window, .milliseconds(10)), .seconds(86_400 * 365))
        self.window = window
        self.maxOrigins = max(1, maxOrigins)
        self.slotNanoseconds = max(1, (window / RetryBudgetAccount.slotCount).nanoseconds)
        self.elapsed = startStopwatch(on: clock)
    }

    /// What an origin's account holds now.
    public struct Snapshot: Sendable, Hashable {
        /// Requests counted in the window.
        public let requests: Int
        /// Retries sent in the window.
        public let retries: Int
        /// Retries refused in the window.
        public let refused: Int
        /// How many more retries the budget would allow now.
        public let available: Int
        /// Resends in the window that were counted but not judged: the retry with a credential just
        /// refreshed, an event stream's reconnect after a connection that delivered events.
        public let exempt: Int

        /// Creates a snapshot (for tests that compare one).
        /// - Parameters:
        ///   - requests: Requests counted in the window.
        ///   - retries: Retries sent in the window.
        ///   - refused: Retries refused in the window.
        ///   - available: How many more retries the budget would allow now.
        ///   - exempt: Resends counted but not judged in the window.
        public init(requests: Int, retries: Int, refused: Int, available: Int, exempt: Int = 0) {
            self.requests = requests
            self.retries = retries
            self.refused = refused
            self.available = available
            self.exempt = exempt
        }
    }

    /// The account of `origin` as it stands (all zero if it has none).
    /// - Parameter origin: The origin.
    public func snapshot(for origin: Origin) -> Snapshot {
        guard let account = accounts.withLock({ $0[origin] }) else {
            return Snapshot(requests: 0, retries: 0, refused: 0, available: Int(floor.rounded(.down)))
        }
        return account.snapshot(budget: self)
    }

    /// The floor, in retries per window.
    var floor: Double { minimumPerSecond * window.secondsValue }

    /// The slot `now` falls in.
    func slot() -> Int64 { elapsed.nanoseconds() / slotNanoseconds }

    /// The account of `origin`, made if it has none. `pinned` keeps it through eviction (a client's
    /// base origin, whose account the client holds).
    package func account(for origin: Origin, pinned: Bool = false) -> RetryBudgetAccount {
        let now = slot()
        return accounts.withLock { accounts in
            if let account = accounts[origin] { return account }
            if accounts.count >= maxOrigins { evict(from: &accounts, now: now) }
            let account = RetryBudgetAccount(origin: origin, pinned: pinned)
            accounts[origin] = account
            return account
        }
    }

    /// Makes room for one account: every unpinned one idle for a window goes; if none is, the one
    /// idle longest.
    private func evict(from accounts: inout [Origin: RetryBudgetAccount], now: Int64) {
        var oldest: (Origin, Int64)?
        for (origin, account) in accounts where !account.pinned {
            let last = account.lastUsed
            if now - last >= Int64(RetryBudgetAccount.slotCount) {
                accounts[origin] = nil
            } else if oldest.map({ last < $0.1 }) ?? true {
                oldest = (origin, last)
            }
        }
        if accounts.count >= maxOrigins, let (origin, _) = oldest { accounts[origin] = nil }
    }
}

/// One origin's requests and retries over a ``RetryBudget``'s window, in ten slots.
package final class RetryBudgetAccount: Sendable {
    static let slotCount = 10

    struct Slot {
        var index: Int64 = -1
        var requests = 0
        var retries = 0
        var refused = 0
        var exempt = 0
    }

    struct State {
        var slots = [Slot](repeating: Slot(), count: RetryBudgetAccount.slotCount)
        var lastUsed: Int64 = 0

        /// The slot for `now`, emptied if it last held an older one.
        /// Counts one request in the slot of `now`: the common case (the slot is current) in one
        /// access to the slots, not two.
        mutating func countRequest(at now: Int64) {
            lastUsed = max(lastUsed, now)
            let position = Int(now % Int64(RetryBudgetAccount.slotCount))
            slots.withUnsafeMutableBufferPointer { slots in
                if slots[position].index != now { slots[position] = Slot(index: now) }
                slots[position].requests += 1
            }
        }

        mutating func current(_ now: Int64) -> Int {
            lastUsed = max(lastUsed, now)
            let position = Int(now % Int64(RetryBudgetAccount.slotCount))
            if slots[position].index != now { slots[position] = Slot(index: now) }
            return position
        }

        /// Requests, retries and refusals in the window that ends at `now`.
        func totals(_ now: Int64) -> (requests: Int, retries: Int, refused: Int, exempt: Int) {
            var totals = (requests: 0, retries: 0, refused: 0, exempt: 0)
            for slot in slots where slot.index >= 0 && now - slot.index < Int64(RetryBudgetAccount.slotCount) {
                totals.requests += slot.requests
                totals.retries += slot.retries
                totals.refused += slot.refused
                totals.exempt += slot.exempt
            }
            return totals
        }
    }

    let origin: Origin
    let pinned: Bool
    let state = Locked(State())

    init(origin: Origin, pinned: Bool) {
        self.origin = origin
        self.pinned = pinned
    }

    var lastUsed: Int64 { state.withLock { $0.lastUsed } }

    /// Counts a request the caller sent.
    package func deposit(_ budget: RetryBudget) {
        let now = budget.slot()
        state.withLock { state in state.countRequest(at: now) }
    }

    /// Takes one retry from the budget if it allows one; counts a refusal otherwise.
    /// - Returns: Whether the retry may be sent.
    package func withdraw(_ budget: RetryBudget) -> Bool {
        let now = budget.slot()
        return state.withLock { state in
            let position = state.current(now)
            let totals = state.totals(now)
            let allowed = max(budget.ratio * Double(totals.requests), budget.floor)
            guard Double(totals.retries + 1) <= allowed else {
                state.slots[position].refused += 1
                return false
            }
            state.slots[position].retries += 1
            return true
        }
    }

    /// Counts a resend the budget does not judge (one with a refreshed credential, an event
    /// stream's reconnect after events): it is in the snapshot's `exempt`, not among the retries
    /// the ratio limits.
    package func countExempt(_ budget: RetryBudget) {
        let now = budget.slot()
        state.withLock { state in state.slots[state.current(now)].exempt += 1 }
    }

    func snapshot(budget: RetryBudget) -> RetryBudget.Snapshot {
        let now = budget.slot()
        let totals = state.withLock { $0.totals(now) }
        let allowed = max(budget.ratio * Double(totals.requests), budget.floor)
        return RetryBudget.Snapshot(
            requests: totals.requests, retries: totals.retries, refused: totals.refused,
            available: max(0, Int(allowed.rounded(.down)) - totals.retries), exempt: totals.exempt)
    }
}

/// A retry the engine did not send because the origin's ``RetryBudget`` was spent.
package struct RetryRefusal: Sendable, Hashable {
    /// The origin whose budget refused it.
    package let origin: Origin
}

/// Time since a start, on a clock: a clock behind an existential, read without generics at the
/// call site (the budget and the circuit breaker take `any Clock<Duration>`, as the client does).
package protocol Stopwatch: Sendable {
    /// Nanoseconds since the stopwatch started.
    func nanoseconds() -> Int64
}

/// A stopwatch started now on `clock`. A `ContinuousClock` is read directly, as whole nanoseconds
/// (every request reads it once: `ContinuousClock.now` and `Duration` arithmetic cost several
/// hundred instructions more).
package func startStopwatch(on clock: any Clock<Duration>) -> any Stopwatch {
    if clock is ContinuousClock { return ContinuousStopwatch() }
    return ClockStopwatch<ContinuousClock>.start(clock)
}

extension Duration {
    /// Whole nanoseconds, clamped to `Int64`.
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflowed) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowed ? (seconds < 0 ? .min : .max) : sum
    }
}

/// A ``Stopwatch`` on a concrete clock.
package struct ClockStopwatch<C: Clock>: Stopwatch where C.Duration == Duration {
    let clock: C
    let start: C.Instant

    static func start<Opened: Clock<Duration>>(_ clock: Opened) -> any Stopwatch {
        ClockStopwatch<Opened>(clock: clock, start: clock.now)
    }

    package func nanoseconds() -> Int64 { start.duration(to: clock.now).nanoseconds }
}

/// The continuous clock's time (the one `ContinuousClock` reads: it goes on while the machine
/// sleeps), as nanoseconds since the stopwatch started.
struct ContinuousStopwatch: Stopwatch {
    let start = ContinuousStopwatch.read()

    func nanoseconds() -> Int64 { Self.read() &- start }

    static func read() -> Int64 {
        #if canImport(Darwin)
            return Int64(truncatingIfNeeded: clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW))
        #else
            var time = timespec()
            clock_gettime(CLOCK_BOOTTIME, &time)
            return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
        #endif
    }
}
