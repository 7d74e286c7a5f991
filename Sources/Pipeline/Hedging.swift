/// A member that has the engine hedge a request: send another attempt beside one that is slow to
/// answer, and keep the first acceptable answer (contract rule 20). `HedgingBehavior` is the one
/// conformer; the engine finds it by ``HookBits/hedges`` when the chain is built.
package protocol RequestHedging: RequestBehavior {
    /// The most attempts of one request in flight at once, the first included (at least 2).
    var hedgingLimit: Int { get }
    /// Whether `request` may be hedged: sending it twice at once must be harmless.
    func mayHedge(_ request: HTTPRequest, context: RequestContext) -> Bool
    /// How long an attempt to `origin` may go unanswered before the next starts beside it.
    func hedgeDelay(for origin: Origin?) -> Duration
    /// An attempt to `origin` was answered acceptably after `latency` (for a delay that follows
    /// the origin's latencies).
    func recordLatency(_ latency: Duration, origin: Origin?)
}

/// What hedging did for one request: read by the logging behavior.
package struct HedgeReport: Sendable, Equatable {
    /// How many attempts were sent beside another one still in flight.
    package var sent = 0
    /// Whether an attempt sent beside another gave the answer the request kept.
    package var won = false
    /// Whether the retry budget refused a hedge.
    package var refused = false
    /// How many attempts were cancelled because another one answered first, or because the
    /// request ended while they were in flight.
    package var cancelled = 0
}

extension RequestContext {
    private enum Hedges: RequestContextKey { static let defaultValue: HedgeReport? = nil }

    /// What hedging did for this request, if it hedged (or tried to).
    package var hedgeReport: HedgeReport? { self[Hedges.self] }

    /// Adds one race's report to the request's.
    func noteHedges(_ report: HedgeReport) {
        update(Hedges.self) { total in
            var merged = total ?? HedgeReport()
            merged.sent += report.sent
            merged.won = merged.won || report.won
            merged.refused = merged.refused || report.refused
            merged.cancelled += report.cancelled
            total = merged
        }
    }
}

extension RequestRunner {
    /// One event of a race between the attempts of a request.
    private enum RaceEvent: Sendable {
        /// Attempt number `attempt` ended, after `latency`, with `exchange`, seen from `view`.
        case answered(attempt: Int, exchange: Exchange, latency: Duration, view: RequestContext)
        /// The hedge delay passed: the next attempt may start.
        case due
    }

    /// The events of one race, in the order they came, for the loop that runs it. (Not an
    /// `AsyncStream`: its generic storage looked up runtime metadata on every event, about 10,000
    /// instructions a race.) Once finished, or once the reading task is cancelled, it gives no
    /// further event and drops what is sent to it.
    private final class RaceEvents: Sendable {
        private let state = Locked<(events: [RaceEvent], reader: UnsafeContinuation<RaceEvent?, Never>?, finished: Bool)>(
            ([], nil, false))

        /// Sends `event` to the reader (dropped once the race is finished).
        func yield(_ event: RaceEvent) {
            let reader = state.withLock { state -> UnsafeContinuation<RaceEvent?, Never>? in
                guard !state.finished else { return nil }
                guard let reader = state.reader else {
                    state.events.append(event)
                    return nil
                }
                state.reader = nil
                return reader
            }
            reader?.resume(returning: event)
        }

        /// Ends the events: the reader gets `nil`, now and from then on.
        func finish() {
            let reader = state.withLock { state -> UnsafeContinuation<RaceEvent?, Never>? in
                state.finished = true
                state.events = []
                defer { state.reader = nil }
                return state.reader
            }
            reader?.resume(returning: nil)
        }

