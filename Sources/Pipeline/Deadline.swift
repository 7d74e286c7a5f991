import Dispatch

extension Duration {
    /// The longest duration Conveyor computes or passes on: 100 years, which is "forever" for a
    /// request and still far from the limits where clocks trap.
    ///
    /// `ContinuousClock` turns a deadline into seconds and nanoseconds of 64 bits; a
    /// `.seconds(Int64.max)` timeout, a `Retry-After: 9223372036854775807` or a backoff
    /// multiplier of `1e300` would trap there. Every duration that reaches a clock, a transport
    /// or a caller goes through ``clampedForConveyor`` first.
    package static let conveyorMaximum = Duration.seconds(3_155_760_000)

    /// This duration, with a negative value raised to zero and anything longer than
    /// ``conveyorMaximum`` lowered to it.
    package var clampedForConveyor: Duration {
        if self < .zero { return .zero }
        return self > .conveyorMaximum ? .conveyorMaximum : self
    }

    /// A duration from seconds given as a `Double`, clamped like ``clampedForConveyor``; `NaN`
    /// counts as zero and infinity as the maximum. Never traps, whatever the input.
    /// - Parameter seconds: The length in seconds.
    package static func clampedSeconds(_ seconds: Double) -> Duration {
        guard seconds > 0 else { return .zero }  // also NaN
        let maximum = Double(Duration.conveyorMaximum.components.seconds)
        guard seconds < maximum else { return .conveyorMaximum }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// The duration in seconds, as a `Double`.
    package var secondsValue: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// The end of a request step's allowed time on a clock: an absolute instant, so several steps of
/// one attempt share one deadline.
package struct Deadline: Sendable {
    /// The clock and the instant, in one object (one allocation per deadline).
    private let end: any DeadlineEnd

    /// The deadline `duration` from now on `clock`.
    /// - Parameters:
    ///   - duration: How long from now; clamped (negative means now, at most 100 years).
    ///   - clock: The clock to measure on.
    package init(after duration: Duration, on clock: any Clock<Duration>) {
        end = Self.end(after: duration.clampedForConveyor, on: clock)
    }

    private static func end<C: Clock<Duration>>(after duration: Duration, on clock: C) -> any DeadlineEnd {
        // The system's clocks (stateless values) by their metatype: their instant's type is then
        // known when compiled. For a clock known only at run time, the instant's generic type has
        // its metadata looked up on each deadline (about 330 instructions).
        if C.self == ContinuousClock.self {
            let system = ContinuousClock()
            return ClockInstant(clock: system, instant: system.now.advanced(by: duration))
        }
        if C.self == SuspendingClock.self {
            let system = SuspendingClock()
            return ClockInstant(clock: system, instant: system.now.advanced(by: duration))
        }
        return ClockInstant(clock: clock, instant: clock.now.advanced(by: duration))
    }

    /// A deadline that moves: it passes when `idle` has gone by with no ``IdleActivity/touch()``
    /// since it was made (an event stream that went quiet).
    /// - Parameters:
    ///   - idle: How long without activity; clamped like ``Duration/clampedForConveyor``.
    ///   - clock: The clock to measure on.
    package init(idle: Duration, on clock: any Clock<Duration>) {
        end = Self.idleEnd(idle.clampedForConveyor, on: clock)
    }

    private static func idleEnd<C: Clock<Duration>>(_ idle: Duration, on clock: C) -> any DeadlineEnd {
        IdleInstant(clock: clock, idle: idle)
    }

    /// What pushes an idle deadline back, or `nil` for a fixed one.
    package var activity: (any IdleActivity)? { end as? any IdleActivity }

    /// Sleeps until the deadline; throws when the sleeping task is cancelled.
    func sleep() async throws { try await end.sleep() }

    /// Whether the deadline has passed on its clock: read where a result arrives, so that a
    /// deadline holds even when the task sleeping until it has not been run yet (a busy machine).
    func hasPassed() -> Bool { end.hasPassed() }

    /// How long until the deadline passes (zero once it has), or `nil` for an idle deadline,
    /// which activity can push back.
    func remaining() -> Duration? { end.remaining() }

    /// Whether ``DeadlineTimer`` can watch it: a fixed deadline on `ContinuousClock` or
    /// `SuspendingClock`. Others (a test's clock, an idle deadline) are slept on by a task.
    var firesOnSystemTimer: Bool { end.firesOnSystemTimer }
}

/// An instant on a clock, behind an existential so that ``Deadline`` is not generic.
private protocol DeadlineEnd: Sendable {
    func sleep() async throws
    func hasPassed() -> Bool
    func remaining() -> Duration?
    var firesOnSystemTimer: Bool { get }
}

private final class ClockInstant<C: Clock<Duration>>: DeadlineEnd {
    let clock: C
    let instant: C.Instant
    init(clock: C, instant: C.Instant) {
        self.clock = clock
        self.instant = instant
    }
    func sleep() async throws { try await clock.sleep(until: instant, tolerance: nil) }
    func hasPassed() -> Bool { clock.now >= instant }
    func remaining() -> Duration? { max(.zero, clock.now.duration(to: instant)) }
    var firesOnSystemTimer: Bool { C.self == ContinuousClock.self || C.self == SuspendingClock.self }
}

/// Pushes an idle deadline back: bytes arrived.
package protocol IdleActivity: Sendable {
    /// Something happened now: the deadline is `idle` from now.
    func touch()
    /// While held (by anyone: holds are counted), the deadline does not pass: the reader, not
    /// the server, is slow, or no one is waiting for the next byte.
    func hold()
    /// Ends one ``hold()``; ending the last touches the deadline.
    func release()
}

/// An idle deadline: `idle` after the last ``touch()``, counted only while nothing holds it.
private final class IdleInstant<C: Clock<Duration>>: DeadlineEnd, IdleActivity {
    let clock: C
    let idle: Duration
    let last: Locked<(instant: C.Instant, holds: Int)>

    init(clock: C, idle: Duration) {
        self.clock = clock
        self.idle = idle
        self.last = Locked((clock.now, 0))
    }

    func touch() {
        let now = clock.now
        last.withLock { $0.instant = now }
    }

    func hold() {
        last.withLock { $0.holds += 1 }
    }

    func release() {
        let now = clock.now
        last.withLock { state in
            state.holds = max(0, state.holds - 1)
            state.instant = now
        }
    }

    func sleep() async throws {
        while true {
            // Held: look again `idle` from now (never sooner than the deadline can be once it
            // is released, and no spinning while the reader keeps the stream waiting).
            let now = clock.now
            let end = last.withLock { $0.holds > 0 ? now.advanced(by: idle) : $0.instant.advanced(by: idle) }
            try await TimerSleep.sleep(until: end, on: clock)
            if hasPassed() { return }
        }
    }

    func hasPassed() -> Bool {
        let (instant, holds) = last.withLock { $0 }
        return holds == 0 && clock.now >= instant.advanced(by: idle)
    }

    func remaining() -> Duration? { nil }
    var firesOnSystemTimer: Bool { false }
}

/// Sleeps on a clock. On the system clocks the sleep is a dispatch timer that cancellation
/// removes at once: a cancelled `Task.sleep` stays scheduled until its deadline (about 0.7 KiB
/// each on Linux), so every event stream left before its idle timeout kept its timer for up to
/// 120 s (issue 56). Other clocks (a test's) sleep as they do.
package enum TimerSleep {
    /// Sleeps until `end` on `clock`.
    /// - Throws: `CancellationError` when the task is cancelled.
    package static func sleep<C: Clock<Duration>>(until end: C.Instant, on clock: C) async throws {
        guard C.self == ContinuousClock.self || C.self == SuspendingClock.self else {
            return try await clock.sleep(until: end, tolerance: nil)
        }
        // The dispatch timer runs on the system's monotonic time: wake, then look at `clock`.
        while true {
            let left = clock.now.duration(to: end)
            if left <= .zero { return }
            try await DispatchTimerSleep().sleep(for: left)
        }
    }

    /// Sleeps for `duration` on `clock`, as ``sleep(until:on:)`` does: the package's sleeps that
    /// cancellation may end early and that can be long (a backoff, a limiter's wait) go through
    /// here, so none leaves a timer behind on the system clocks. (A hedge's delay, on every hedged
    /// request, is an entry of ``DeadlineTimer``: a dispatch source each cost 5,000 instructions.)
    /// - Throws: `CancellationError` when the task is cancelled.
    package static func sleep(for duration: Duration, on clock: any Clock<Duration>) async throws {
        try await sleep(duration, onOpened: clock)
    }

    private static func sleep<C: Clock<Duration>>(_ duration: Duration, onOpened clock: C) async throws {
        try await sleep(until: clock.now.advanced(by: duration.clampedForConveyor), on: clock)
    }
}

/// One cancellable sleep on a dispatch timer source.
package final class DispatchTimerSleep: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, any Error>?
        var source: (any DispatchSourceTimer)?
        var ended = false
    }
    // A dispatch source is thread-safe; the lock guards who resumes the continuation, once.
    private let state = Locked(State())

