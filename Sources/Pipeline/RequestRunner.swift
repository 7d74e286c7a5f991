import Foundation

/// The engine: runs one logical request through a behavior chain and a transport, implementing
/// the design contract (order, header merge, attempts vs requests, balance, retries on a clock).
///
/// It is built once per client and holds no per-request state; everything a request needs
/// lives in its ``RequestContext`` and on the stack of ``run(_:plan:context:decode:)``.
package struct RequestRunner: Sendable {
    package let transport: any HTTPTransport
    /// The clock retry waits sleep on.
    package let clock: any Clock<Duration>
    /// The clock timeouts are measured on.
    package let timeoutClock: any Clock<Duration>
    /// Hard cap on attempts per logical request, whatever behaviors decide.
    package let attemptLimit: Int
    package let acceptableStatusCodes: Set<Int>
    /// Read once: the acceptable codes are 200...299 (the default), judged without hashing.
    let acceptsExactly2xx: Bool
    /// Read once: a transport that honors cancellation is called directly when nothing else
    /// needs guarding.
    let transportHonorsCancellation: Bool
    /// Read once: a transport that streams gets body streams and transfers as they are.
    let streamingTransport: (any StreamingHTTPTransport)?
    /// What the requests of this runner may send that their callers did not (contract rule 19);
    /// `nil`: no limit but the attempt cap.
    package var retryBudget: RetryBudget? { budgeting?.budget }
    /// The budget and its account for the client's base origin, found once: one reference, so
    /// that the runner (copied into every request's frame) grows by one word.
    let budgeting: Budgeting?

    /// A retry budget and the account of the client's base origin in it.
    final class Budgeting: Sendable {
        let budget: RetryBudget
        let baseAccount: RetryBudgetAccount?
        /// ``baseAccount`` again, without a count of its own: this object keeps the account
        /// alive, so a deposit reaches it without a retain and a release (40 instructions).
        private let baseAccountReference: Unmanaged<RetryBudgetAccount>?

        init(budget: RetryBudget, baseOrigin: Origin?) {
            self.budget = budget
            let baseAccount = baseOrigin.map { budget.account(for: $0, pinned: true) }
            self.baseAccount = baseAccount
            self.baseAccountReference = baseAccount.map { Unmanaged.passUnretained($0) }
        }

        /// Counts `request` in its origin's account: the base origin's, held here, for a request
        /// to it (read from `self`, so neither it nor the account is retained for the call).
        func deposit(_ request: HTTPRequest, context: RequestContext) {
            if context.targetsBaseOrigin, let baseAccountReference {
                baseAccountReference._withUnsafeGuaranteedRef { $0.deposit(budget) }
            } else if let origin = Origin(request.url) {
                budget.account(for: origin).deposit(budget)
            }
        }
    }

    package init(
        transport: any HTTPTransport, clock: any Clock<Duration> = ContinuousClock(),
        timeoutClock: any Clock<Duration> = ContinuousClock(), attemptLimit: Int = 10,
        acceptableStatusCodes: Set<Int> = Set(200..<300), retryBudget: RetryBudget? = nil, baseOrigin: Origin? = nil
    ) {
        self.budgeting = retryBudget.map { Budgeting(budget: $0, baseOrigin: baseOrigin) }
        self.transport = transport
        self.clock = clock
        self.timeoutClock = timeoutClock
        self.attemptLimit = max(1, attemptLimit)
        self.acceptableStatusCodes = acceptableStatusCodes
        self.acceptsExactly2xx = acceptableStatusCodes == Set(200..<300)
        self.transportHonorsCancellation = transport.honorsCancellation
        self.streamingTransport = transport as? any StreamingHTTPTransport
    }

    /// What one attempt came to, before decoding.
    enum Exchange: Sendable {
        /// A response with an acceptable status that every `validate` hook accepted.
        case received(HTTPResponse)
        /// The attempt failed; the response, if one arrived, is kept for `retryDecision`.
        case failed(NetworkError, HTTPResponse?)
    }

    /// Runs `request` through the hooks of `plan` until it succeeds, fails for good or is cancelled.
    ///
    /// - `additionalHeaders`, `modify`, `validate`, `retryDecision` run for every attempt;
    /// - `beforeSend` runs once, after the first attempt is prepared; from then on exactly one of
    ///   `afterSuccess` / `afterFailure` runs before this returns or throws. If the first attempt
    ///   cannot be prepared, nothing was sent and no once-per-request hook runs.
    /// - `decode` turns the final response into the output; its failure fails the attempt.
    /// - With a timeout, each attempt (preparing, sending, validating) must end within it, and so
    ///   must the retry decision after a failed attempt; a step that overruns is abandoned.
    ///   Cancellation ends every step and wait at once. `beforeSend`, `afterSuccess` and
    ///   `afterFailure` always run to completion in the caller's task (they keep the balance).
    ///
    /// Every attempt goes through ``attempt(_:plan:context:timeout:began:)``, and a request ends in
    /// exactly two places: `afterSuccess` after a decoded response, `afterFailure` after
    /// ``afterFailedAttempt(_:response:attempt:request:plan:context:timeout:)`` says it ends.
    package func run<Output>(
        _ request: HTTPRequest, plan: HookPlan, context: RequestContext,
        decode: (HTTPResponse) throws -> Output
    ) async throws(NetworkError) -> Output {
        var attempt = 1
        /// The first attempt since the taker last reconnected: the attempt cap counts from it.
        var runStart = 1
        var began = false
        var timeout = request.timeout?.clampedForConveyor
        // A request with a total timeout (its extras carry the deadline): each attempt runs within
        // what is left of it. One pointer test for every other request.
        let attemptTimeout = timeout
        if request.extras != nil { timeout = Self.attemptTimeout(attemptTimeout, of: request, context: context) }
        // Only a request that can be sent again counts: one whose chain can decide a retry, or
        // whose taker can reconnect. A request that cannot pays nothing for the budget.
        if let budgeting, !plan.retryDecision.isEmpty || context.transfer != nil || plan.hedges {
            budgeting.deposit(request, context: context)
        }
        while true {
            let failure: NetworkError
            let response: HTTPResponse?
            switch await self.attempt(request, plan: plan, context: context, timeout: timeout, began: &began) {
            case .received(let received):
                do throws(NetworkError) {
                    let output = try Self.decodeOutput(received, decode)
                    if !plan.afterSuccess.isEmpty { await plan.runAfterSuccess(received, context: context) }
                    return output
                } catch {
                    failure = error
                    response = received  // kept for `retryDecision`
                }
            case .failed(let error, let kept):
                failure = error
                response = kept
            }
            // Nothing was sent and no `beforeSend` ran: no once-per-request hook follows.
            guard began else { throw failure }
            // A race (a hedged request) may have sent more than one attempt: it numbered the last.
            if plan.hedges { attempt = max(attempt, context.attempt) }
            switch await afterFailedAttempt(
                failure, response: response ?? failure.response, attempt: attempt - runStart + 1, request: request,
                plan: plan, context: context, timeout: timeout)
            {
            case .retry:
                attempt += 1
                context.setAttempt(attempt)
                if request.extras != nil { timeout = Self.attemptTimeout(attemptTimeout, of: request, context: context) }
            case .reconnect:
                attempt += 1
                runStart = attempt
                context.startRun(at: attempt)
            case .end(let final):
                await plan.runAfterFailure(final, context: context)
                throw final
            case .succeed(let settled):
                return try await Self.succeed(with: settled.response, plan: plan, context: context, decode: decode)
            }
        }
    }

    /// The time a step may take: `timeout`, or what is left of the request's total timeout if that
    /// is shorter (zero once the total has passed).
    static func timeout(_ timeout: Duration?, within total: Deadline?) -> Duration? {
        guard let total else { return timeout }
        let left = total.remaining() ?? .zero
        guard let timeout else { return left }
        return min(timeout, left)
    }

    /// `timeout`, bounded by what is left of the request's total timeout if it has one (and is not
    /// an event stream). Out of line: only a request with extras gets here.
    @inline(never)
    static func attemptTimeout(_ timeout: Duration?, of request: HTTPRequest, context: RequestContext) -> Duration? {
        Self.timeout(timeout, within: totalDeadline(of: request, context: context))
    }

    /// The request's total deadline, unless it is an event stream's (which has none).
    static func totalDeadline(of request: HTTPRequest, context: RequestContext) -> Deadline? {
        guard let total = request.totalDeadline, context.transfer?.timesOutWhenIdle != true else { return nil }
        return total
    }

    /// Counts `request` in its origin's budget account. Out of line: one call on the success path.
    @inline(never)
    /// The budget account `request` counts in: the base origin's, found once, for a request to
    /// it; another origin's looked up. `nil` for a URL with no origin, or with no budget.
    func budgetAccount(of request: HTTPRequest, context: RequestContext, budget: RetryBudget?) -> RetryBudgetAccount? {
        guard let budget else { return nil }
        if context.targetsBaseOrigin, let baseAccount = budgeting?.baseAccount { return baseAccount }
        return Origin(request.url).map { budget.account(for: $0) }
    }

    /// Whether the budget lets the request send one more attempt its caller did not ask for; a
    /// refusal is noted in the context (the logging behavior says why the request ended). An
    /// `exempt` resend (after progress, or with a refreshed credential) is counted, never refused.
    func budgetAllowsResending(_ account: RetryBudgetAccount?, exempt: Bool, context: RequestContext) -> Bool {
        guard let account, let retryBudget else { return true }
        if exempt {
            account.countExempt(retryBudget)
            return true
        }
        if account.withdraw(retryBudget) { return true }
        context.noteRetryRefused(RetryRefusal(origin: account.origin))
        return false
    }

    /// Ends a request as a success with the response a taker settled on (it stopped the
    /// transfer itself). Out of line: only event streams get here.
    @inline(never)
    static func succeed<Output>(
        with head: HTTPResponse, plan: HookPlan, context: RequestContext, decode: (HTTPResponse) throws -> Output
    ) async throws(NetworkError) -> Output {
        do throws(NetworkError) {
            let output = try decodeOutput(head, decode)
            if !plan.afterSuccess.isEmpty { await plan.runAfterSuccess(head, context: context) }
            return output
        } catch {
            await plan.runAfterFailure(error, context: context)
            throw error
        }
    }

    /// A response a taker settled on, in a box.
    final class SettledResponse: Sendable {
        let response: HTTPResponse
        init(_ response: HTTPResponse) { self.response = response }
    }

    /// What follows a failed attempt.
    enum AfterFailure {
        /// Send the request again.
        case retry
        /// Send the request again as a new run of attempts (the taker reconnects).
        case reconnect
        /// The request ends with this error (`afterFailure` runs with it).
        case end(NetworkError)
        /// The request ends as a success with this response (the taker stopped the transfer).
        /// Boxed, so that this value (in every request's frame) stays two words wide.
        case succeed(SettledResponse)
    }

    /// Decides what follows a failed attempt: a taker that finished ends it as a success;
    /// cancellation ends the request; a taker that decides (an event stream reconnecting) is
    /// followed; otherwise the chain's `retryDecision` is asked (under the request's timeout), and
    /// a retry waits its backoff. `attempt` counts from the last reconnect.
    func afterFailedAttempt(
        _ failure: NetworkError, response: HTTPResponse?, attempt: Int, request: HTTPRequest, plan: HookPlan,
        context: RequestContext, timeout: Duration?
    ) async -> AfterFailure {
        let account = budgetAccount(of: request, context: context, budget: retryBudget)
        let decided = await context.transfer?.decision(after: failure)
        switch decided {
        case .finish(let head): return .succeed(SettledResponse(head))
        case .end(let error): return .end(error)  // the taker knows better than "cancelled" (a limit it stopped at)
        default: break
        }
        if failure.isCancellation || Task.isCancelled || context.isCancelled { return .end(.cancelled) }
        switch decided {
        case .reconnect(let delay, let progressed):
            // A one-shot body already read cannot be sent again, whoever asks.
            if let reason = Self.retryForbiddenReason(request, context: context) {
                return .end(.notRetryable(after: failure, reason: reason))
            }
            // A refused reconnect ends the stream with what ended the last connection. One after a
            // connection that delivered events is counted, never refused: the stream was working.
            guard budgetAllowsResending(account, exempt: progressed, context: context) else { return .end(failure) }
            let wait = delay.clampedForConveyor
            if wait > .zero, await !backoff(wait, context: context) { return .end(.cancelled) }
            if Task.isCancelled || context.isCancelled { return .end(.cancelled) }
            return .reconnect
        case .finish, .end, nil: break
        }
        guard attempt < attemptLimit, !plan.retryDecision.isEmpty else { return .end(failure) }
        // The request's total timeout has passed: no decision is asked, nothing more is sent.
        let total = Self.totalDeadline(of: request, context: context)
        if let total, total.hasPassed() { return .end(failure) }
        var failure = failure
        let decision: RetryDecision
        switch await decide(
            after: failure, response: response, plan: plan, context: context, timeout: Self.timeout(timeout, within: total))
        {
        case .finished(let answer): decision = answer
        case .timedOut: failure = .timedOut; decision = .doNotRetry
        case .cancelled: failure = .cancelled; decision = .doNotRetry
        }
        if failure.isCancellation || Task.isCancelled || context.isCancelled { return .end(.cancelled) }
        guard case .retry(let delay) = decision else { return .end(failure) }
        if let reason = Self.retryForbiddenReason(request, context: context) { return .end(.notRetryable(after: failure, reason: reason)) }
        // A refused retry ends the request with the failure it would have retried: the server's
        // answer or the transport's error, not a new error that hides it. A retry with a credential
        // just refreshed is counted, never refused (at most one per refresh of a request).
        let withNewCredential = context.takeRetryWithNewCredential()
        let wait = delay.clampedForConveyor
        // A retry that could not start before the request's total timeout is not made: the request
        // ends with the failure it would have retried, as a refused one does (and spends nothing).
        if let total, wait >= total.remaining() ?? .zero { return .end(failure) }
        guard budgetAllowsResending(account, exempt: withNewCredential, context: context) else { return .end(failure) }
        if wait > .zero, await !backoff(wait, context: context) { return .end(.cancelled) }
        if Task.isCancelled || context.isCancelled { return .end(.cancelled) }
        return .retry
    }

    /// One attempt, whatever the transport and the guard: prepares it, runs `beforeSend` once
    /// the request's first attempt is prepared, sends it and judges the response.
    ///
    /// A phase runs in a ``GuardedStep`` when something must be able to end it early: a deadline
    /// (the request's timeout), an interruptible context, or (for the send) a transport that does
    /// not honor cancellation. Otherwise it runs directly in the caller's task, with no task
    /// created. A guarded attempt is one step; a first attempt with `beforeSend` members runs them in
    /// it, shielded (``firstGuardedAttempt(_:plan:context:deadline:interrupter:began:)``). Sets
    /// `began` once the first attempt is prepared (and its `beforeSend` hooks run).
    /// Inlined into the loop, so the common case stays one async frame.
    @inline(__always)
    func attempt(
        _ request: HTTPRequest, plan: HookPlan, context: RequestContext, timeout: Duration?, began: inout Bool
    ) async -> Exchange {
        if plan.hedges, let hedger = hedger(for: request, plan: plan, context: context) {
            return await race(request, plan: plan, context: context, timeout: timeout, began: &began, hedger: hedger)
        }
        let (cancelled, interruptible) = context.cancellationState
        if cancelled || Task.isCancelled { return .failed(.cancelled, nil) }
        if timeout == .zero { return .failed(.timedOut, nil) }  // no time at all: nothing is sent
        let deadline = Self.deadline(timeout, transfer: context.transfer, on: timeoutClock)
        if let deadline, !plan.sendsDirectly { context.setAttemptDeadline(deadline) }
        let guarded = deadline != nil || interruptible
        let interrupter = interruptible ? context : nil

        if guarded {
            if !began && !plan.beforeSend.isEmpty {
                return await firstGuardedAttempt(
                    request, plan: plan, context: context, deadline: deadline, interrupter: interrupter, began: &began)
            }
            let (outcome, checkpoints, cancelledItself) = await GuardedStep.run(
                deadline: deadline, cancelledBy: interrupter
            ) { step in
                await self.prepareAndExchange(request, plan: plan, context: context, step: step)
            }
            if checkpoints > 0 { began = true }  // prepared: the attempt counts as begun
            if cancelledItself { context.cancel() }
            return Self.exchange(from: outcome)
        }

        // Nothing to prepare (no `additionalHeaders`, `modify` or `intercept` member): the request
        // is sent as it is, with no copy of it made for the attempt. Its end repeats the end of
        // the path below on purpose: one inlined function for both cost every request 77
        // instructions more (noop0 7,214 -> 7,291, measured side by side).
        if !guarded && plan.additionalHeaders.isEmpty && plan.modify.isEmpty && plan.intercept.isEmpty {
            do throws(NetworkError) {
                try Self.checkHeaders(of: request)
            } catch {
                return .failed(error, nil)
            }
            if !began {
                began = true
                if !plan.beforeSend.isEmpty { await plan.runBeforeSend(request, context: context) }
            }
            let (cancelledNow, nowInterruptible) = context.cancellationState
            if cancelledNow || Task.isCancelled { return .failed(.cancelled, nil) }
            if nowInterruptible || !transportHonorsCancellation {
                return await guardedExchange(
                    request, plan: plan, context: context, deadline: nil, interruptible: nowInterruptible)
            }
            return await exchange(request, plan: plan, context: context, step: nil)
        }

        let prepared: HTTPRequest
        switch await guardedPrepare(request, plan: plan, context: context, deadline: deadline, interrupter: interrupter) {
        case .success(let attempt): prepared = attempt
        case .failure(let error): return .failed(error, nil)
        }
        if !began {
            began = true
            if !plan.beforeSend.isEmpty { await plan.runBeforeSend(prepared, context: context) }
        }
        // One read of the context for both: a hook may have cancelled the request or made it
        // interruptible.
        let (cancelledNow, nowInterruptible) = context.cancellationState
        if cancelledNow || Task.isCancelled { return .failed(.cancelled, nil) }
        if deadline != nil || nowInterruptible || !transportHonorsCancellation {
            return await guardedExchange(
                prepared, plan: plan, context: context, deadline: deadline, interruptible: nowInterruptible)
        }
        return await exchange(prepared, plan: plan, context: context, step: nil)
    }

    /// Prepares an attempt: in a guarded step when it has a deadline or an interrupter and hooks
    /// to run, else in the caller's task.
    @inline(__always)
    func guardedPrepare(
        _ request: HTTPRequest, plan: HookPlan, context: RequestContext, deadline: Deadline?,
        interrupter: RequestContext?
    ) async -> Result<HTTPRequest, NetworkError> {
        guard deadline != nil || interrupter != nil, !(plan.additionalHeaders.isEmpty && plan.modify.isEmpty) else {
            do throws(NetworkError) {
                return .success(try await prepare(request, plan: plan, context: context, step: nil))
            } catch {
                return .failure(error)
            }
        }
        let (outcome, _, cancelledItself) = await GuardedStep.run(deadline: deadline, cancelledBy: interrupter) {
            step -> Result<HTTPRequest, NetworkError> in
            do throws(NetworkError) {
                return .success(try await self.prepare(request, plan: plan, context: context, step: step))
            } catch {
                return .failure(error)
            }
        }
        // A hook cancelled the step's task: the request is cancelled, as it would be had the
        // hook run in the caller's task.
        if cancelledItself { context.cancel() }
        switch outcome {
        case .finished(let result): return result
        case .timedOut: return .failure(.timedOut)
        case .cancelled: return .failure(.cancelled)
        }
    }

    /// An attempt's deadline: the request's timeout (bounded by what is left of its total timeout,
    /// ``attemptTimeout(_:of:context:)``), or for an event stream its idle timeout alone (the
    /// attempt lasts while bytes keep coming; `nil` there is no limit, whatever the request's
    /// timeouts).
    @inline(never)
    static func deadline(_ timeout: Duration?, transfer: TransferHandler?, on clock: any Clock<Duration>) -> Deadline? {
        guard let transfer, transfer.timesOutWhenIdle else { return timeout.map { Deadline(after: $0, on: clock) } }
        guard let idle = transfer.idleTimeout else { return nil }
        let watched = Deadline(idle: idle, on: clock)
        transfer.watch(watched.activity)
        return watched
    }

    /// Sends and judges a prepared attempt in a guarded step.
    private func guardedExchange(
        _ prepared: HTTPRequest, plan: HookPlan, context: RequestContext, deadline: Deadline?, interruptible: Bool
    ) async -> Exchange {
        let (outcome, _, cancelledItself) = await GuardedStep.run(
            deadline: deadline, cancelledBy: interruptible ? context : nil
        ) { step in
            await self.exchange(prepared, plan: plan, context: context, step: step)
        }
        if cancelledItself { context.cancel() }
        return Self.exchange(from: outcome)
    }

    private static func exchange(from outcome: GuardedStep<Exchange>.Outcome) -> Exchange {
        switch outcome {
        case .finished(let exchange): exchange
        case .timedOut: .failed(.timedOut, nil)
        case .cancelled: .failed(.cancelled, nil)
        }
    }

    /// A whole attempt inside one guarded step.
    private func prepareAndExchange(
        _ request: HTTPRequest, plan: HookPlan, context: RequestContext, step: GuardedStep<Exchange>
    ) async -> Exchange {
        let prepared: HTTPRequest
        do throws(NetworkError) {
            prepared = try await prepare(request, plan: plan, context: context, step: step)
        } catch {
            return .failed(error, nil)
        }
        guard step.checkpoint() else { return .failed(.cancelled, nil) }
        if Task.isCancelled || context.isCancelled { return .failed(.cancelled, nil) }
        return await exchange(prepared, plan: plan, context: context, step: step)
    }

    /// A request's first attempt, guarded, with `beforeSend` members: one step that prepares the
    /// attempt, runs the `beforeSend` hooks in its shield (the step does not end while they run,
    /// as if they ran in the caller's task between two steps) and sends it. One step, not two: a
    /// step and its thread hops cost about 16,000 instructions. Out of line: once per request.
    @inline(never)
    private func firstGuardedAttempt(
        _ request: HTTPRequest, plan: HookPlan, context: RequestContext, deadline: Deadline?,
        interrupter: RequestContext?, began: inout Bool
    ) async -> Exchange {
        let (outcome, checkpoints, cancelledItself) = await GuardedStep.run(
            deadline: deadline, cancelledBy: interrupter
        ) { (step: GuardedStep<Exchange>) -> Exchange in
            let prepared: HTTPRequest
            do throws(NetworkError) {
                prepared = try await self.prepare(request, plan: plan, context: context, step: step)
            } catch {
                return .failed(error, nil)
            }
            // Never abandoned halfway: what these hooks begin, the outcome hooks end.
            guard step.beginShield() else { return .failed(.cancelled, nil) }
            await plan.runBeforeSend(prepared, context: context)
            // A hook may have made the request interruptible: `cancel()` now ends this step (at once
            // if it was called already, once the shield is down).
            if interrupter == nil, context.isInterruptible { context.setInterruptTarget(step) }
            step.endShield()
            if Task.isCancelled || context.isCancelled { return .failed(.cancelled, nil) }
            return await self.exchange(prepared, plan: plan, context: context, step: step)
        }
        // The shield went up: the `beforeSend` hooks ran, and the attempt counts as begun.
        if checkpoints > 0 { began = true }
        // The step may have been the target of `cancel()` through a hook: no longer.
        if interrupter == nil { context.setInterruptTarget(nil) }
        if cancelledItself { context.cancel() }
        return Self.exchange(from: outcome)
    }

    /// Sends a prepared attempt and judges the response: size, acceptable status, then
    /// `validate` hooks (last to first). `step` is the guarded step it runs in, if any.
    @inline(__always)
    func exchange(_ prepared: HTTPRequest, plan: HookPlan, context: RequestContext, step: GuardedStep<Exchange>?)
        async -> Exchange
    {
        // An abandoned step never sends: the caller already has its answer.
        if let step, !step.checkpoint() { return .failed(.cancelled, nil) }
        let received: HTTPResponse
        do throws(NetworkError) {
            if plan.intercept.isEmpty {
                // Straight to the transport, through the gates if the chain has any: one call
                // site of the transport, inlined here (called out of line on the gated path, its
                // frame and executor hop cost each gate about 340 instructions). Admission is
                // synchronous unless a gate holds the exchange back.
                let gated = !plan.gates.isEmpty
                var passes = GatePasses()
                if gated { passes = try await plan.admitThroughGates(prepared, context: context, step: step) }
                let answer: HTTPResponse
                do throws(NetworkError) {
                    answer = try await transportSend(prepared, transfer: context.transfer)
                    // A response that arrived after the deadline is a timeout (the timer may not
                    // have run yet on a busy machine), before any gate counts it.
                    if let step, step.isPastDeadline { throw .timedOut }
                } catch {
                    if gated { plan.releaseGates(passes, failed: error, context: context) }
                    throw error
                }
                if gated { plan.releaseGates(passes, answered: answer, context: context) }
                // Consumed: a copy of it for `judged` cost 425 instructions.
                received = try judged(consume answer)
            } else {
                received = try await intercepted(prepared, plan: plan, context: context, step: step)
            }
        } catch {
            return .failed(error, nil)
        }
        if !plan.validate.isEmpty {
            do throws(NetworkError) {
                try await plan.runValidate(received, context: context, step: step)
            } catch {
                return .failed(error, received)
            }
        }
        return .received(received)
    }

    /// The response, if its status is acceptable.
    @inline(__always)
    func judged(_ received: consuming HTTPResponse) throws(NetworkError) -> HTTPResponse {
        let acceptable =
            acceptsExactly2xx ? (200..<300).contains(received.status) : acceptableStatusCodes.contains(received.status)
        guard acceptable else { throw .unacceptableStatus(received) }
        return received
    }

    /// Sends an attempt through the chain's `intercept` members and judges the response. Out of
    /// line, so that the common path (no member) is what it was before `intercept` existed.
    @inline(never)
    func intercepted(_ prepared: HTTPRequest, plan: HookPlan, context: RequestContext, step: (any StepSignal)?)
        async throws(NetworkError) -> HTTPResponse
    {
        // An abandoned step reaches no further member and never the transport, whichever member
        // calls `next`.
        let transfer = context.transfer
        let preparedURL = prepared.url
        let received = try await plan.runIntercept(prepared, context: context, step: step) {
            request throws(NetworkError) in
            // A member that sent it to another origin sends no credential there (as after
            // `modify`); `prepare` marked the URL, so an unchanged one costs one flag read.
            let response =
                request.urlUnchangedSinceMark
                ? try await self.transportSend(request, transfer: transfer)
                : try await self.transportSend(Self.scoped(request, from: preparedURL), transfer: transfer)
            // After the deadline, the transport's response is a timeout before any member sees
            // it: a cache does not store it, a shared call does not hand it on.
            if let step, step.isPastDeadline { throw .timedOut }
            return response
        }
        return try judged(received)
    }

    /// Why a request whose attempt failed may not be sent again: a one-shot body already read,
    /// or a streamed response the caller has already begun to read.
    static func retryForbiddenReason(_ request: HTTPRequest, context: RequestContext) -> String? {
        if let stream = request.bodyStream, stream.wasReadOnce { return HTTPBodyStream.alreadyRead }
        return context.transfer?.retryForbiddenReason(for: request, context: context)
    }

    /// Calls the transport and checks the response's framing (``FramingPolicy``) and the body's size.
    @inline(__always)
    func transportSend(_ request: HTTPRequest, transfer: TransferHandler?) async throws(NetworkError) -> HTTPResponse {
        let received: HTTPResponse
        do {
            if let transfer {
                guard let streamingTransport else { return try await bufferedSend(request, transfer: transfer) }
                transfer.beginAttempt()
                do {
                    received = try await streamingTransport.send(request, transfer: transfer)
                    try transfer.bodyEnded()
                } catch {
                    throw transfer.failure(NetworkError(transportError: error))
                }
            } else if request.bodyStream != nil, streamingTransport == nil {
                return try await bufferedSend(request, transfer: nil)
            } else {
                received = try await transport.send(request)
            }
        } catch {
            throw NetworkError(transportError: error)
        }
        try FramingPolicy.check(received.headers)
        if let limit = request.maxResponseSize, received.body.count > limit { throw .responseTooLarge(limit: limit) }
        return received
    }

    /// For a transport that does not stream: reads a body stream into memory first, and hands
    /// the whole response to the transfer afterwards.
    @inline(never)
    func bufferedSend(_ request: HTTPRequest, transfer: TransferHandler?) async throws(NetworkError) -> HTTPResponse {
        var buffered = request
        if let stream = request.bodyStream {
            buffered.body = try await stream.collect()
        }
        var received: HTTPResponse
        do {
            received = try await transport.send(buffered)
        } catch {
            throw NetworkError(transportError: error)
        }
        try FramingPolicy.check(received.headers)
        if let limit = request.maxResponseSize, received.body.count > limit { throw .responseTooLarge(limit: limit) }
        received.request = request
        if let stream = request.bodyStream, let transfer, transfer.observesProgress {
            let size = stream.length ?? Int64(buffered.body?.count ?? 0)
            transfer.sent(size, of: size)
        }
        guard let transfer else { return received }
        transfer.beginAttempt()
        do throws(NetworkError) {
            let delivered = try await transfer.deliver(received)
            try transfer.bodyEnded()
            return delivered
        } catch {
            throw transfer.failure(error)
        }
    }

    /// Asks the chain whether to retry; under a deadline as long as the request's timeout, and
    /// interruptible by `context.cancel()` when the context is.
    private func decide(
        after failure: NetworkError, response: HTTPResponse?, plan: HookPlan, context: RequestContext,
        timeout: Duration?
    ) async -> GuardedStep<RetryDecision>.Outcome {
        let interruptible = context.isInterruptible
        if timeout == .zero { return .timedOut }
        guard timeout != nil || interruptible else {
            return .finished(await plan.runRetryDecision(after: failure, response: response, context: context))
        }
        let deadline = timeout.map { Deadline(after: $0, on: timeoutClock) }
        let (outcome, _, cancelledItself) = await GuardedStep.run(
            deadline: deadline, cancelledBy: interruptible ? context : nil
        ) { step in
            await plan.runRetryDecision(after: failure, response: response, context: context, step: step)
        }
        if cancelledItself { context.cancel() }
        return outcome
    }

    /// Builds one attempt: behavior headers (explicit request headers win), then `modify`,
    /// then header validation.
    @inline(__always)
    func prepare(
        _ request: HTTPRequest, plan: HookPlan, context: RequestContext, step: (any StepSignal)?
    ) async throws(NetworkError) -> HTTPRequest {
        var attempt = request
        if !plan.additionalHeaders.isEmpty {
            Self.add(try await plan.runAdditionalHeaders(for: request, context: context, step: step), to: &attempt)
        }
        attempt.markURL()
        if !plan.modify.isEmpty {
            try await plan.runModify(&attempt, context: context, step: step)
            // Credentials are scoped by the request as it is sent (contract rule 11): a hook that
            // pointed it at another origin than the caller's takes none there, as a cross-origin
            // redirect takes none.
            if !attempt.urlUnchangedSinceMark {
                attempt = Self.scoped(attempt, from: request.url)
                attempt.markURL()
            }
        }
        try Self.checkHeaders(of: attempt)
        return attempt
    }

    /// `request` without its credential headers when it no longer goes to `origin`'s origin.
    @inline(never)
    static func scoped(_ request: HTTPRequest, from origin: URL) -> HTTPRequest {
        guard !RedirectPolicy.sameOrigin(origin, request.url) else { return request }
        var moved = request
        RedirectPolicy.stripCredentials(from: &moved)
        return moved
    }

    /// Adds the behaviors' merged headers to an attempt by ``HTTPHeaders/merge(_:)``'s rule, the
    /// request's own fields last, so they win (all of a name's values).
    @inline(__always)
    static func add(_ added: HTTPHeaders, to attempt: inout HTTPRequest) {
        if attempt.headers.isEmpty {
            attempt.headers = added  // nothing to override: share the merged list, no copy
        } else {
            var merged = added
            merged.merge(attempt.headers)
            attempt.headers = merged
        }
    }

    /// Rejects a method that is not a token, a header name that is not a token, a value with CR,
    /// LF, NUL or another control character (naming the header, never quoting its value), and
    /// framing fields that disagree with the body (``HTTPRequest/framingProblem``).
    @inline(__always)
    static func checkHeaders(of attempt: HTTPRequest) throws(NetworkError) {
        guard attempt.method.isToken, attempt.canBeSent else { throw unsendable(attempt) }
    }

    /// Why `attempt` cannot be sent. Out of line, so that the check inlined into every attempt's
    /// preparation stays two calls: larger, it stopped the preparation itself from being inlined
    /// (+600 instructions per request, measured when the framing check was added).
    @inline(never)
    static func unsendable(_ attempt: HTTPRequest) -> NetworkError {
        guard attempt.method.isToken else { return .invalidRequest(HTTPMethod.notATokenReason(attempt.method)) }
        guard let (name, failure) = attempt.headers.firstInvalidField() else {
            return .invalidRequest(attempt.framingProblem ?? "the request's header fields cannot be sent")
        }
        let printable = name.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 ? String($0) : "?" }.joined()
        switch failure {
        case .emptyName: return .invalidRequest("a header has an empty name")
        case .invalidName: return .invalidRequest("header name '\(printable)' is not a valid HTTP token")
        case .invalidValue:
            return .invalidRequest("header '\(printable)' has a value with CR, LF, NUL or another control character")
        }
    }

    /// Waits a backoff delay on the clock. `context.cancel()` and the task's cancellation end it
    /// at once (a clock that ignores cancellation is abandoned).
    /// - Returns: Whether the whole delay passed.
    private func backoff(_ delay: Duration, context: RequestContext) async -> Bool {
        let clock = self.clock
        let (outcome, _, _) = await GuardedStep.run(deadline: nil, cancelledBy: context) { _ in
            (try? await TimerSleep.sleep(for: delay, on: clock)) != nil
        }
        if case .finished(true) = outcome { return true }
        return false
    }

    /// Decodes the final response; a `NetworkError` passes through, anything else becomes
    /// ``NetworkError/decodingFailed(_:underlying:)``.
    @inline(__always)
    static func decodeOutput<Output>(_ response: HTTPResponse, _ decode: (HTTPResponse) throws -> Output)
        throws(NetworkError) -> Output
    {
        do {
            return try decode(response)
        } catch let error as NetworkError {
            throw error
        } catch {
            throw .decodingFailed(response, underlying: error)
        }
    }
}
