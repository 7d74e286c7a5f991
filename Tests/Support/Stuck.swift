/// A place where callers get stuck **ignoring cancellation** until the test releases them: the
/// body of a hook, transport or token refresher that does not cooperate.
///
/// ```swift
/// let stuck = Stuck()
/// mock.enqueue(.handler { _ in await stuck.wait(); return .status(200) })
/// let task = Task { try await client.send(request) }
/// await stuck.entered(1)     // the transport is stuck now
/// task.cancel()              // … and the request must still end at once
/// stuck.release()            // lets the abandoned call finish at the end of the test
/// ```
public final class Stuck: Sendable {
    private struct State {
        var released = false
        var entered = 0
        var stuck: [CheckedContinuation<Void, Never>] = []
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Locked(State())

    /// Creates a place nobody is stuck in yet.
    public init() {}

    /// How many callers have entered so far.
    public var enteredCount: Int { state.withLock { $0.entered } }

    /// Suspends until ``release()``, whatever happens to the caller's task.
    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (resumeNow, ready) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                state.entered += 1
                let ready = state.watchers.filter { $0.count <= state.entered }.map(\.continuation)
                state.watchers.removeAll { $0.count <= state.entered }
                if state.released { return (true, ready) }
                state.stuck.append(continuation)
                return (false, ready)
            }
            ready.forEach { $0.resume() }
            if resumeNow { continuation.resume() }
        }
    }

    /// Lets every caller go, now and later.
    public func release() {
        let stuck = state.withLock { state in
            state.released = true
            defer { state.stuck = [] }
            return state.stuck
        }
        stuck.forEach { $0.resume() }
    }

    /// Suspends until at least `count` callers have entered.
    public func entered(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.entered >= count { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }
}
