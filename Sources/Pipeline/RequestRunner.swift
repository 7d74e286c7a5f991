/// The engine: runs one logical request through a behavior chain and a transport, implementing
/// the design contract (order, header merge, attempts vs requests, balance, retries on a clock).
///
/// It is built once per client and holds no per-request state; everything a request needs
/// lives in its ``RequestContext`` and on the stack of ``run(_:plan:context:decode:)``.
package struct RequestRunner: Sendable {
    package var transport: any HTTPTransport
    package var clock: any Clock<Duration>
    /// Hard cap on attempts per logical request, whatever behaviors decide.
    package var attemptLimit: Int
    package var acceptableStatusCodes: Set<Int>

    package init(
        transport: any HTTPTransport, clock: any Clock<Duration> = ContinuousClock(), attemptLimit: Int = 10,
        acceptableStatusCodes: Set<Int> = Set(200..<300)
    ) {
        self.transport = transport
        self.clock = clock
        self.attemptLimit = max(1, attemptLimit)
        self.acceptableStatusCodes = acceptableStatusCodes
    }

    /// Runs `request` through the hooks of `plan` until it succeeds, fails for good or is cancelled.
    ///
    /// - `additionalHeaders`, `modify`, `validate`, `retryDecision` run for every attempt;
    /// - `beforeSend` runs once, after the first attempt is prepared; from then on exactly one of
    ///   `afterSuccess` / `afterFailure` runs before this returns or throws. If the first attempt
    ///   cannot be prepared, nothing was sent and no once-per-request hook runs.
    /// - `decode` turns the final response into the output; its failure fails the attempt.
    package func run<Output>(
        _ request: HTTPRequest, plan: HookPlan, context: RequestContext,
        decode: (HTTPResponse) throws -> Output
    ) async throws(NetworkError) -> Output {
        var attempt = 1
        var began = false
        while true {
            let failure: NetworkError
            var response: HTTPResponse?
            do throws(NetworkError) {
                if Task.isCancelled || context.isCancelled { throw .cancelled }
                let prepared = try await prepare(request, plan: plan, context: context)
                if !began {
                    began = true
                    if !plan.beforeSend.isEmpty { await plan.runBeforeSend(prepared, context: context) }
                }
                // One read of the context for both: a hook may have cancelled the request or made
                // it interruptible.
                let (cancelled, interruptible) = context.cancellationState
                if cancelled || Task.isCancelled { throw .cancelled }
                let received = try await send(prepared, context: context, interruptible: interruptible)
                let output: Output
                do throws(NetworkError) {
                    output = try await judge(received, plan: plan, context: context, decode: decode)
                } catch {
                    response = received  // kept for `retryDecision`; copied only when judging fails
                    throw error
                }
                if !plan.afterSuccess.isEmpty { await plan.runAfterSuccess(received, context: context) }
                return output
            } catch {
                failure = error
            }

            // Failure path: stop, or ask the chain whether to try again.
            guard began else { throw failure }
            if failure.isCancellation || Task.isCancelled || context.isCancelled {
                await plan.runAfterFailure(.cancelled, context: context)
                throw .cancelled
            }
            guard attempt < attemptLimit,
                case .retry(let delay) = await plan.runRetryDecision(
                    after: failure, response: response ?? failure.response, context: context)
            else {
                await plan.runAfterFailure(failure, context: context)
                throw failure
            }
            if delay > .zero {
                do {
                    try await wait(delay, context: context)
                } catch {
                    await plan.runAfterFailure(.cancelled, context: context)
                    throw .cancelled
                }
            }
            if Task.isCancelled || context.isCancelled {
                await plan.runAfterFailure(.cancelled, context: context)
                throw .cancelled
            }
            attempt += 1
            context.setAttempt(attempt)
        }
    }

    /// Builds one attempt: behavior headers (explicit request headers win), then `modify`,
    /// then header validation.
    @inline(__always)
    func prepare(
        _ request: HTTPRequest, plan: HookPlan, context: RequestContext
    ) async throws(NetworkError) -> HTTPRequest {
        var attempt = request
        if !plan.additionalHeaders.isEmpty {
            let added = try await plan.runAdditionalHeaders(for: request, context: context)
            if request.headers.isEmpty {
                attempt.headers = added  // nothing to override: share the merged list, no copy
            } else {
                for field in added where !request.headers.contains(field.name) {
                    attempt.headers.add(name: field.name, value: field.value)
                }
            }
        }
        if !plan.modify.isEmpty { try await plan.runModify(&attempt, context: context) }
        if let (name, failure) = attempt.headers.firstInvalidField() {
            let printable = name.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 ? String($0) : "?" }.joined()
            switch failure {
            case .emptyName: throw .invalidRequest("a header has an empty name")
            case .invalidName: throw .invalidRequest("header name '\(printable)' is not a valid HTTP token")
            case .invalidValue:
                throw .invalidRequest("header '\(printable)' has a value with CR, LF, NUL or another control character")
            }
        }
        return attempt
    }

    /// Waits a backoff delay on the clock; an interruptible context's `cancel()` ends it early.
    private func wait(_ delay: Duration, context: RequestContext) async throws {
        guard context.isInterruptible else { return try await clock.sleep(for: delay) }
        let clock = self.clock
        let slept = await withTaskGroup(of: Bool.self) { group in
            group.addTask { (try? await clock.sleep(for: delay)) != nil }
            group.addTask {
                await context.waitUntilCancelled()
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !slept { throw CancellationError() }
    }

    /// Sends one attempt. Races the transport against the request's timeout on the clock (if
    /// there is one) and against `context.cancel()` (if the context is interruptible); otherwise
    /// calls the transport directly, with no task group.
    @inline(__always)
    func send(_ request: HTTPRequest, context: RequestContext, interruptible: Bool) async throws(NetworkError)
        -> HTTPResponse
    {
        guard request.timeout != nil || interruptible else {
            do {
                return try await transport.send(request)
            } catch {
                throw NetworkError(transportError: error)
            }
        }
        let transport = self.transport
        let clock = self.clock
        let first = await withTaskGroup(of: Result<HTTPResponse, NetworkError>?.self) { group in
            group.addTask {
                do {
                    return .success(try await transport.send(request))
                } catch {
                    return .failure(NetworkError(transportError: error))
                }
            }
            if let timeout = request.timeout {
                group.addTask {
                    do {
                        try await clock.sleep(for: timeout)
                        return nil  // the timer fired first
                    } catch {
                        return .failure(.cancelled)
                    }
                }
            }
            if interruptible {
                group.addTask {
                    await context.waitUntilCancelled()
                    return .failure(.cancelled)
                }
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch first {
        case nil: throw .timedOut
        case .success(let response): return response
        case .failure(let error): throw error
        }
    }

    /// Judges a response: acceptable status, then `validate` hooks, then decoding.
    @inline(__always)
    private func judge<Output>(
        _ response: HTTPResponse, plan: HookPlan, context: RequestContext,
        decode: (HTTPResponse) throws -> Output
    ) async throws(NetworkError) -> Output {
        guard acceptableStatusCodes.contains(response.status) else {
            switch response.status {
            case 401: throw .unauthorized(response)
            case 404: throw .notFound(response)
            default: throw .unacceptableStatus(response)
            }
        }
        if !plan.validate.isEmpty { try await plan.runValidate(response, context: context) }
        do {
            return try decode(response)
        } catch let error as NetworkError {
            throw error
        } catch {
            throw .decodingFailed(response, underlying: error)
        }
    }
}
