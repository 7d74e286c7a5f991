import Dispatch

/// What ``DeadlineTimer`` calls when a deadline it holds comes.
package protocol DeadlineTimerTarget: AnyObject, Sendable {
    /// The deadline came on the system's monotonic time: the target checks its own clock (it may
    /// ask to be called again) and ends what it guards.
    func deadlineTimerFired()
    /// Whether the target no longer needs its call (its step ended): such entries are dropped.
    var deadlineTimerIsDone: Bool { get }
}

/// One dispatch timer for every step deadline on the system clocks.
///
/// A guarded step with a deadline used to start a task that slept until it: about 8,000
/// instructions and a thread hop per attempt, and on Linux a cancelled `Task.sleep` stays in the
/// runtime's timer queue until its deadline (about 0.7 KiB each), so every attempt that ended
/// before its timeout left its timer behind for the rest of the timeout (with a 30 s timeout at
/// 1,000 requests a second, 30,000 of them). Here a deadline is an entry in a heap, ordered by
/// when it comes, and one dispatch timer is armed for the earliest.
///
/// An ended step's entry is not searched for: the step only says it is done (``cancel()``), and
/// its entry leaves the heap when it comes, or when the heap is compacted: once at least 64
/// targets, and at least half as many as the heap holds, said so since the last compaction. The
/// heap therefore holds about twice the deadlines pending (and 128 more) at most, however many
/// requests were made (contract rule 13); a compaction costs about two entries per cancel.
package final class DeadlineTimer: Sendable {
    /// The timer every guarded step uses.
    package static let shared = DeadlineTimer()

    private struct Entry {
        var due: UInt64
        var target: any DeadlineTimerTarget
    }

    private struct State {
        /// A binary min-heap on `due` (uptime nanoseconds).
        var heap: [Entry] = []
        /// Targets that said they are done since the heap was last compacted: about how many of
        /// its entries are dead.
        var doneSinceCompaction = 0
        /// What the dispatch timer is armed for, if anything.
        var armed: UInt64?
        /// The one dispatch timer; set once, touched only with the lock held.
        var source: (any DispatchSourceTimer)?
        /// Targets called so far.
        var fired = 0
    }

    private let state = Locked(State())

    /// Leeway for the dispatch timer: deadlines are request timeouts, and a millisecond lets the
    /// system coalesce wake-ups.
    private static let leeway = DispatchTimeInterval.milliseconds(1)

    init() {
        let source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "conveyor.deadlines"))
        state.withLock { $0.source = source }
        source.setEventHandler { [weak self] in self?.fire() }
        source.activate()
    }

    /// How many entries the heap holds, live or not (for tests of the bound).
    package var entryCount: Int { state.withLock { $0.heap.count } }
    /// How many targets it has called (for tests: that a deadline came through it).
    package var firedCount: Int { state.withLock { $0.fired } }

    /// Calls `target.deadlineTimerFired()` once `duration` has passed on the system's monotonic
    /// time, unless the target is done by then.
    package func schedule(_ target: any DeadlineTimerTarget, after duration: Duration) {
        let now = DispatchTime.now().uptimeNanoseconds
        let due = now &+ UInt64(min(duration.clampedForConveyor.secondsValue * 1e9, 4e18).rounded(.up))
        state.withLock { state in
            state.heap.append(Entry(due: due, target: target))
            Self.siftUp(&state.heap, from: state.heap.count - 1)
            if state.armed.map({ due < $0 }) ?? true { Self.arm(&state, for: due) }
        }
    }

    /// A target that was scheduled is done: its entry will be dropped.
    package func cancel() {
        state.withLock { state in
            state.doneSinceCompaction += 1
            guard state.doneSinceCompaction >= 64, 2 * state.doneSinceCompaction >= state.heap.count else { return }
            state.doneSinceCompaction = 0
            Self.compact(&state.heap)
            // The earliest entry may have been dropped: arm for the new one (a timer armed for
            // nothing fires once, finds nothing and is not armed again).
            if let next = state.heap.first, next.due != state.armed { Self.arm(&state, for: next.due) }
        }
    }

    private static func arm(_ state: inout State, for due: UInt64) {
        state.armed = due
        state.source?.schedule(deadline: DispatchTime(uptimeNanoseconds: due), leeway: Self.leeway)
    }

    /// On the timer's queue: calls every target whose deadline came, outside the lock, and arms
    /// the timer for the next.
    private func fire() {
        let now = DispatchTime.now().uptimeNanoseconds
        let due = state.withLock { state -> [any DeadlineTimerTarget] in
            var due: [any DeadlineTimerTarget] = []
            while let first = state.heap.first, first.due <= now {
                let entry = Self.popFirst(&state.heap)
                if !entry.target.deadlineTimerIsDone { due.append(entry.target) }
            }
            state.fired += due.count
            if let next = state.heap.first {
                Self.arm(&state, for: next.due)
            } else {
                state.armed = nil
            }
            return due
        }
        for target in due { target.deadlineTimerFired() }
    }

    /// Drops the entries of done targets and restores the heap's order.
    private static func compact(_ heap: inout [Entry]) {
        heap.removeAll { $0.target.deadlineTimerIsDone }
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(&heap, from: index)
        }
    }

    private static func popFirst(_ heap: inout [Entry]) -> Entry {
        heap.swapAt(0, heap.count - 1)
        let first = heap.removeLast()
        if !heap.isEmpty { siftDown(&heap, from: 0) }
        return first
    }

    private static func siftUp(_ heap: inout [Entry], from start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].due < heap[parent].due else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private static func siftDown(_ heap: inout [Entry], from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count, heap[left + 1].due < heap[left].due { smallest = left + 1 }
            guard heap[smallest].due < heap[parent].due else { return }
            heap.swapAt(smallest, parent)
            parent = smallest
        }
    }
}
