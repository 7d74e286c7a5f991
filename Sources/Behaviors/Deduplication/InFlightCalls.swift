import ConveyorPipeline

/// The calls ``DeduplicationBehavior`` has in flight, one per ``CallKey``, and the callers
/// waiting for each. Coordination state shared by every request through the behavior (like
/// `RefreshCoordinator`), not per-request state.
///
/// - A call runs in a task of its own with the `next` of the caller that started it (its
///   leader), so no caller's cancellation ends it for the others.
/// - A caller whose task is cancelled (its step abandoned at its deadline, too) leaves at once
///   with `.cancelled`; the last one to leave cancels the call and removes it. When the leader
///   leaves, its flight is cancelled and the earliest caller still waiting sends again: no flight
///   outlives the deadline of the caller whose `next` it uses.
/// - A call that ends is removed before its callers are resumed: a later caller sends again.
/// - A call that ends with `.cancelled` was, as a rule, ended by its leader's `next` after the
///   leader left (a `next` whose step was abandoned reaches no transport). That `.cancelled` goes
///   to the leader only, if it is still there; the earliest caller still waiting sends again
///   with its own `next` and becomes the leader. Each caller leads at most once per call, so
///   this ends.
///
/// State grows only with callers waiting now: nothing is kept once a call ends.
final class InFlightCalls: Sendable, CustomReflectable {
    typealias Outcome = Result<HTTPResponse, NetworkError>
    private typealias Waiter = UnsafeContinuation<Outcome, Never>

    private struct Caller {
        let continuation: Waiter
        let request: HTTPRequest
        let next: InterceptNext
    }

    private struct Call {
        /// The send running now; a re-issue makes a new one.
        var flight: UInt64
        /// The caller whose `next` the flight uses.
        var leader: UInt64
        var task: Task<Void, Never>?
        /// By caller id; ids grow, so the smallest is the earliest caller.
        var callers: [UInt64: Caller] = [:]
    }

    private struct State {
        var calls: [CallKey: Call] = [:]
        var nextID: UInt64 = 0
        /// How many sends were started (re-issues included). For tests.
        var sends = 0
        /// Callers waiting, over all calls. For tests.
        var waiting = 0
        /// Tests waiting for that many callers.
        var watchers: [(id: UInt64, count: Int, continuation: UnsafeContinuation<Void, Never>)] = []

        mutating func readyWatchers() -> [UnsafeContinuation<Void, Never>] {
            guard !watchers.isEmpty else { return [] }
            let ready = watchers.filter { $0.count <= waiting }.map(\.continuation)
            watchers.removeAll { $0.count <= waiting }
            return ready
        }
    }

    private let state = Locked(State())

    init() {}

    /// Calls in flight now.
    var count: Int { state.withLock { $0.calls.count } }

    /// Sends started so far, re-issues included.
    var sends: Int { state.withLock { $0.sends } }

    /// Callers waiting now, over all calls.
    var waiting: Int { state.withLock { $0.waiting } }

    /// Suspends until at least `count` callers are waiting (for tests: every caller has joined),
    /// or the task is cancelled.
    func waitUntilWaiting(_ count: Int) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.waiting >= count || Task.isCancelled { return true }
                    state.watchers.append((id, count, continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let watcher = state.withLock { state -> UnsafeContinuation<Void, Never>? in
                guard let index = state.watchers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.watchers.remove(at: index).continuation
            }
            watcher?.resume()
        }
    }

