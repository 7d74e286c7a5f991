import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

// Randomized contract test: a seeded generator builds scenarios, and a small reference model
// written from the contract in Docs/Architecture.md predicts the exact hook trace and outcome; the engine must
// produce exactly that. Independent invariants (balance, nothing after the outcome, attempt cap)
// are checked on the real trace too.
//
// A scenario draws:
// - a chain of 0–12 behaviors of six kinds: every hook, headers only, observer (beforeSend and
//   the outcome hooks), judge (validate and retryDecision), interceptor (intercept only) and none
//   at all, so the chain's skipping of learned no-op defaults is exercised;
// - which behaviors are the client's and which the request's own, and client behaviors the
//   request leaves out by name;
// - a per-attempt timeout (or none), and a transport that says it honors cancellation (called
//   directly) or not (called in a guarded step);
// - per hook and attempt: pass, throw, suspend, cancel the task, cancel the context, and with a
//   timeout: hang until cancelled, or hang ignoring cancellation (abandoned at the deadline);
// - per attempt, the transport: any status, any transport error, hang until cancelled, or with
//   a timeout hang until the deadline (cooperatively or not);
// - retry decisions (delays, or a decision that hangs until the deadline, as a stuck token
//   refresh does) and attempt limits;
// - per interceptor and attempt: pass the attempt on, answer it (any status) without the
//   transport, throw before or after `next`, replace the transport's status, or hang.
//
// Replay one scenario: CONVEYOR_FUZZ_SEED=<seed> CONVEYOR_FUZZ_COUNT=1 swift test --filter Randomized

enum HookAction: Hashable, Sendable {
    case pass, `throw`, suspend, cancelTask, cancelContext
    /// Fires the attempt's deadline, then waits until its task is cancelled (only with a timeout).
    case hang
    /// Fires the attempt's deadline, then waits ignoring cancellation (only with a timeout).
    case hangIgnoringCancellation
}

/// How the model's attempt failed: the error's name.
struct Ending: Error { let name: String }

/// What an `intercept` does in one attempt.
enum InterceptAction: Hashable, Sendable {
    case pass, suspend
    /// Throws before calling `next`.
    case throwBefore
    /// Answers with this status; `next` is not called.
    case answer(Int)
    /// Calls `next`, then throws (or rethrows what `next` threw).
    case throwAfter
    /// Calls `next` and replaces the status of its response.
    case replace(Int)
    /// Fires the attempt's deadline, then waits (only with a timeout); calls `next` if it ever resumes.
    case hang, hangIgnoringCancellation
}

enum TransportAction: Hashable, Sendable {
    case respond(Int)
    case fail(URLError.Code)
    case hangUntilCancelled  // cancels its own task while in flight, then waits
    case hangUntilDeadline(ignoringCancellation: Bool)  // only with a timeout
}

/// Which hooks a behavior type implements; the others are the protocol's no-op defaults.
enum BehaviorKind: CaseIterable, Sendable {
    case full, headersOnly, observer, judge, interceptor, silent

    func implements(_ hook: RequestHook) -> Bool {
        switch self {
        case .full: true
        case .headersOnly: hook == .additionalHeaders
        case .observer: [.beforeSend, .afterSuccess, .afterFailure].contains(hook)
        case .judge: hook == .validate || hook == .retryDecision
        case .interceptor: hook == .intercept
        case .silent: false
        }
    }
}

struct Scenario: Sendable, CustomStringConvertible {
    static let timeout = Duration.seconds(1000)

