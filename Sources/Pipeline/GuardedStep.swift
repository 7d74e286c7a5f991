/// What the work of a guarded step checks between hooks: whether the step already ended without
/// it. Hook runners take it so an abandoned step calls no further hook.
package protocol StepSignal: AnyObject, Sendable {
    /// Whether the step ended before its work did; the work's result will be ignored and it
    /// must call no further hook.
    var isAbandoned: Bool { get }
    /// Whether the step's deadline has passed, whether or not its timer has run yet: a result
    /// that arrives after it is a timeout, even on a machine too busy to run the timer on time.
    var isPastDeadline: Bool { get }
}

/// Something `RequestContext.cancel()` stops: the guarded step an interruptible request is in.
package protocol ContextInterruptible: AnyObject, Sendable {
    /// Ends the step with `.cancelled`.
    func interrupt()
}

/// One step of a request (preparing an attempt, sending it, asking for a retry, a backoff wait)
/// run in a task of its own, so that it can end early: when its deadline passes, when the caller's
/// task is cancelled, or when `context.cancel()` is called on an interruptible context.
///
/// A step that ends early cancels its task and **abandons** it: the caller gets `.timedOut` or
/// `.cancelled` at once and never awaits the work, so a hook or a transport that ignores
/// cancellation cannot hold a request (contract rule 10). The work checks ``isAbandoned``
/// between hooks, so an abandoned step calls no further hook, and ``checkpoint()`` before it
/// sends, so an abandoned step never starts a send.
///
/// Costs one task per step. A deadline on the system clocks is an entry of ``DeadlineTimer``
/// (one dispatch timer for all of them), on another clock (a test's) a task that sleeps on it.
/// The engine calls a step's work directly when nothing needs guarding (no timeout, a transport
/// that honors cancellation, a context nobody interrupts).
///
/// Work that must not be abandoned halfway (the request's `beforeSend` hooks, which begin what
/// its outcome hooks end) runs in a **shield** (``beginShield()``, ``endShield()``): an end that
/// comes meanwhile (the deadline, `context.cancel()`, the caller's cancellation) waits for the
/// shield to come down, as it would if that work ran in the caller's task between two steps. The
/// caller's cancellation still reaches the shielded work's task at once.
package final class GuardedStep<Value: Sendable>: StepSignal, ContextInterruptible, DeadlineTimerTarget {
    /// What a step produced.
    package enum Outcome: Sendable {
        case finished(Value)
        case timedOut
        case cancelled
    }

    private enum Ending: Equatable {
        case finished, timedOut, cancelled
    }

    private struct State {
        var continuation: UnsafeContinuation<Void, Never>?
        var ending: Ending?
        var result: Value?
        var worker: Task<Void, Never>?
        var timer: Task<Void, Never>?
        /// Whether the deadline is scheduled on ``DeadlineTimer/shared`` (a system clock's, and the
        /// step had not ended before it started): only then does its end tell the timer.
        var onSharedTimer = false
        var checkpoints = 0
        /// Whether the work had cancelled its own task when it finished or the step ended.
        var workCancelledItself = false
        /// The work's task was cancelled while the step had not ended: only the work itself can
        /// have done that (the step cancels its worker after it ends, or in a shield for the
        /// caller, and nothing else holds it).
        var cancelledBeforeEnding = false
        /// Whether the work is in a region the step must not abandon (``beginShield()``).
        var shielded = false
        /// How the step ends once the shield is down: it came to an early end meanwhile.
        var pending: Ending?
        /// The caller was cancelled while the work was shielded: the step cancelled its worker.
        var cancelledInShield = false
    }

    private let state = Locked(State())

    /// When the step times out, if ever.
    private let deadline: Deadline?

    private init(deadline: Deadline?) { self.deadline = deadline }

    package var isPastDeadline: Bool { deadline?.hasPassed() ?? false }

    package var isAbandoned: Bool {
        state.withLock { $0.ending != nil && $0.ending != .finished }
    }

    /// Marks a point of no return in the work (an attempt is prepared and about to be sent),
    /// unless the step was abandoned.
    /// - Returns: `false` when the step was abandoned: the work must stop here.
    package func checkpoint() -> Bool {
        state.withLock { state in
            guard state.ending == nil else { return false }
            state.checkpoints += 1
            return true
        }
    }

    package func interrupt() { end(.cancelled) }

    /// Marks a point of no return, as ``checkpoint()`` does, and raises the shield: until
    /// ``endShield()``, the step does not end early (an early end waits for the shield to come
    /// down). Counts as a checkpoint.
    /// - Returns: `false` when the step was abandoned: the work must stop here.
    package func beginShield() -> Bool {
        state.withLock { state in
            guard state.ending == nil else { return false }
            state.checkpoints += 1
            state.shielded = true
            return true
        }
    }

    /// Lowers the shield; an early end that came while it was up ends the step now.
    package func endShield() {
        let pending = state.withLock { state -> Ending? in
            state.shielded = false
            defer { state.pending = nil }
            return state.pending
        }
        if let pending { end(pending) }
    }

    /// Ends the step, once: later calls do nothing. Resumes the caller; cancels the timer, and
    /// the worker too unless it is the one finishing (then with its result). While the work is
    /// shielded an early end is kept for ``endShield()`` (the caller's cancellation, `byCaller`,
    /// reaches the worker's task now, as it would reach work in the caller's task).
    private func end(
        _ ending: Ending, result: Value? = nil, workCancelledItself: Bool = false, byCaller: Bool = false
    ) {
        let (continuation, worker, timer, onSharedTimer) = state.withLock {
            state -> (UnsafeContinuation<Void, Never>?, Task<Void, Never>?, Task<Void, Never>?, Bool) in
            guard state.ending == nil else { return (nil, nil, nil, false) }
            if state.shielded, ending != .finished {
                if state.pending == nil { state.pending = ending }
                guard byCaller, !state.cancelledInShield else { return (nil, nil, nil, false) }
                state.cancelledInShield = true
                return (nil, state.worker, nil, false)  // the worker is cancelled; nothing else yet
            }
            state.ending = ending
            state.result = result
            // Before the step cancels it: had a hook already cancelled the work's task?
            // (`worker` is still nil if the step ends before `start` stored it; the cancellation
            // handler's flag covers that window: a flake under load before it existed.)
            state.workCancelledItself =
                workCancelledItself || state.cancelledBeforeEnding
                || (ending != .finished && !state.cancelledInShield && state.worker?.isCancelled == true)
            defer {
                state.continuation = nil
                state.worker = nil
                state.timer = nil
            }
            return (state.continuation, state.worker, state.timer, state.onSharedTimer)
        }
        timer?.cancel()
        if onSharedTimer { DeadlineTimer.shared.cancel() }
        if ending != .finished { worker?.cancel() }
        continuation?.resume()
    }

    private func start(
        _ continuation: UnsafeContinuation<Void, Never>, deadline: Deadline?,
        work: @escaping @Sendable (GuardedStep) async -> Value
    ) {
        let onSharedTimer = deadline?.firesOnSystemTimer ?? false
        let endedAlready = state.withLock { state -> Bool in
            if state.ending != nil { return true }
            state.continuation = continuation
            state.onSharedTimer = onSharedTimer
            return false
        }
        if endedAlready {  // cancelled before it started: start nothing
            continuation.resume()
            return
        }
        if onSharedTimer, let deadline {
            // No task: an entry of the one dispatch timer (``DeadlineTimer``). Scheduled before
            // the work starts, so every step with a deadline has its entry, however soon the work
            // ends: a step whose work could finish first scheduled nothing, and how often depended
            // on which thread ran first (a benchmark row counted 0.62 entries a request).
            DeadlineTimer.shared.schedule(self, after: deadline.remaining() ?? .zero)
        }
        let worker = Task {
            let value = await withTaskCancellationHandler {
                await work(self)
            } onCancel: {
                self.state.withLock { state in
                    if state.ending == nil && !state.cancelledInShield { state.cancelledBeforeEnding = true }
                }
            }
            if self.isPastDeadline {
                // The work finished after the deadline, before the timer ran (a busy machine):
                // a timeout all the same, so a deadline never depends on when the timer is run.
                self.end(.timedOut)
            } else {
                // Only the work itself can have cancelled its task if it finishes first: the step
                // cancels its worker only when it ends early.
                self.end(.finished, result: value, workCancelledItself: Task.isCancelled)
            }
        }
        let (endedMeanwhile, cancelledInShield) = state.withLock { state -> (Ending?, Bool) in
            guard state.ending == nil else { return (state.ending, false) }
            state.worker = worker
            return (nil, state.cancelledInShield)
        }
        if let endedMeanwhile {
            if endedMeanwhile != .finished { worker.cancel() }
            return
        }
        // The caller was cancelled while the work was shielded, before the worker was stored.
        if cancelledInShield { worker.cancel() }
        // Another clock (a test's, an event stream's idle deadline): a task sleeps on it, once the
        // work is known not to have ended the step (returned above).
        guard let deadline, !onSharedTimer else { return }
        let timer = Task {
            do { try await deadline.sleep() } catch { return }  // cancelled: the step ended
            self.end(.timedOut)
        }
        let endedBeforeTheTimer = state.withLock { state -> Bool in
            guard state.ending == nil else { return true }
            state.timer = timer
            return false
        }
        if endedBeforeTheTimer { timer.cancel() }
    }

    package func deadlineTimerFired() {
        guard let deadline else { return }
        if deadline.hasPassed() { return end(.timedOut) }
        // The dispatch timer runs on the system's monotonic time, which can lag the deadline's
        // clock: look again when it says.
        DeadlineTimer.shared.schedule(self, after: deadline.remaining() ?? .zero)
    }

    package var deadlineTimerIsDone: Bool { state.withLock { $0.ending != nil } }

    /// Runs `work` as a guarded step.
    /// - Parameters:
    ///   - deadline: When the step times out; `nil` for never.
    ///   - context: A context whose `cancel()` ends the step; `nil` to ignore it.
    ///   - work: The step's work; it receives the step to check ``isAbandoned`` and
    ///     ``checkpoint()``.
    /// - Returns: The outcome; how many checkpoints the work passed before the step ended; and
    ///   whether the work had cancelled its own task by then (a hook that cancels "its" task:
    ///   the caller treats that as cancelling the request, as if the hook had run in its task).
    package static func run(
        deadline: Deadline?, cancelledBy context: RequestContext?,
        _ work: @escaping @Sendable (GuardedStep) async -> Value
    ) async -> (outcome: Outcome, checkpoints: Int, cancelledItself: Bool) {
        let step = GuardedStep(deadline: deadline)
        context?.setInterruptTarget(step)
        await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                step.start(continuation, deadline: deadline, work: work)
            }
        } onCancel: {
            step.end(.cancelled, byCaller: true)
        }
        context?.setInterruptTarget(nil)
        // The result is taken out: the step may outlive its run (its entry in the deadline timer
        // holds it until dropped), and must not hold a response's body meanwhile.
        let (ending, result, checkpoints, cancelledItself) = step.state.withLock {
            ($0.ending, $0.result.take(), $0.checkpoints, $0.workCancelledItself)
        }
        switch ending {
        case .finished:
            guard let result else { return (.cancelled, checkpoints, cancelledItself) }
            return (.finished(result), checkpoints, cancelledItself)
        case .timedOut: return (.timedOut, checkpoints, cancelledItself)
        case .cancelled, nil: return (.cancelled, checkpoints, cancelledItself)
        }
    }
}
