import ConveyorPipeline

/// Runs at most one token refresh at a time: callers that arrive while one is running wait for
/// it and share its result. This is coordination state shared by all requests (like a lock),
/// not per-request state.
///
/// - A waiter whose task is cancelled (or whose request step is abandoned at its deadline)
///   leaves at once; the refresh goes on for the others, and is cancelled when no waiter is left.
/// - A refresh that takes longer than its timeout is abandoned, and every waiter fails with
///   ``AuthError/refreshTimedOut``.
/// - The refresh runs with this coordinator marked in a task-local value, so requests the
///   refresher sends through the same client can tell they are part of the refresh.
final class RefreshCoordinator: Sendable {
    private typealias Waiter = UnsafeContinuation<Result<String, any Error>, Never>

    private struct Flight {
        let id: UInt64
        var task: Task<Void, Never>?
        var waiters: [UInt64: Waiter] = [:]
    }

    private struct State {
        var flight: Flight?
        var nextID: UInt64 = 0
        var refreshCount = 0
        var lastFailure: AuthError?
        /// How many refreshes have ended, whatever their outcome.
        var ended: UInt64 = 0
        /// The last refresh that failed: the token it replaced, how, and when (``ended`` after it).
        var failed: (token: String?, error: AuthError, at: UInt64)?
    }

    /// The coordinators whose refresh the current task is running (innermost last).
    @TaskLocal private static var refreshing: [ObjectIdentifier] = []

    private let state = Locked(State())
    let timeout: Duration
    let clock: any Clock<Duration>

    init(timeout: Duration, clock: any Clock<Duration>) {
        self.timeout = timeout.clampedForConveyor
        self.clock = clock
    }

    /// How many refreshes were started.
    var refreshCount: Int { state.withLock { $0.refreshCount } }

    /// Why the last refresh failed; cleared by one that succeeds.
    var lastFailure: AuthError? {
        get { state.withLock { $0.lastFailure } }
        set { state.withLock { $0.lastFailure = newValue } }
    }

    /// How many refreshes have ended so far: an attempt notes it as it is sent, so that a 401 can
    /// tell later whether a refresh ended in between.
    var refreshesEnded: UInt64 { state.withLock { $0.ended } }

    /// How the last refresh failed, if it replaced `token` and ended after `refreshesEnded` was
    /// `seen`: an attempt sent before it, with the token it could not refresh, got its 401 while
    /// that refresh ran and shares its outcome rather than starting another.
    func failure(replacing token: String?, endedAfter seen: UInt64) -> AuthError? {
        state.withLock { state in
            guard let failed = state.failed, failed.at > seen, failed.token == token else { return nil }
            return failed.error
        }
    }

    /// Whether the current task is running this coordinator's refresh: the refresher is sending
    /// a request through a client that has this behavior.
    var isRefreshingInCurrentTask: Bool {
        let refreshing = Self.refreshing
        return !refreshing.isEmpty && refreshing.contains(ObjectIdentifier(self))
    }

    /// Joins the running refresh, or starts one.
    /// - Throws: `CancellationError` when the caller's task is cancelled while it waits, the
    ///   refresher's error, or ``AuthError/refreshTimedOut``.
    func refresh(replacing expired: String?, using refresher: any TokenRefresher) async throws -> String {
        let waiterID = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        let result = await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: Waiter) in
                let (cancelled, startFlight) = state.withLock { state -> (Bool, UInt64?) in
                    // Checked under the lock that `leave` takes, so a cancellation is never missed.
                    if Task.isCancelled { return (true, nil) }
                    var started: UInt64?
                    if state.flight == nil {
                        state.nextID += 1
                        state.refreshCount += 1
                        state.flight = Flight(id: state.nextID)
                        started = state.nextID
                    }
                    state.flight?.waiters[waiterID] = continuation
                    return (false, started)
                }
                if cancelled {
                    continuation.resume(returning: .failure(CancellationError()))
                    return
                }
                guard let flightID = startFlight else { return }
                let task = Task { await self.run(flightID, replacing: expired, using: refresher) }
                let orphaned = state.withLock { state -> Bool in
                    guard state.flight?.id == flightID else { return true }  // every waiter left already
                    state.flight?.task = task
                    return false
                }
                if orphaned { task.cancel() }
            }
        } onCancel: {
            leave(waiterID)
        }
        // The result was made on the refresh's task and handed over by the lock `run` took
        // before resuming: taking it here makes that order visible to the thread sanitizer too.
        state.withLock { _ in }
        return try result.get()
    }

    /// A cancelled waiter leaves; the last one to leave cancels the refresh.
    private func leave(_ waiterID: UInt64) {
        let (waiter, orphaned) = state.withLock { state -> (Waiter?, Task<Void, Never>?) in
            guard var flight = state.flight, let waiter = flight.waiters.removeValue(forKey: waiterID) else {
                return (nil, nil)
            }
            if flight.waiters.isEmpty {
                state.flight = nil
                return (waiter, flight.task)
            }
            state.flight = flight
            return (waiter, nil)
        }
        orphaned?.cancel()
        waiter?.resume(returning: .failure(CancellationError()))
    }

    /// Runs one refresh under its timeout and hands the result to every waiter.
    private func run(_ flightID: UInt64, replacing expired: String?, using refresher: any TokenRefresher) async {
        let marked = Self.refreshing + [ObjectIdentifier(self)]
        let (outcome, _, _) = await GuardedStep.run(deadline: Deadline(after: timeout, on: clock), cancelledBy: nil) {
            _ -> Result<String, any Error> in
            await Self.$refreshing.withValue(marked) {
                do {
                    return .success(try await refresher.refreshToken(replacing: expired))
                } catch {
                    return .failure(error)
                }
            }
        }
        let result: Result<String, any Error> =
            switch outcome {
            case .finished(let result): result
            case .timedOut: .failure(AuthError.refreshTimedOut)
            case .cancelled: .failure(CancellationError())
            }
        let failure: AuthError? =
            switch result {
            case .success: nil
            case .failure(let error as AuthError): error
            case .failure(is CancellationError): nil  // every waiter left: nothing was decided
            case .failure(let error): .refreshFailed(underlying: error)
            }
        let waiters = state.withLock { state -> [Waiter] in
            guard let flight = state.flight, flight.id == flightID else { return [] }
            state.flight = nil
            state.ended += 1
            if let failure { state.failed = (expired, failure, state.ended) }
            return Array(flight.waiters.values)
        }
        waiters.forEach { $0.resume(returning: result) }
    }
}