    let seed: UInt64
    let kinds: [BehaviorKind]
    /// Behaviors `0..<clientCount` are the client's; the rest are the request's own.
    let clientCount: Int
    /// Client behaviors the request leaves out.
    let excluded: Set<Int>
    let hasTimeout: Bool
    let cooperativeTransport: Bool
    let attemptLimit: Int
    /// Action per (behavior, hook, attempt); missing = pass.
    let hooks: [HookKey: HookAction]
    /// Retry answer per (behavior, attempt): delay in ms, or nil for doNotRetry.
    let retries: [RetryKey: Int]
    /// Retry decisions that hang (with a timeout only); `true` = ignoring cancellation.
    let hangingDecisions: [RetryKey: Bool]
    /// Transport action per call (the n-th call to the transport; an attempt that fails while
    /// being prepared, or that an interceptor answers, makes no call).
    let transport: [Int: TransportAction]
    /// Intercept action per (behavior, attempt); missing = pass.
    let intercepts: [RetryKey: InterceptAction]

    struct HookKey: Hashable, Sendable { let behavior: Int; let hook: RequestHook; let attempt: Int }
    struct RetryKey: Hashable, Sendable { let behavior: Int; let attempt: Int }

    var behaviorCount: Int { kinds.count }

    /// The request's chain, outermost first.
    var chain: [Int] { (0..<clientCount).filter { !excluded.contains($0) } + Array(clientCount..<behaviorCount) }

    func action(_ behavior: Int, _ hook: RequestHook, _ attempt: Int) -> HookAction {
        hooks[HookKey(behavior: behavior, hook: hook, attempt: attempt)] ?? .pass
    }

    var description: String {
        "scenario seed \(seed): \(behaviorCount) behaviors \(kinds), \(clientCount) on the client, excluded \(excluded.sorted()), "
            + "timeout \(hasTimeout), cooperative transport \(cooperativeTransport), attempt limit \(attemptLimit)"
    }

    init(seed: UInt64) {
        var rng = SplitMix64(state: seed)
        self.seed = seed
        let count = Int.random(in: 0...12, using: &rng)
        let allKinds = BehaviorKind.allCases
        kinds = (0..<count).map { _ in
            Int.random(in: 0..<100, using: &rng) < 60 ? .full : allKinds.randomElement(using: &rng) ?? .full
        }
        clientCount = Int.random(in: 0...count, using: &rng)
        excluded = Set((0..<clientCount).filter { _ in Int.random(in: 0..<100, using: &rng) < 15 })
        hasTimeout = Int.random(in: 0..<100, using: &rng) < 35
        cooperativeTransport = Bool.random(using: &rng)
        attemptLimit = Int.random(in: 1...5, using: &rng)
        var hooks: [HookKey: HookAction] = [:]
        var retries: [RetryKey: Int] = [:]
        var hanging: [RetryKey: Bool] = [:]
        var transport: [Int: TransportAction] = [:]
        var intercepts: [RetryKey: InterceptAction] = [:]
        let statuses = [200, 201, 204, 301, 400, 401, 404, 408, 429, 500, 503]
        let errors: [URLError.Code] = [.timedOut, .networkConnectionLost, .notConnectedToInternet, .badServerResponse, .cancelled]
        for attempt in 1...attemptLimit {
            for behavior in 0..<count {
                for hook in RequestHook.allCases where hook != .retryDecision && hook != .intercept {
                    let roll = Int.random(in: 0..<1000, using: &rng)
                    let canThrow = [.additionalHeaders, .modify, .validate].contains(hook)
                    let canCancel = ![.afterSuccess, .afterFailure].contains(hook)
                    let canHang = hasTimeout && canThrow
                    let action: HookAction =
                        switch roll {
                        case 0..<15 where canThrow: .throw
                        case 15..<22 where canCancel: .cancelTask
                        case 22..<27 where canCancel: .cancelContext
                        case 27..<37 where canHang: .hang
                        case 37..<42 where canHang: .hangIgnoringCancellation
                        case 42..<135: .suspend
                        default: .pass
                        }
                    if action != .pass { hooks[HookKey(behavior: behavior, hook: hook, attempt: attempt)] = action }
                }
                let key = RetryKey(behavior: behavior, attempt: attempt)
                let interceptRoll = Int.random(in: 0..<1000, using: &rng)
                let status = statuses.randomElement(using: &rng) ?? 200
                let intercept: InterceptAction =
                    switch interceptRoll {
                    case 0..<80: .throwBefore
                    case 80..<200: .answer(status)
                    case 200..<260: .throwAfter
                    case 260..<360: .replace(status)
                    case 360..<400 where hasTimeout: .hang
                    case 400..<440 where hasTimeout: .hangIgnoringCancellation
                    case 440..<540: .suspend
                    default: .pass
                    }
                if intercept != .pass { intercepts[key] = intercept }
                let roll = Int.random(in: 0..<100, using: &rng)
                if roll < 25 {
                    retries[key] = [0, 0, 5, 1000].randomElement(using: &rng)
                } else if hasTimeout && roll < 29 {
                    hanging[key] = Bool.random(using: &rng)
                }
            }
            let roll = Int.random(in: 0..<100, using: &rng)
            transport[attempt] =
                switch roll {
                case 0..<52: .respond(statuses.randomElement(using: &rng) ?? 200)
                case 52..<86: .fail(errors.randomElement(using: &rng) ?? .timedOut)
                case 86..<93 where hasTimeout: .hangUntilDeadline(ignoringCancellation: Bool.random(using: &rng))
                default: .hangUntilCancelled
                }
        }
        self.hooks = hooks
        self.retries = retries
        self.hangingDecisions = hanging
        self.transport = transport
        self.intercepts = intercepts
    }
}

