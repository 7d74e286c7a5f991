import ConveyorTesting
import Foundation
import Testing

// Randomized contract test: a seeded generator builds scenarios (random chains, hooks that pass,
// throw, suspend or cancel, a transport that answers any status, throws or hangs until cancelled,
// random retry decisions). A small reference model written from DESIGN.md's contract predicts
// the exact hook trace and outcome; the engine must produce exactly that. Independent invariants
// (balance, nothing after the outcome, attempt cap) are checked on the real trace too.
//
// Replay one scenario: CONVEYOR_FUZZ_SEED=<seed> CONVEYOR_FUZZ_COUNT=1 swift test --filter Randomized

/// SplitMix64: small, fast, seedable.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

enum HookAction: Hashable, Sendable {
    case pass, `throw`, suspend, cancelTask, cancelContext
}

enum TransportAction: Hashable, Sendable {
    case respond(Int)
    case fail(URLError.Code)
    case hangUntilCancelled  // cancels the request's task while in flight, then waits
}

struct Scenario: Sendable, CustomStringConvertible {
    let seed: UInt64
    let behaviorCount: Int
    let attemptLimit: Int
    /// Action per (behavior, hook, attempt); missing = pass.
    let hooks: [HookKey: HookAction]
    /// Retry answer per (behavior, attempt): delay in ms, or nil for doNotRetry.
    let retries: [RetryKey: Int]
    /// Transport action per call (the n-th call to the transport; an attempt that fails while
    /// being prepared makes no call).
    let transport: [Int: TransportAction]

    struct HookKey: Hashable, Sendable { let behavior: Int; let hook: RequestHook; let attempt: Int }
    struct RetryKey: Hashable, Sendable { let behavior: Int; let attempt: Int }

    func action(_ behavior: Int, _ hook: RequestHook, _ attempt: Int) -> HookAction {
        hooks[HookKey(behavior: behavior, hook: hook, attempt: attempt)] ?? .pass
    }

    var description: String { "scenario seed \(seed): \(behaviorCount) behaviors, attempt limit \(attemptLimit)" }

    init(seed: UInt64) {
        var rng = SplitMix64(state: seed)
        self.seed = seed
        behaviorCount = Int.random(in: 0...12, using: &rng)
        attemptLimit = Int.random(in: 1...5, using: &rng)
        var hooks: [HookKey: HookAction] = [:]
        var retries: [RetryKey: Int] = [:]
        var transport: [Int: TransportAction] = [:]
        let statuses = [200, 201, 204, 301, 400, 401, 404, 408, 429, 500, 503]
        let errors: [URLError.Code] = [.timedOut, .networkConnectionLost, .notConnectedToInternet, .badServerResponse, .cancelled]
        for attempt in 1...attemptLimit {
            for behavior in 0..<behaviorCount {
                for hook in RequestHook.allCases where hook != .retryDecision {
                    let roll = Int.random(in: 0..<1000, using: &rng)
                    let canThrow = [.additionalHeaders, .modify, .validate].contains(hook)
                    let canCancel = ![.afterSuccess, .afterFailure].contains(hook)
                    let action: HookAction =
                        switch roll {
                        case 0..<15 where canThrow: .throw
                        case 15..<22 where canCancel: .cancelTask
                        case 22..<27 where canCancel: .cancelContext
                        case 27..<120: .suspend
                        default: .pass
                        }
                    if action != .pass { hooks[HookKey(behavior: behavior, hook: hook, attempt: attempt)] = action }
                }
                if Int.random(in: 0..<100, using: &rng) < 25 {
                    retries[RetryKey(behavior: behavior, attempt: attempt)] = [0, 0, 5, 1000].randomElement(using: &rng)
                }
            }
            let roll = Int.random(in: 0..<100, using: &rng)
            transport[attempt] =
                switch roll {
                case 0..<55: .respond(statuses.randomElement(using: &rng) ?? 200)
                case 55..<92: .fail(errors.randomElement(using: &rng) ?? .timedOut)
                default: .hangUntilCancelled
                }
        }
        self.hooks = hooks
        self.retries = retries
        self.transport = transport
    }
}