    /// Joins the call in flight for `key`, or starts it with `next`, and waits for its outcome.
    /// - Returns: The call's outcome, the response carrying `request` (unless this caller sent
    ///   it); `.cancelled` when the caller's task is cancelled while it waits.
    func join(_ key: CallKey, request: HTTPRequest, next: @escaping InterceptNext) async -> Outcome {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        let outcome = await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: Waiter) in
                let (cancelled, started, ready) = state.withLock {
                    state -> (Bool, UInt64?, [UnsafeContinuation<Void, Never>]) in
                    // Checked under the lock that `leave` takes, so a cancellation is never missed.
                    if Task.isCancelled { return (true, nil, []) }
                    var started: UInt64?
                    if state.calls[key] == nil {
                        state.nextID += 1
                        state.sends += 1
                        started = state.nextID
                        state.calls[key] = Call(flight: state.nextID, leader: id)
                    }
                    state.calls[key]?.callers[id] = Caller(continuation: continuation, request: request, next: next)
                    state.waiting += 1
                    return (false, started, state.readyWatchers())
                }
                ready.forEach { $0.resume() }
                if cancelled {
                    continuation.resume(returning: .failure(.cancelled))
                } else if let started {
                    launch(key, flight: started, request: request, next: next)
                }
            }
        } onCancel: {
            leave(key, id)
        }
        // The outcome was made on the call's task and handed over by the lock `finish` took
        // before resuming: taking it here makes that order visible to the thread sanitizer too.
        state.withLock { _ in }
        return outcome
    }

    /// Starts a flight: `next(request)` in a task of its own.
    private func launch(_ key: CallKey, flight: UInt64, request: HTTPRequest, next: @escaping InterceptNext) {
        let task = Task {
            let outcome: Outcome
            do throws(NetworkError) {
                outcome = .success(try await next(request))
            } catch {
                outcome = .failure(error)
            }
            self.finish(key, flight: flight, outcome)
        }
        let orphaned = state.withLock { state -> Bool in
            guard state.calls[key]?.flight == flight else { return true }  // every caller left, or it ended
            state.calls[key]?.task = task
            return false
        }
        if orphaned { task.cancel() }
    }

    /// A cancelled caller leaves; the last one to leave cancels the call and removes it. A leader
    /// that leaves while others wait takes its flight with it: the flight is cancelled and the
    /// earliest caller still waiting sends again with its own `next`. A flight therefore never
    /// outlives its leader, whose deadline bounds it: a late caller never receives a response
    /// that took longer than an attempt may (a trickling server cannot stretch a deadline
    /// through a shared call).
    private func leave(_ key: CallKey, _ id: UInt64) {
        let (waiter, orphaned, reissue) = state.withLock {
            state -> (Waiter?, Task<Void, Never>?, (flight: UInt64, caller: Caller)?) in
            guard let caller = state.calls[key]?.callers.removeValue(forKey: id) else { return (nil, nil, nil) }
            state.waiting -= 1
            guard let call = state.calls[key] else { return (caller.continuation, nil, nil) }
            if call.callers.isEmpty {
                state.calls[key] = nil
                return (caller.continuation, call.task, nil)
            }
            guard call.leader == id, let (next, successor) = call.callers.min(by: { $0.key < $1.key }) else {
                return (caller.continuation, nil, nil)
            }
            state.nextID += 1
            state.sends += 1
            state.calls[key]?.flight = state.nextID
            state.calls[key]?.leader = next
            state.calls[key]?.task = nil
            return (caller.continuation, call.task, (state.nextID, successor))
        }
        orphaned?.cancel()
        waiter?.resume(returning: .failure(.cancelled))
        if let reissue { launch(key, flight: reissue.flight, request: reissue.caller.request, next: reissue.caller.next) }
    }

    /// A flight ended: hand its outcome to every caller, or re-issue after a leader's `.cancelled`.
    private func finish(_ key: CallKey, flight: UInt64, _ outcome: Outcome) {
        let (deliveries, reissue) = state.withLock {
            state -> ([(Waiter, Outcome)], (flight: UInt64, caller: Caller)?) in
            guard let call = state.calls[key], call.flight == flight else { return ([], nil) }  // abandoned
            if case .failure(let error) = outcome, error.isCancellation {
                var deliveries: [(Waiter, Outcome)] = []
                if let leader = state.calls[key]?.callers.removeValue(forKey: call.leader) {
                    deliveries.append((leader.continuation, outcome))
                    state.waiting -= 1
                }
                guard let (id, caller) = state.calls[key]?.callers.min(by: { $0.key < $1.key }) else {
                    state.calls[key] = nil
                    return (deliveries, nil)
                }
                state.nextID += 1
                state.sends += 1
                state.calls[key]?.flight = state.nextID
                state.calls[key]?.leader = id
                state.calls[key]?.task = nil
                return (deliveries, (state.nextID, caller))
            }
            state.calls[key] = nil
            state.waiting -= call.callers.count
            let deliveries = call.callers.map { id, caller -> (Waiter, Outcome) in
                guard id != call.leader else { return (caller.continuation, outcome) }
                return (caller.continuation, outcome.map { response in
                    var own = response
                    own.request = caller.request
                    return own
                })
            }
            return (deliveries, nil)
        }
        for (waiter, outcome) in deliveries { waiter.resume(returning: outcome) }
        if let reissue { launch(key, flight: reissue.flight, request: reissue.caller.request, next: reissue.caller.next) }
    }

    /// No children: the table holds requests and credentials, which stay out of dumps.
    var customMirror: Mirror { Mirror(self, children: [:]) }
}