struct TraceEvent: Hashable, Sendable, CustomStringConvertible {
    let behavior: Int
    let hook: RequestHook
    let attempt: Int
    var description: String { "b\(behavior).\(hook)#\(attempt)" }
}

/// The contract, written as plainly as possible: the expected trace and outcome of a scenario.
///
/// With a timeout, an attempt runs in one guarded step: the first attempt of a chain with
/// `beforeSend` hooks runs them in that step too, between preparing and sending, shielded (the
/// step does not end while they run). A hook that cancels its own task cancels its step's task.
/// A hang fires the deadline: the step ends with `.timedOut` and calls no further hook. The retry
/// decision gets a deadline of its own.
func expectedRun(_ scenario: Scenario) -> (trace: [TraceEvent], outcome: String, calls: Int) {
    let chain = scenario.chain
    var trace: [TraceEvent] = []
    var cancelled = false
    /// A hook cancelled the task the current step runs in (with a timeout, the step's own task).
    var stepCancelled = false
    var began = false
    var attempt = 1
    var transportCalls = 0

    func members(_ hook: RequestHook) -> [Int] { chain.filter { scenario.kinds[$0].implements(hook) } }
    /// Records a hook call and applies its action; returns a failure if it ends the phase.
    func hook(_ b: Int, _ h: RequestHook) -> String? {
        trace.append(TraceEvent(behavior: b, hook: h, attempt: attempt))
        switch scenario.action(b, h, attempt) {
        case .pass, .suspend: return nil
        case .throw: return "behaviorFailed"
        case .cancelTask:
            cancelled = true
            stepCancelled = true
            return nil
        case .cancelContext:
            cancelled = true
            return nil
        case .hang: return stepCancelled ? "cancelled" : "timedOut"  // a cancelled task doesn't wait
        case .hangIgnoringCancellation: return "timedOut"
        }
    }
    /// The transport's answer to one call: a status, or how it failed.
    func sendToTransport() -> Result<Int, Ending> {
        transportCalls += 1
        switch scenario.transport[transportCalls] ?? .respond(200) {
        case .hangUntilCancelled:
            cancelled = true
            return .failure(Ending(name: "cancelled"))
        case .hangUntilDeadline: return .failure(Ending(name: "timedOut"))
        case .fail(let code): return .failure(Ending(name: name(of: code)))
        case .respond(let status): return .success(status)
        }
    }
    /// The attempt through the interceptors (first outermost) and the transport.
    func intercepted(_ members: ArraySlice<Int>) -> Result<Int, Ending> {
        guard let b = members.first else { return sendToTransport() }
        trace.append(TraceEvent(behavior: b, hook: .intercept, attempt: attempt))
        let inner = { intercepted(members.dropFirst()) }
        switch scenario.intercepts[Scenario.RetryKey(behavior: b, attempt: attempt)] ?? .pass {
        case .pass, .suspend: return inner()
        case .throwBefore: return .failure(Ending(name: "behaviorFailed"))
        case .answer(let status): return .success(status)
        case .throwAfter: return inner().flatMap { _ in .failure(Ending(name: "behaviorFailed")) }
        case .replace(let status): return inner().map { _ in status }
        case .hang, .hangIgnoringCancellation: return .failure(Ending(name: "timedOut"))
        }
    }
    func finish(_ outcome: String) -> (trace: [TraceEvent], outcome: String, calls: Int) {
        if began {
            for b in members(outcome == "success" ? .afterSuccess : .afterFailure).reversed() {
                trace.append(TraceEvent(behavior: b, hook: outcome == "success" ? .afterSuccess : .afterFailure, attempt: attempt))
            }
        }
        return (trace, outcome, transportCalls)
    }

    while true {
        var failure: String?
        stepCancelled = false
        attemptBody: do {
            if cancelled { failure = "cancelled"; break attemptBody }
            for b in members(.additionalHeaders) {
                if let ending = hook(b, .additionalHeaders) { failure = ending; break attemptBody }
            }
            for b in members(.modify) {
                if let ending = hook(b, .modify) { failure = ending; break attemptBody }
            }
            if !began {
                began = true
                if !members(.beforeSend).isEmpty {
                    for b in members(.beforeSend) { _ = hook(b, .beforeSend) }
                }
            }
            if cancelled { failure = "cancelled"; break attemptBody }
            switch intercepted(members(.intercept)[...]) {
            case .failure(let ending):
                failure = ending.name
            case .success(let status):
                guard (200..<300).contains(status) else {
                    failure = "unacceptableStatus \(status)"
                    break attemptBody
                }
                for b in members(.validate).reversed() {
                    if let ending = hook(b, .validate) { failure = ending; break attemptBody }
                }
                return finish("success")
            }
        }
        guard let failure else { return finish("success") }
        guard began else { return (trace, failure, transportCalls) }
        if failure == "cancelled" || cancelled { return finish("cancelled") }
        guard attempt < scenario.attemptLimit else { return finish(failure) }
        var delay: Int?
        for b in members(.retryDecision) {
            trace.append(TraceEvent(behavior: b, hook: .retryDecision, attempt: attempt))
            let key = Scenario.RetryKey(behavior: b, attempt: attempt)
            if scenario.hangingDecisions[key] != nil { return finish("timedOut") }
            if let ms = scenario.retries[key] {
                delay = ms
                break
            }
        }
        guard delay != nil else { return finish(failure) }
        attempt += 1
    }
}