struct TraceEvent: Hashable, Sendable, CustomStringConvertible {
    let behavior: Int
    let hook: RequestHook
    let attempt: Int
    var description: String { "b\(behavior).\(hook)#\(attempt)" }
}

/// The contract, written as plainly as possible: the expected trace and outcome of a scenario.
func expectedRun(_ scenario: Scenario) -> (trace: [TraceEvent], outcome: String) {
    let n = scenario.behaviorCount
    var trace: [TraceEvent] = []
    var cancelled = false
    var began = false
    var attempt = 1
    var transportCalls = 0

    func hook(_ b: Int, _ h: RequestHook) -> HookAction {
        trace.append(TraceEvent(behavior: b, hook: h, attempt: attempt))
        let action = scenario.action(b, h, attempt)
        if action == .cancelTask || action == .cancelContext { cancelled = true }
        return action
    }
    func finish(_ outcome: String) -> (trace: [TraceEvent], outcome: String) {
        if began {
            for b in (0..<n).reversed() {
                trace.append(TraceEvent(behavior: b, hook: outcome == "success" ? .afterSuccess : .afterFailure, attempt: attempt))
            }
        }
        return (trace, outcome)
    }

    while true {
        var failure: String?
        attemptBody: do {
            if cancelled { failure = "cancelled"; break attemptBody }
            for b in 0..<n where hook(b, .additionalHeaders) == .throw { failure = "behaviorFailed"; break attemptBody }
            for b in 0..<n where hook(b, .modify) == .throw { failure = "behaviorFailed"; break attemptBody }
            if !began {
                began = true
                for b in 0..<n { _ = hook(b, .beforeSend) }
            }
            if cancelled { failure = "cancelled"; break attemptBody }
            transportCalls += 1
            switch scenario.transport[transportCalls] ?? .respond(200) {
            case .hangUntilCancelled:
                cancelled = true
                failure = "cancelled"
            case .fail(let code):
                failure = ["timedOut": "timedOut", "offline": "offline", "cancelled": "cancelled"][name(of: code)] ?? name(of: code)
                if code == .cancelled { failure = "cancelled" }
            case .respond(let status):
                guard (200..<300).contains(status) else {
                    failure = status == 401 ? "unauthorized" : status == 404 ? "notFound" : "unacceptableStatus"
                    break attemptBody
                }
                for b in (0..<n).reversed() where hook(b, .validate) == .throw { failure = "behaviorFailed"; break attemptBody }
                return finish("success")
            }
        }
        guard let failure else { return finish("success") }
        guard began else { return (trace, failure) }
        if failure == "cancelled" || cancelled { return finish("cancelled") }
        guard attempt < scenario.attemptLimit else { return finish(failure) }
        var delay: Int?
        for b in 0..<n {
            trace.append(TraceEvent(behavior: b, hook: .retryDecision, attempt: attempt))
            if let ms = scenario.retries[Scenario.RetryKey(behavior: b, attempt: attempt)] {
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

func name(of error: NetworkError) -> String {
    switch error {
    case .invalidRequest: "invalidRequest"
    case .behaviorFailed: "behaviorFailed"
    case .unauthorized: "unauthorized"
    case .notFound: "notFound"
    case .unacceptableStatus: "unacceptableStatus"
    case .decodingFailed: "decodingFailed"
    case .timedOut: "timedOut"
    case .offline: "offline"
    case .connectionFailed: "connectionFailed"
    case .cancelled: "cancelled"
    case .transportFailed: "transportFailed"
    }
}

/// A behavior that follows the scenario's plan and records what it is asked.
struct ScenarioBehavior: RequestBehavior {
    struct Planned: Error {}
    let index: Int
    let scenario: Scenario
    let trace: Locked<[TraceEvent]>

    private func perform(_ hook: RequestHook, _ context: RequestContext) async throws {
        trace.withLock { $0.append(TraceEvent(behavior: index, hook: hook, attempt: context.attempt)) }
        switch scenario.action(index, hook, context.attempt) {
        case .pass: break
        case .throw: throw Planned()
        case .suspend: await Task.yield()
        case .cancelTask: withUnsafeCurrentTask { $0?.cancel() }
        case .cancelContext: context.cancel()
        }
    }

    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        try await perform(.additionalHeaders, context)
        return ["X-B\(index)": "\(context.attempt)"]
    }
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws { try await perform(.modify, context) }
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async { try? await perform(.beforeSend, context) }
    func validate(_ response: HTTPResponse, context: RequestContext) async throws { try await perform(.validate, context) }
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async -> RetryDecision {
        trace.withLock { $0.append(TraceEvent(behavior: index, hook: .retryDecision, attempt: context.attempt)) }
        guard let ms = scenario.retries[Scenario.RetryKey(behavior: index, attempt: context.attempt)] else { return .doNotRetry }
        return .retry(after: .milliseconds(ms))
    }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { try? await perform(.afterSuccess, context) }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { try? await perform(.afterFailure, context) }
}

/// Follows the scenario's transport plan, attempt by attempt.
final class ScenarioTransport: HTTPTransport {
    let scenario: Scenario
    let attempts = Locked(0)
    init(scenario: Scenario) { self.scenario = scenario }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let attempt = attempts.withLock { $0 += 1; return $0 }
        switch scenario.transport[attempt] ?? .respond(200) {
        case .respond(let status): return HTTPResponse(status: status, request: request)
        case .fail(let code): throw URLError(code)
        case .hangUntilCancelled:
            withUnsafeCurrentTask { $0?.cancel() }  // the caller gives up while the request is in flight
            let never = AsyncStream<Never> { _ in }
            for await _ in never {}
            throw URLError(.cancelled)
        }
    }
}

@Suite struct RandomizedContractTests {
    static let count = ProcessInfo.processInfo.environment["CONVEYOR_FUZZ_COUNT"].flatMap(Int.init) ?? 10_000
    static let baseSeed =
        ProcessInfo.processInfo.environment["CONVEYOR_FUZZ_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max / 2)

    @Test func theEngineKeepsTheContractInRandomScenarios() async {
        var failures = 0
        for offset in 0..<Self.count {
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
        let behaviors = (0..<scenario.behaviorCount).map { ScenarioBehavior(index: $0, scenario: scenario, trace: trace) }
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9")!, transport: ScenarioTransport(scenario: scenario),
            configuration: .init(clock: ImmediateClock(), attemptLimit: scenario.attemptLimit)) { behaviors }
        let task = Task { () async -> String in
            do throws(NetworkError) {
                try await client.send(Request<Void>(path: "/x"))
                return "success"
            } catch {
                return name(of: error)
            }
        }
        let outcome = await task.value
        let actual = trace.withLock { $0 }
        let (expectedTrace, expectedOutcome) = expectedRun(scenario)

        var problems: [String] = []
        if outcome != expectedOutcome { problems.append("outcome \(outcome), expected \(expectedOutcome)") }
        if actual != expectedTrace {
            let common = zip(actual, expectedTrace).prefix { $0 == $1 }.count
            problems.append(
                "trace differs at event \(common): got \(actual.dropFirst(common).prefix(6).map(\.description)), "
                    + "expected \(expectedTrace.dropFirst(common).prefix(6).map(\.description))")
        }
        problems += invariantViolations(actual, behaviorCount: scenario.behaviorCount, attemptLimit: scenario.attemptLimit)
        return problems
    }

    /// Checks that hold whatever the scenario, independent of the model.
    func invariantViolations(_ trace: [TraceEvent], behaviorCount: Int, attemptLimit: Int) -> [String] {
        var problems: [String] = []
        for b in 0..<behaviorCount {
            let hooks = trace.filter { $0.behavior == b }.map(\.hook)
            let begins = hooks.filter { $0 == .beforeSend }.count
            let ends = hooks.filter { $0 == .afterSuccess || $0 == .afterFailure }.count
            if begins > 1 || begins != ends { problems.append("b\(b): \(begins) beforeSend, \(ends) after hooks") }
            if let end = hooks.firstIndex(where: { $0 == .afterSuccess || $0 == .afterFailure }), end != hooks.count - 1 {
                problems.append("b\(b): hooks after its outcome: \(hooks[(end + 1)...])")
            }
        }
        if let maxAttempt = trace.map(\.attempt).max(), maxAttempt > attemptLimit {
            problems.append("attempt \(maxAttempt) exceeds the limit \(attemptLimit)")
        }
        return problems
    }
}
