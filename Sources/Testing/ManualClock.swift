import ConveyorPipeline

/// A clock that stands still until the test moves it: sleepers park until ``advance(by:)``
/// passes their deadline. ``waitForSleepers(_:)`` suspends until N sleepers are parked, so a
/// test never polls real time.
///
/// ```swift
/// let clock = ManualClock()
/// let task = Task { try await client.send(slowRequest) }   // timeout 0.5 s on `clock`
/// await clock.waitForSleepers(1)
/// clock.advance(by: .milliseconds(500))                    // the timeout fires
/// ```
///
/// A cancelled sleeper throws `CancellationError` at once.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual clock: an offset from its start.
    public typealias Instant = ImmediateClock.Instant

    private struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Waiter {
        var count: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now = Instant()
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        var waiters: [Waiter] = []
        var sleeps: [Duration] = []
    }

    private let state = Locked(State())

    /// Creates a clock at offset zero.
    public init() {}

    /// The current instant.
    public var now: Instant { state.withLock { $0.now } }
    /// The smallest step: one nanosecond.
    public var minimumResolution: Duration { .nanoseconds(1) }
    /// How many sleepers are parked now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }
    /// Every duration a caller started sleeping for, in order.
    public var sleeps: [Duration] { state.withLock { $0.sleeps } }

    /// Parks the caller until the clock reaches `deadline` (returns at once if it has).
    /// - Parameters:
    ///   - deadline: When to wake.
    ///   - tolerance: Ignored.
    /// - Throws: `CancellationError` when the task is cancelled while parked.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id: UInt64? = state.withLock { state in
            state.sleeps.append(state.now.duration(to: deadline))
            guard deadline > state.now else { return nil }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (resumeNow, ready) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                    // Cancelled before parking, or the clock passed the deadline meanwhile.
                    if Task.isCancelled || deadline <= state.now { return (true, []) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return (false, Self.readyWaiters(&state))
                }
                ready.forEach { $0.resume() }
                if resumeNow {
                    if Task.isCancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes every sleeper whose deadline has come, earliest first.
    /// - Parameter duration: How far to move.
    public func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        due.forEach { $0.continuation.resume() }
    }

    /// Moves the clock to the earliest parked deadline and wakes those sleepers.
    /// - Returns: Whether any sleeper was parked.
    @discardableResult
    public func advanceToNextDeadline() -> Bool {
        let step = state.withLock { state -> Duration? in
            state.sleepers.map(\.deadline).min().map { state.now.duration(to: $0) }
        }
        guard let step else { return false }
        advance(by: step)
        return true
    }

    /// Suspends until at least `count` sleepers are parked. Returns at once if they already are.
    /// - Parameter count: How many sleepers to wait for.
    public func waitForSleepers(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.sleepers.count >= count { return true }
                state.waiters.append(Waiter(count: count, continuation: continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private static func readyWaiters(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        let count = state.sleepers.count
        let ready = state.waiters.filter { $0.count <= count }.map(\.continuation)
        state.waiters.removeAll { $0.count <= count }
        return ready
    }
}