func name(of code: URLError.Code) -> String {
    switch code {
    case .timedOut: "timedOut"
    case .networkConnectionLost: "connectionFailed"
    case .notConnectedToInternet: "offline"
    case .cancelled: "cancelled"
    default: "transportFailed"
    }
}

func name(of error: NetworkError) -> String { error.status.map { "\(error.name) \($0)" } ?? error.name }

/// A clock on which the scenario's timeouts wait until something fires them, and backoff waits
/// (all far shorter) return at once.
final class ScenarioClock: Clock, Sendable {
    typealias Instant = ManualClock.Instant
    let manual = ManualClock()
    var now: Instant { manual.now }
    var minimumResolution: Duration { .nanoseconds(1) }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        if now.duration(to: deadline) < .seconds(100) {  // a backoff wait
            try Task.checkCancellation()
            return
        }
        try await manual.sleep(until: deadline)
    }

    /// Fires every deadline set so far.
    func fireDeadline() { manual.advance(by: Scenario.timeout) }
}

/// What every scenario behavior does; each kind forwards only the hooks it implements.
struct ScenarioCore: Sendable {
    struct Planned: Error {}
    let index: Int
    let scenario: Scenario
    let trace: Locked<[TraceEvent]>
    let clock: ScenarioClock
    let stuck: Stuck