    package init() {}

    /// Whether a timer is scheduled: from the start of ``sleep(for:)`` until it fires or is
    /// cancelled, never after.
    package var isScheduled: Bool { state.withLock { $0.source != nil } }

    /// Sleeps for `duration`; cancellation ends the sleep and removes its timer at once.
    /// - Throws: `CancellationError` when the task is cancelled.
    package func sleep(for duration: Duration) async throws {
        let nanoseconds = Int(min(duration.clampedForConveyor.secondsValue * 1e9, 9e18).rounded(.up))
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLock { state -> Bool in
                    if state.ended || Task.isCancelled { return true }
                    state.continuation = continuation
                    return false
                }
                if cancelled { return continuation.resume(throwing: CancellationError()) }
                let source = DispatchSource.makeTimerSource(queue: .global())
                source.schedule(deadline: .now() + .nanoseconds(nanoseconds))
                source.setEventHandler { [weak self] in self?.end(nil) }
                let ended = state.withLock { state -> Bool in
                    if state.ended { return true }
                    state.source = source
                    return false
                }
                // A source is released only once resumed (libdispatch traps on a suspended one).
                if ended { source.cancel() }
                source.resume()
            }
        } onCancel: {
            end(CancellationError())
        }
    }

    /// Fired or cancelled: cancels the timer (which frees it) and resumes the sleeper, once.
    private func end(_ error: (any Error)?) {
        let (continuation, source) = state.withLock { state in
            state.ended = true
            return (state.continuation.take(), state.source.take())
        }
        source?.cancel()
        if let error { continuation?.resume(throwing: error) } else { continuation?.resume() }
    }
}