        /// The next event, waiting for it; `nil` once finished or the reading task is cancelled.
        func next() async -> RaceEvent? {
            await withTaskCancellationHandler {
                await withUnsafeContinuation { (continuation: UnsafeContinuation<RaceEvent?, Never>) in
                    let now: RaceEvent?? = state.withLock { state in
                        if !state.events.isEmpty { return .some(state.events.removeFirst()) }
                        if state.finished { return .some(nil) }
                        state.reader = continuation
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
            } onCancel: {
                finish()
            }
        }
    }

    /// The tasks of one race, its hedge timer, and the way `RequestContext.cancel()` ends it.
    private final class Race: ContextInterruptible, DeadlineTimerTarget {
        private let events: RaceEvents
        private let context: RequestContext
        /// The attempts' tasks (and a hedge timer's, on a clock of a test); the hedge delay on a
        /// system clock, while one is pending on ``DeadlineTimer/shared``; whether the race ended.
        private let state = Locked<(tasks: [Task<Void, Never>], delay: Deadline?, ended: Bool)>(([], nil, false))

        init(events: RaceEvents, context: RequestContext) {
            self.events = events
            self.context = context
        }

        func add(_ task: Task<Void, Never>) { state.withLock { $0.tasks.append(task) } }

        /// Says `.due` once `delay` has passed: on the shared deadline timer when the delay is on a
        /// system clock (no task, and nothing left behind when the race ends first), else in a task
        /// that sleeps on the delay's clock.
        func armHedge(after delay: Duration, on clock: any Clock<Duration>) {
            let due = Deadline(after: delay, on: clock)
            guard due.firesOnSystemTimer else {
                add(
                    Task { [events] in
                        do { try await due.sleep() } catch { return }
                        events.yield(.due)
                    })
                return
            }
            let armed = state.withLock { state -> Bool in
                guard !state.ended else { return false }
                state.delay = due
                return true
            }
            if armed { DeadlineTimer.shared.schedule(self, after: due.remaining() ?? .zero) }
        }

        func deadlineTimerFired() {
            // The timer runs on the system's monotonic time; the delay's own clock decides.
            let due = state.withLock { state -> Deadline? in
                guard !state.ended, let delay = state.delay else { return nil }
                if delay.hasPassed() { state.delay = nil }
                return delay
            }
            guard let due else { return }
            if due.hasPassed() {
                events.yield(.due)
            } else {
                DeadlineTimer.shared.schedule(self, after: due.remaining() ?? .zero)
            }
        }

        var deadlineTimerIsDone: Bool { state.withLock { $0.ended } }

        /// Cancels every attempt and timer still running; the race reads no further event.
        func end() {
            events.finish()
            let (tasks, pending) = state.withLock { state in
                state.ended = true
                defer { state.delay = nil }
                return (state.tasks, state.delay != nil)
            }
            if pending { DeadlineTimer.shared.cancel() }
            for task in tasks { task.cancel() }
        }

        /// `cancel()` on an interruptible request ends the race at once; on any other request the
        /// attempts see the cancellation where a lone attempt would.
        func interrupt() {
            if context.isInterruptible { end() }
        }
    }

    /// Whether `request` is hedged by `plan`'s hedging member: a request that can be sent twice
    /// at once (no one-shot body, no transfer: both attempts would write to the same place), and
    /// not already an attempt of a race.
    @inline(never)
    func hedger(for request: HTTPRequest, plan: HookPlan, context: RequestContext) -> (any RequestHedging)? {
        // An attempt already in a race (its view) is not raced again.
        guard let hedger = plan.hedging?.member, !context.isAttemptView, context.transfer == nil, request.bodyStream == nil,
            hedger.mayHedge(request, context: context)
        else { return nil }
        return hedger
    }

    /// Attempts of one request raced (contract rule 20): attempt number `attempt` starts; each
    /// time the hedge delay passes with every attempt still unanswered, one more starts beside
    /// them, up to the hedging limit and the attempt cap, each spending the retry budget. The
    /// first acceptable answer wins and the others are cancelled (they end as cancelled
    /// attempts, their hooks balanced). When every attempt failed, the race ends with the last
    /// failure, for the retry decision, as a lone attempt would.
    ///
    /// Each attempt runs its per-attempt hooks with a view of the context of its own
    /// (``RequestContext/attemptView(_:)``); the request goes on with the view of the attempt
    /// whose answer it keeps. `beforeSend` runs once, in the caller's task, after the request's
    /// first attempt is prepared. The context's ``RequestContext/attempt`` is the winner's number
    /// after a race won, the last one sent after a race lost (the loop reads it from there).
    @inline(never)
    func race(
        _ request: HTTPRequest, plan: HookPlan, context: RequestContext, timeout: Duration?, began: inout Bool,
        hedger: any RequestHedging
    ) async -> Exchange {
        let (cancelled, interruptible) = context.cancellationState
        if cancelled || Task.isCancelled { return .failed(.cancelled, nil) }
        if timeout == .zero { return .failed(.timedOut, nil) }
        // The request's first attempt is prepared here and `beforeSend` runs in the caller's task
        // (it must end before any attempt of the race starts); the attempt's send then runs beside
        // the others.
        var first: (request: HTTPRequest, deadline: Deadline?)?
        if !began {
            let deadline = timeout.map { Deadline(after: $0, on: timeoutClock) }
            if let deadline, !plan.sendsDirectly { context.setAttemptDeadline(deadline) }
            switch await guardedPrepare(
                request, plan: plan, context: context, deadline: deadline, interrupter: interruptible ? context : nil)
            {
            case .success(let prepared):
                first = (prepared, deadline)
                began = true
                if !plan.beforeSend.isEmpty { await plan.runBeforeSend(prepared, context: context) }
            case .failure(let error): return .failed(error, nil)
            }
            if context.isCancelled || Task.isCancelled { return .failed(.cancelled, nil) }
        }

        let events = RaceEvents()
        let race = Race(events: events, context: context)
        context.setInterruptTarget(race)
        defer {
            context.setInterruptTarget(nil)
            race.end()
        }
        let origin = context.requestOrigin
        let account = budgetAccount(of: request, context: context, budget: retryBudget)
        let clock = self.clock
        let start = context.attempt
        var launched = 0
        var inFlight = 0
        var report = HedgeReport()

        func launch(prepared: (request: HTTPRequest, deadline: Deadline?)?) {
            let number = start + launched
            let view = context.attemptView(number)
            launched += 1
            inFlight += 1
            race.add(
                Task {
                    var exchange: Exchange?
                    let latency = await clock.measure {
                        if let prepared {
                            exchange = await self.exchangePrepared(
                                prepared.request, plan: plan, context: view, deadline: prepared.deadline)
                        } else {
                            // A hedge runs within what is left of the request's total timeout.
                            var began = true
                            let bounded = Self.timeout(timeout, within: request.totalDeadline)
                            exchange = await self.attempt(
                                request, plan: plan, context: view, timeout: bounded, began: &began)
                        }
                    }
                    events.yield(
                        .answered(
                            attempt: number, exchange: exchange ?? .failed(.cancelled, nil), latency: latency,
                            view: view))
                })
        }
        /// Starts the hedge timer if one more attempt may follow.
        func armTimer() {
            guard launched < hedger.hedgingLimit, start + launched <= attemptLimit else { return }
            race.armHedge(after: hedger.hedgeDelay(for: origin).clampedForConveyor, on: clock)
        }
        /// Ends the race with `exchange`: the request goes on with the view of the attempt that
        /// gave it, numbered as that attempt when it won, as the last one sent when it failed
        /// (the retry decision counts every attempt sent).
        func finish(_ exchange: Exchange, view: RequestContext, number: Int) -> Exchange {
            context.adopt(view)
            if case .received = exchange { context.setAttempt(number) } else { context.setAttempt(start + launched - 1) }
            if report != HedgeReport() { context.noteHedges(report) }
            return exchange
        }

        launch(prepared: first)
        armTimer()
        var lastFailure: (exchange: Exchange, view: RequestContext, number: Int)?
        while let event = await events.next() {
            switch event {
            case .due:
                // No hedge starts once the request's total timeout has passed.
                guard inFlight > 0, !context.isCancelled, launched < hedger.hedgingLimit,
                    start + launched <= attemptLimit, request.totalDeadline?.hasPassed() != true
                else { continue }
                guard hedgeAllowed(by: account) else {
                    report.refused = true
                    continue
                }
                report.sent += 1
                launch(prepared: nil)
                armTimer()
            case .answered(let number, let exchange, let latency, let view):
                inFlight -= 1
                if case .received = exchange {
                    hedger.recordLatency(latency, origin: origin)
                    if number != start { report.won = true }
                    report.cancelled = inFlight  // the losers, cancelled as the race ends
                    return finish(exchange, view: view, number: number)
                }
                lastFailure = (exchange, view, number)
                // A failure waits for the attempts still in flight; once none is, the retry
                // decision takes it, as after a lone attempt.
                if inFlight == 0 || context.isCancelled {
                    report.cancelled = inFlight
                    return finish(exchange, view: view, number: number)
                }
            }
        }
        // The caller's task was cancelled, or `cancel()` interrupted the race: every attempt in
        // flight is cancelled as it ends.
        report.cancelled = inFlight
        if let lastFailure {
            _ = finish(lastFailure.exchange, view: lastFailure.view, number: lastFailure.number)
        } else if report != HedgeReport() {
            context.noteHedges(report)
        }
        return .failed(.cancelled, nil)
    }

    /// Whether the retry budget lets one more hedge go (a hedge is a request the caller did not
    /// send: contract rule 19). A refusal is not the request's end: the attempts in flight go on.
    private func hedgeAllowed(by account: RetryBudgetAccount?) -> Bool {
        guard let account, let retryBudget else { return true }
        return account.withdraw(retryBudget)
    }

    /// Sends an attempt already prepared (a request's first, in a race), under its deadline.
    private func exchangePrepared(_ prepared: HTTPRequest, plan: HookPlan, context: RequestContext, deadline: Deadline?)
        async -> Exchange
    {
        if deadline != nil || !transportHonorsCancellation {
            let (outcome, _, _) = await GuardedStep.run(deadline: deadline, cancelledBy: nil) { step in
                await self.exchange(prepared, plan: plan, context: context, step: step)
            }
            switch outcome {
            case .finished(let exchange): return exchange
            case .timedOut: return .failed(.timedOut, nil)
            case .cancelled: return .failed(.cancelled, nil)
            }
        }
        return await exchange(prepared, plan: plan, context: context, step: nil)
    }
}

/// What the overload mechanisms did for one request: read it in `afterSuccess` or `afterFailure`
/// to report their decisions (`ResilienceMetricsBehavior` in the Integrations package records it
/// in swift-metrics; `LoggingBehavior` puts it in its line).
public struct ResilienceReport: Sendable, Hashable {
    /// Whether the origin's retry budget refused a retry or reconnect a behavior asked for.
    public let retryRefused: Bool
    /// How long `RateLimitBehavior` held the request's attempts back, in all (zero: not at all).
    public let pacedFor: Duration
    /// How many hedges `HedgingBehavior` sent beside an attempt in flight.
    public let hedgesSent: Int
    /// Whether a hedge gave the answer the request kept.
    public let hedgeWon: Bool
    /// Whether the retry budget refused a hedge.
    public let hedgeRefused: Bool
    /// How many attempts of a hedged request were cancelled because another answered first, or
    /// because the request ended while they were in flight.
    public let hedgesCancelled: Int
}

extension RequestContext {
    /// What the overload mechanisms did for this request so far (complete once it has ended: in
    /// `afterSuccess` and `afterFailure`).
    public var resilienceReport: ResilienceReport {
        let hedges = hedgeReport ?? HedgeReport()
        return ResilienceReport(
            retryRefused: retryRefusal != nil, pacedFor: pacedFor ?? .zero, hedgesSent: hedges.sent,
            hedgeWon: hedges.won, hedgeRefused: hedges.refused, hedgesCancelled: hedges.cancelled)
    }
}