    func perform(_ hook: RequestHook, _ context: RequestContext) async throws {
        trace.withLock { $0.append(TraceEvent(behavior: index, hook: hook, attempt: context.attempt)) }
        switch scenario.action(index, hook, context.attempt) {
        case .pass: break
        case .throw: throw Planned()
        case .suspend: await Task.yield()
        case .cancelTask: withUnsafeCurrentTask { $0?.cancel() }
        case .cancelContext: context.cancel()
        case .hang:
            try Task.checkCancellation()
            clock.fireDeadline()
            try await hangUntilCancelled()
        case .hangIgnoringCancellation:
            clock.fireDeadline()
            await stuck.wait()
        }
    }

    func retryDecision(_ context: RequestContext) async -> RetryDecision {
        trace.withLock { $0.append(TraceEvent(behavior: index, hook: .retryDecision, attempt: context.attempt)) }
        let key = Scenario.RetryKey(behavior: index, attempt: context.attempt)
        if let ignoring = scenario.hangingDecisions[key] {
            clock.fireDeadline()
            if ignoring { await stuck.wait() } else { try? await hangUntilCancelled() }
            return .retryNow  // never used: the step was abandoned at its deadline
        }
        guard let ms = scenario.retries[key] else { return .doNotRetry }
        return .retry(after: .milliseconds(ms))
    }

    func intercept(_ request: HTTPRequest, _ context: RequestContext, _ next: InterceptNext) async throws
        -> HTTPResponse
    {
        trace.withLock { $0.append(TraceEvent(behavior: index, hook: .intercept, attempt: context.attempt)) }
        switch scenario.intercepts[Scenario.RetryKey(behavior: index, attempt: context.attempt)] ?? .pass {
        case .pass: return try await next(request)
        case .suspend:
            await Task.yield()
            return try await next(request)
        case .throwBefore: throw Planned()
        case .answer(let status): return HTTPResponse(status: status, request: request)
        case .throwAfter:
            _ = try await next(request)
            throw Planned()
        case .replace(let status):
            var response = try await next(request)
            response.status = status
            return response
        case .hang:
            try Task.checkCancellation()
            clock.fireDeadline()
            try await hangUntilCancelled()
            return try await next(request)
        case .hangIgnoringCancellation:
            clock.fireDeadline()
            await stuck.wait()
            return try await next(request)  // abandoned by now: must not reach the transport
        }
    }

    var headers: HTTPHeaders { ["X-B\(index)": "1"] }
}

func hangUntilCancelled() async throws {
    let never = AsyncStream<Never> { _ in }
    for await _ in never {}
    throw CancellationError()
}

struct FullBehavior: HeaderAdding, RequestModifying, SendObserving, AttemptIntercepting, ResponseValidating, RetryDeciding, SuccessObserving, FailureObserving {
    let core: ScenarioCore
    var name: String { "b\(core.index)" }
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        try await core.perform(.additionalHeaders, context)
        return core.headers
    }
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws { try await core.perform(.modify, context) }
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async { try? await core.perform(.beforeSend, context) }
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await core.intercept(request, context, next)
    }
    func validate(_ response: HTTPResponse, context: RequestContext) async throws { try await core.perform(.validate, context) }
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async -> RetryDecision {
        await core.retryDecision(context)
    }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { try? await core.perform(.afterSuccess, context) }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { try? await core.perform(.afterFailure, context) }
}

struct HeadersOnlyBehavior: HeaderAdding {
    let core: ScenarioCore
    var name: String { "b\(core.index)" }
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        try await core.perform(.additionalHeaders, context)
        return core.headers
    }
}

struct ObserverBehavior: SendObserving, SuccessObserving, FailureObserving {
    let core: ScenarioCore
    var name: String { "b\(core.index)" }
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async { try? await core.perform(.beforeSend, context) }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { try? await core.perform(.afterSuccess, context) }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { try? await core.perform(.afterFailure, context) }
}

