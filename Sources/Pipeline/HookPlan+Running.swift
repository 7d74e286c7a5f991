/// Running each hook over a plan's members, in the order the plan holds them (the contract's
/// order). The engine calls these directly; ``CombinedRequestBehavior``'s hooks call them with
/// the chain's current plan.
///
/// When they run inside a ``GuardedStep`` that was abandoned (its deadline passed, the request
/// was cancelled), they call no further hook: an abandoned step never reaches a behavior again.
///
/// Members are reached by index, not by `for member in list`: the loop's iterator cost about 16
/// instructions a hook call (`hooks10`, 16,397 → 16,069).
extension HookPlan {
    /// Merges members' headers first to last; a later member wins on the same name.
    @inline(__always)
    package func runAdditionalHeaders(
        for request: HTTPRequest, context: RequestContext, step: (any StepSignal)? = nil
    ) async throws(NetworkError) -> HTTPHeaders {
        var merged = HTTPHeaders()
        for index in additionalHeaders.indices {
            if let step, step.isAbandoned { throw .cancelled }
            let headers: HTTPHeaders
            do {
                headers = try await additionalHeaders[index]._additionalHeaders(for: request, context: context)
            } catch {
                throw NetworkError(hookError: error, behavior: additionalHeaders[index], hook: .additionalHeaders)
            }
            if headers.isEmpty { continue }
            if merged.isEmpty { merged = headers } else { merged.merge(headers) }
        }
        return merged
    }

    /// Runs members' `modify` first to last.
    @inline(__always)
    package func runModify(_ request: inout HTTPRequest, context: RequestContext, step: (any StepSignal)? = nil)
        async throws(NetworkError)
    {
        for index in modify.indices {
            if let step, step.isAbandoned { throw .cancelled }
            do {
                try await modify[index]._modify(&request, context: context)
            } catch {
                throw NetworkError(hookError: error, behavior: modify[index], hook: .modify)
            }
        }
    }

    /// Runs members' `beforeSend` first to last.
    @inline(__always)
    package func runBeforeSend(_ request: HTTPRequest, context: RequestContext) async {
        for index in beforeSend.indices { await beforeSend[index]._beforeSend(request, context: context) }
    }

    /// Runs the attempt through members' `intercept`, the first outermost, with the gates and
    /// `innermost` (the transport) inside the last. A member that throws something other than a ``NetworkError``
    /// fails the attempt with ``NetworkError/behaviorFailed(behavior:hook:underlying:)``; a
    /// ``NetworkError`` (its own, or one `next` threw) passes through as it is.
    ///
    /// Once `step` is abandoned, a member that goes on and calls `next` reaches neither the next
    /// member nor the transport: it gets ``NetworkError/cancelled``.
    package func runIntercept(
        _ request: HTTPRequest, context: RequestContext, step: (any StepSignal)? = nil, from index: Int = 0,
        innermost: @escaping InterceptNext
    ) async throws(NetworkError) -> HTTPResponse {
        if let step, step.isAbandoned { throw .cancelled }
        guard index < intercept.count else {
            if gates.isEmpty { return try await innermost(request) }
            return try await runGates(request, context: context, step: step, next: innermost)
        }
        let behavior = intercept[index]
        let next: InterceptNext = { request throws(NetworkError) in
            try await self.runIntercept(request, context: context, step: step, from: index + 1, innermost: innermost)
        }
        do {
            return try await behavior._intercept(request, context: context, next: next)
        } catch {
            throw NetworkError(hookError: error, behavior: behavior, hook: .intercept)
        }
    }

    /// Runs members' `validate` last to first; the first to throw fails the attempt.
    @inline(__always)
    package func runValidate(_ response: HTTPResponse, context: RequestContext, step: (any StepSignal)? = nil)
        async throws(NetworkError)
    {
        for index in validate.indices {
            if let step, step.isAbandoned { throw .cancelled }
            do {
                try await validate[index]._validate(response, context: context)
            } catch {
                throw NetworkError(hookError: error, behavior: validate[index], hook: .validate)
            }
        }
    }

    /// Asks members first to last; the first `.retry` wins and later members are not asked.
    @inline(__always)
    package func runRetryDecision(
        after failure: NetworkError, response: HTTPResponse?, context: RequestContext, step: (any StepSignal)? = nil
    ) async -> RetryDecision {
        for behavior in retryDecision {
            if let step, step.isAbandoned { return .doNotRetry }
            let decision = await behavior._retryDecision(after: failure, response: response, context: context)
            if case .retry = decision { return decision }
        }
        return .doNotRetry
    }

    /// Runs members' `afterSuccess` last to first.
    @inline(__always)
    package func runAfterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        for index in afterSuccess.indices { await afterSuccess[index]._afterSuccess(response, context: context) }
    }

    /// Runs members' `afterFailure` last to first.
    @inline(__always)
    package func runAfterFailure(_ error: NetworkError, context: RequestContext) async {
        for index in afterFailure.indices { await afterFailure[index]._afterFailure(error, context: context) }
    }
}
