/// A member that stands at the transport's door: it admits each exchange with the transport (or
/// refuses it, or holds it back), and is told how the exchange ended. The circuit breaker, the
/// rate limiter and the concurrency limiter are gates; the engine finds them by
/// ``HookBits/gates`` when the chain is built.
///
/// Gates run next to the transport, after every `intercept` member whatever their place in the
/// chain, first to last among themselves: an attempt an interceptor answers (a cache hit, a result
/// shared with another request, a stub) is never admitted and never counted, and every call of an
/// interceptor's `next` is one exchange, admitted on its own. A gate is a behavior of its own kind
/// (not an interceptor) because the door is on every request's path: admitting an attempt is a
/// synchronous call with no closure and no copy of the request, so a gate that lets it through at
/// once costs about a quarter of what an `intercept` member's nesting does (measured in
/// BENCHMARKS.md: about 950 to 1,370 instructions a request, against about 4,300).
///
/// The engine calls, for one exchange:
/// 1. ``admit(_:context:)``: it returns a pass, or throws the ``NetworkError`` that refuses the
///    exchange (nothing to release then);
/// 2. when the pass ``GatePass/waits``, ``waitForTurn(_:context:)``: it returns the pass the
///    exchange goes with, or throws (and has given back whatever it held: nothing to release);
/// 3. once the exchange ended, exactly one of ``release(_:answered:context:)`` (the transport
///    answered, whatever the status) and ``release(_:failed:context:)`` (the transport failed, a
///    later gate refused it, or the step it ran in was abandoned), from the task it ran in.
package protocol AttemptGating: RequestBehavior {
    /// Admits one exchange with the transport: at once in the common case (the pass), held back
    /// (a pass that ``GatePass/waits``), or refused (throws).
    func admit(_ request: HTTPRequest, context: RequestContext) throws(NetworkError) -> GatePass

    /// Waits until the exchange `pass` held back may go (a pace, a queue); bounded by the
    /// attempt's deadline. Throws when it may not go after all, having given back what it held.
    func waitForTurn(_ pass: GatePass, context: RequestContext) async throws(NetworkError) -> GatePass

    /// The exchange `pass` admitted ended with `response`: the transport's, whatever its status.
    func release(_ pass: GatePass, answered response: HTTPResponse, context: RequestContext)

    /// The exchange `pass` admitted ended with `failure`: the transport's, a later gate's refusal,
    /// or the end of the step it ran in.
    func release(_ pass: GatePass, failed failure: NetworkError, context: RequestContext)
}

/// What a gate knows about one exchange it admitted: whatever it needs to count the exchange's
/// end, in a few words (no allocation for the engine to make).
package struct GatePass: Sendable {
    /// The gate's own record for the exchange's origin (a circuit, an account), if it keeps one.
    package var record: (any AnyObject & Sendable)?
    /// A number the gate chooses (a start time, a ticket).
    package var number: Int64
    /// A flag the gate chooses (a probe of a half-open circuit).
    package var flag: Bool
    /// Whether the exchange must wait (``AttemptGating/waitForTurn(_:context:)``) before it goes.
    package var waits: Bool

    /// A pass.
    package init(record: (any AnyObject & Sendable)? = nil, number: Int64 = 0, flag: Bool = false, waits: Bool = false)
    {
        self.record = record
        self.number = number
        self.flag = flag
        self.waits = waits
    }

    /// A pass for an exchange the gate does not count (a request with no origin).
    package static var uncounted: GatePass { GatePass() }
}

/// The passes the gates gave one exchange, first to last: the first in a field, further ones
/// in an array (a chain with one gate allocates nothing).
package struct GatePasses {
    var first = GatePass.uncounted
    var rest: [GatePass] = []
    var count = 0

    mutating func append(_ pass: GatePass, of total: Int) {
        if count == 0 {
            first = pass
        } else {
            if rest.isEmpty { rest.reserveCapacity(total - 1) }
            rest.append(pass)
        }
        count += 1
    }
}

extension HookPlan {
    /// Admits one exchange through every gate, first to last (waiting where a gate holds it
    /// back). A gate that refuses ends it: the gates before it are released with its error, then
    /// the error is thrown. Once `step` is abandoned, nothing further is admitted.
    @inline(__always)
    package func admitThroughGates(_ request: HTTPRequest, context: RequestContext, step: (any StepSignal)?)
        async throws(NetworkError) -> GatePasses
    {
        var passes = GatePasses()
        // By index, not `for gate in gates`: a copy of each member (a boxed existential) costs a
        // retain and a release.
        for index in gates.indices {
            do throws(NetworkError) {
                if let step, step.isAbandoned { throw .cancelled }
                var pass = try gates[index].admit(request, context: context)
                if pass.waits { pass = try await gates[index].waitForTurn(pass, context: context) }
                passes.append(pass, of: gates.count)
            } catch {
                releaseGates(passes, failed: error, context: context)
                throw error
            }
        }
        if let step, step.isAbandoned {
            releaseGates(passes, failed: .cancelled, context: context)
            throw .cancelled
        }
        return passes
    }

    /// Releases the gates that admitted an exchange, last to first: the transport answered.
    @inline(__always)
    package func releaseGates(_ passes: GatePasses, answered response: HTTPResponse, context: RequestContext) {
        // Each pass handed over in place (a copy of one, as `passes[index]` makes, retains its record).
        var index = passes.count - 1
        while index > 0 {
            gates[index].release(passes.rest[index - 1], answered: response, context: context)
            index -= 1
        }
        if index == 0 { gates[0].release(passes.first, answered: response, context: context) }
    }

    /// Releases the gates that admitted an exchange, last to first: it failed.
    @inline(__always)
    package func releaseGates(_ passes: GatePasses, failed failure: NetworkError, context: RequestContext) {
        var index = passes.count - 1
        while index > 0 {
            gates[index].release(passes.rest[index - 1], failed: failure, context: context)
            index -= 1
        }
        if index == 0 { gates[0].release(passes.first, failed: failure, context: context) }
    }

    /// One exchange through the gates around an interceptor's `next` (the chain's innermost call
    /// when it has `intercept` members).
    func runGates(_ request: HTTPRequest, context: RequestContext, step: (any StepSignal)?, next: InterceptNext)
        async throws(NetworkError) -> HTTPResponse
    {
        let passes = try await admitThroughGates(request, context: context, step: step)
        let response: HTTPResponse
        do throws(NetworkError) {
            response = try await next(request)
        } catch {
            releaseGates(passes, failed: error, context: context)
            throw error
        }
        releaseGates(passes, answered: response, context: context)
        return response
    }
}

extension AttemptGating {
    /// One exchange through this gate alone, around `next`: what a gate's public `intercept`
    /// does when it is called as an interceptor (by a wrapper, or by hand).
    package func exchange(_ request: HTTPRequest, context: RequestContext, next: InterceptNext)
        async throws(NetworkError) -> HTTPResponse
    {
        var pass = try admit(request, context: context)
        if pass.waits { pass = try await waitForTurn(pass, context: context) }
        let response: HTTPResponse
        do throws(NetworkError) {
            response = try await next(request)
        } catch {
            release(pass, failed: error, context: context)
            throw error
        }
        release(pass, answered: response, context: context)
        return response
    }
}