struct JudgeBehavior: ResponseValidating, RetryDeciding {
    let core: ScenarioCore
    var name: String { "b\(core.index)" }
    func validate(_ response: HTTPResponse, context: RequestContext) async throws { try await core.perform(.validate, context) }
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async -> RetryDecision {
        await core.retryDecision(context)
    }
}

struct InterceptorBehavior: AttemptIntercepting {
    let core: ScenarioCore
    var name: String { "b\(core.index)" }
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await core.intercept(request, context, next)
    }
}

/// Declares only `retryDecision`, and never asks for a retry: silent on every path.
struct SilentBehavior: RetryDeciding {
    let core: ScenarioCore
    var name: String { "b\(core.index)" }
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        .doNotRetry
    }
}

func makeBehavior(_ kind: BehaviorKind, _ core: ScenarioCore) -> any RequestBehavior {
    switch kind {
    case .full: FullBehavior(core: core)
    case .headersOnly: HeadersOnlyBehavior(core: core)
    case .observer: ObserverBehavior(core: core)
    case .judge: JudgeBehavior(core: core)
    case .interceptor: InterceptorBehavior(core: core)
    case .silent: SilentBehavior(core: core)
    }
}

/// Follows the scenario's transport plan, attempt by attempt.
final class ScenarioTransport: HTTPTransport {
    let scenario: Scenario
    let clock: ScenarioClock
    let stuck: Stuck
    let attempts = Locked(0)
    init(scenario: Scenario, clock: ScenarioClock, stuck: Stuck) {
        self.scenario = scenario
        self.clock = clock
        self.stuck = stuck
    }

    var honorsCancellation: Bool { scenario.cooperativeTransport }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let attempt = attempts.withLock { $0 += 1; return $0 }
        switch scenario.transport[attempt] ?? .respond(200) {
        case .respond(let status): return HTTPResponse(status: status, request: request)
        case .fail(let code): throw URLError(code)
        case .hangUntilCancelled:
            withUnsafeCurrentTask { $0?.cancel() }  // the caller gives up while the request is in flight
            try await hangUntilCancelled()
            throw URLError(.cancelled)
        case .hangUntilDeadline(let ignoring):
            clock.fireDeadline()
            if ignoring { await stuck.wait() } else { try await hangUntilCancelled() }
            return HTTPResponse(status: 200, request: request)  // too late: abandoned
        }
    }
}

@Suite struct RandomizedContractTests {
    static let count = ProcessInfo.processInfo.environment["CONVEYOR_FUZZ_COUNT"].flatMap(Int.init) ?? 10_000
    static let baseSeed =
        ProcessInfo.processInfo.environment["CONVEYOR_FUZZ_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max / 2)

    /// The scenarios run in eight shards, side by side: one test of 10,000 scenarios was the last
    /// to end in every `swift test` run, alone on one core for its last seconds.
    static let shards = 8

    @Test(arguments: 0..<shards) func theEngineKeepsTheContractInRandomScenarios(shard: Int) async {
        var failures = 0
        let size = (Self.count + Self.shards - 1) / Self.shards
        for offset in min(Self.count, shard * size)..<min(Self.count, (shard + 1) * size) {
            let scenario = Scenario(seed: Self.baseSeed &+ UInt64(offset))
            let problems = await check(scenario)
            if !problems.isEmpty {
                failures += 1
                let details = problems.joined(separator: "\n")
                Issue.record("\(scenario) — replay with CONVEYOR_FUZZ_SEED=\(scenario.seed) CONVEYOR_FUZZ_COUNT=1\n\(details)")
                if failures >= 5 { break }
            }
        }
        #expect(failures == 0)
    }

    func check(_ scenario: Scenario) async -> [String] {
        let trace = Locked<[TraceEvent]>([])
        let clock = ScenarioClock()
        let stuck = Stuck()
        let behaviors = scenario.kinds.indices.map { index in
            makeBehavior(
                scenario.kinds[index],
                ScenarioCore(index: index, scenario: scenario, trace: trace, clock: clock, stuck: stuck))
        }
        let transport = ScenarioTransport(scenario: scenario, clock: clock, stuck: stuck)
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9")!,
            transport: transport,
            configuration: .init(
                timeout: scenario.hasTimeout ? Scenario.timeout : nil, clock: clock, timeoutClock: clock,
                attemptLimit: scenario.attemptLimit)
        ) { Array(behaviors.prefix(scenario.clientCount)) }
        var request = Request<Void>(path: "/x", behaviors: Array(behaviors.dropFirst(scenario.clientCount)))
        for index in scenario.excluded.sorted() { request = request.excluding(.named("b\(index)")) }
        let task = Task { [request] () async -> String in
            do throws(NetworkError) {
                try await client.send(request)
                return "success"
            } catch {
                return name(of: error)
            }
        }
        let outcome = await task.value
        let actual = trace.withLock { $0 }
        // Let abandoned steps go on, and check that they call no further hook.
        stuck.release()
        for _ in 0..<20 { await Task.yield() }
        let late = trace.withLock { $0 }.dropFirst(actual.count)
        let (expectedTrace, expectedOutcome, expectedCalls) = expectedRun(scenario)
        let calls = transport.attempts.withLock { $0 }

        var problems: [String] = []
        if outcome != expectedOutcome { problems.append("outcome \(outcome), expected \(expectedOutcome)") }
        if actual != expectedTrace {
            let common = zip(actual, expectedTrace).prefix { $0 == $1 }.count
            problems.append(
                "trace differs at event \(common): got \(actual.dropFirst(common).prefix(6).map(\.description)), "
                    + "expected \(expectedTrace.dropFirst(common).prefix(6).map(\.description))")
        }
        if !problems.isEmpty, Self.count == 1 {  // replaying one scenario: show all of it
            problems.append("plan: hooks \(scenario.hooks.sorted { "\($0.key)" < "\($1.key)" }.map { "b\($0.key.behavior).\($0.key.hook)#\($0.key.attempt)=\($0.value)" })")
            problems.append("retries \(scenario.retries), hanging decisions \(scenario.hangingDecisions), transport \(scenario.transport)")
            problems.append("actual trace: \(actual)")
        }
        if calls != expectedCalls { problems.append("\(calls) transport calls, expected \(expectedCalls)") }
        if !late.isEmpty { problems.append("hooks called after the outcome by an abandoned step: \(Array(late))") }
        problems += invariantViolations(actual, scenario: scenario)
        return problems
    }

    /// Checks that hold whatever the scenario, independent of the model.
    func invariantViolations(_ trace: [TraceEvent], scenario: Scenario) -> [String] {
        var problems: [String] = []
        for b in 0..<scenario.behaviorCount {
            let hooks = trace.filter { $0.behavior == b }.map(\.hook)
            if scenario.excluded.contains(b), !hooks.isEmpty { problems.append("b\(b) was excluded but saw \(hooks)") }
            let kind = scenario.kinds[b]
            if let hook = hooks.first(where: { !kind.implements($0) }) { problems.append("b\(b) (\(kind)) got \(hook)") }
            let begins = hooks.filter { $0 == .beforeSend }.count
            let ends = hooks.filter { $0 == .afterSuccess || $0 == .afterFailure }.count
            if kind.implements(.beforeSend), begins > 1 || begins != ends {
                problems.append("b\(b): \(begins) beforeSend, \(ends) after hooks")
            }
            if let end = hooks.firstIndex(where: { $0 == .afterSuccess || $0 == .afterFailure }), end != hooks.count - 1 {
                problems.append("b\(b): hooks after its outcome: \(hooks[(end + 1)...])")
            }
        }
        if let maxAttempt = trace.map(\.attempt).max(), maxAttempt > scenario.attemptLimit {
            problems.append("attempt \(maxAttempt) exceeds the limit \(scenario.attemptLimit)")
        }
        return problems
    }
}
