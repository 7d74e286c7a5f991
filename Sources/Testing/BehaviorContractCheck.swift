public import ConveyorPipeline
import Foundation
import Conveyor

/// Runs your own behavior through the scenarios the pipeline contract covers and reports what it
/// gets wrong.
///
/// Give it a **probe** that reads the global state your behavior changes (a counter's value,
/// the background tasks still open, the tokens handed out). After each scenario the probe must read
/// what it read before. A behavior whose `beforeSend` work is not undone exactly once, or that
/// keeps per-request state on the instance (so concurrent requests end each other's work), leaves
/// the probe changed.
///
/// ```swift
/// @Test func myBehaviorKeepsTheContract() async {
///     let runner = FakeTaskRunner()
///     let check = BehaviorContractCheck(MyBackgroundTaskBehavior(runner: runner), probe: { runner.openTasks })
///     let violations = await check.run()
///     #expect(violations.isEmpty, "\(violations)")
/// }
/// ```
///
/// Scenarios: success, error status, transport failure, two retries then success, cancellation
/// mid-flight, cancellation during a backoff wait, 20 concurrent requests that finish in
/// reverse order, and four with two attempts of one request in flight at once (a hedge, behind
/// a `HedgingBehavior` placed before yours: the hedge wins, the first attempt wins, both fail,
/// the caller cancels while both are in flight). Each is also checked for hooks that throw
/// where the behavior should not.
/// A behavior that implements none of the hooks (usually a hook written with a slightly wrong
/// signature, which compiles as a new method) is reported too; debug builds also print a warning
/// once per such type when it is first seen using every default.
public struct BehaviorContractCheck<Probe: Equatable & Sendable>: Sendable {
    /// One thing the behavior got wrong.
    public struct Violation: Sendable, Hashable, CustomStringConvertible {
        /// The scenario, e.g. `"cancelled mid-flight"`.
        public let scenario: String
        /// What went wrong.
        public let message: String
        /// `scenario: message`.
        public var description: String { "\(scenario): \(message)" }
    }

    let behavior: any RequestBehavior
    let probe: @Sendable () async -> Probe
    let reply: MockTransport.Reply
    let concurrentRequests: Int

    /// Creates a check.
    /// - Parameters:
    ///   - behavior: The behavior under test.
    ///   - reply: What the server answers when a scenario needs success; `200` with no body by default.
    ///   - concurrentRequests: How many requests the concurrency scenario runs at once: at most the
    ///     limit of a behavior that limits concurrency (one that holds some back is reported).
    ///   - probe: Reads the global state the behavior changes; it must read the same after each scenario.
    public init(
        _ behavior: any RequestBehavior, reply: MockTransport.Reply = .status(200), concurrentRequests: Int = 20,
        probe: @escaping @Sendable () async -> Probe
    ) {
        self.behavior = behavior
        self.probe = probe
        self.reply = reply
        self.concurrentRequests = max(2, concurrentRequests)
    }

    /// Runs every scenario and returns the violations found (empty when the behavior keeps the contract).
    public func run() async -> [Violation] {
        var violations: [Violation] = []
        for scenario in Scenario.allCases {
            let before = await probe()
            let problems = await run(scenario)
            violations += problems.map { Violation(scenario: scenario.rawValue, message: $0) }
            // A step the request abandoned (cancelled, or past its deadline) may still be unwinding
            // in its own task, and a behavior's cleanup with it: it gets a bounded number of turns
            // to finish before the state counts as not restored.
            var after = await probe()
            var turns = 0
            while before != after && turns < 100_000 {
                await Task.yield()
                after = await probe()
                turns += 1
            }
            if before != after {
                violations.append(
                    Violation(
                        scenario: scenario.rawValue,
                        message: "state not restored after the request ended: before \(before), after \(after) "
                            + "(unbalanced hooks, or per-request state kept on the instance)"))
            }
        }
        return violations
    }

    enum Scenario: String, CaseIterable {
        case success = "success"
        case errorStatus = "error status 500"
        case transportFailure = "transport failure"
        case retries = "two retries, then success"
        case cancelledInFlight = "cancelled mid-flight"
        case cancelledInBackoff = "cancelled during a backoff wait"
        case concurrent = "concurrent requests finishing in reverse order"
        case hedgeWins = "hedged: the second attempt answers first"
        case firstBeatsHedge = "hedged: the first attempt answers first"
        case hedgedFailures = "hedged: both attempts fail"
        case cancelledWhileHedged = "hedged: cancelled with both attempts in flight"

        /// Whether the scenario runs two attempts of one request at once.
        var isHedged: Bool {
            switch self {
            case .hedgeWins, .firstBeatsHedge, .hedgedFailures, .cancelledWhileHedged: true
            default: false
            }
        }
    }

    /// Fails a scenario's expectations into messages.
    private func run(_ scenario: Scenario) async -> [String] {
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        let retries = RetryCounter()
        var configuration = NetworkClient.Configuration(clock: clock)
        let hedged = scenario.isHedged
        if hedged { configuration.retryBudget = nil }  // every hedge goes
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/contract-check")!, transport: mock,
            configuration: configuration
        ) {
            // Outside the behavior, so that its per-attempt hooks run in each attempt.
            if hedged { HedgingBehavior(delay: .fixed(.seconds(1))) }
            behavior
            retries
        }
        let request = Request<Void>(path: "/resource")
        switch scenario {
        case .success:
            mock.enqueue(reply)
            return expect(await outcome(client, request), toBe: nil)
        case .errorStatus:
            mock.enqueue(.status(500))
            return expect(await outcome(client, request), toBe: "unacceptableStatus")
        case .transportFailure:
            mock.enqueue(.failure(URLError(.networkConnectionLost)))
            return expect(await outcome(client, request), toBe: "connectionFailed")
        case .retries:
            retries.retryAttempts(below: 3, after: .seconds(1))
            mock.enqueue(.status(503), .status(503), reply)
            let task = Task { await outcome(client, request) }
            for _ in 0..<2 {
                if let stalled = await stalled(waitingFor: 1, on: clock, task) { return stalled }
                clock.advanceToNextDeadline()
            }
            var problems = expect(await task.value, toBe: nil)
            if mock.requests.count != 3 {
                problems.append("expected 3 attempts, saw \(mock.requests.count)")
            }
            return problems
        case .cancelledInFlight:
            mock.enqueue(.delayed(.seconds(60), reply))
            let task = Task { await outcome(client, request) }
            if let stalled = await stalled(waitingFor: 1, on: clock, task) { return stalled }
            task.cancel()
            return expect(await task.value, toBe: "cancelled")
        case .cancelledInBackoff:
            retries.retryAttempts(below: 3, after: .seconds(30))
            mock.enqueue(.status(503), reply)
            let task = Task { await outcome(client, request) }
            if let stalled = await stalled(waitingFor: 1, on: clock, task) { return stalled }
            task.cancel()
            return expect(await task.value, toBe: "cancelled")
        case .concurrent:
            let count = concurrentRequests
            for index in 0..<count {
                // Request i answers after (count - i) seconds, so they end in reverse order.
                mock.enqueue(.request(.get, "/contract-check/resource", query: ["n": "\(index)"]),
                    reply: .delayed(.seconds(count - index), reply))
            }
            let tasks = (0..<count).map { index in
                Task { await outcome(client, Request<Void>(path: "/resource", query: ["n": index])) }
            }
            // A behavior that limits concurrency holds some back, and they would wait for a place
            // that only the held answers free: the check says so instead of waiting forever.
            var polls = 0
            while clock.sleeperCount < count && polls < 1_000_000 {
                await Task.yield()
                polls += 1
            }
            let arrived = clock.sleeperCount
            if arrived < count {
                for task in tasks { task.cancel() }
                for _ in 0..<1_000 where clock.sleeperCount > 0 {
                    clock.advance(by: .seconds(count + 1))
                    await Task.yield()
                }
                for task in tasks { _ = await task.value }
                return [
                    "only \(arrived) of \(count) concurrent requests reached the transport: a behavior that limits "
                        + "concurrency needs concurrentRequests: at most its limit"
                ]
            }
            for _ in 0..<count {
                clock.advance(by: .seconds(1))
                await Task.yield()
            }
            var problems: [String] = []
            for task in tasks { problems += expect(await task.value, toBe: nil) }
            return Array(Set(problems)).sorted()
        case .hedgeWins, .firstBeatsHedge, .hedgedFailures, .cancelledWhileHedged:
            return await runHedged(scenario, client: client, mock: mock, clock: clock, request: request)
        }
    }

    /// The hedge delay is 1 s: the first attempt and the hedge timer park, the hedge starts at
    /// 1 s, then one attempt answers (or the caller cancels).
    private func runHedged(
        _ scenario: Scenario, client: NetworkClient, mock: MockTransport, clock: ManualClock, request: Request<Void>
    ) async -> [String] {
        let expected: String?
        switch scenario {
        case .hedgeWins:
            mock.enqueue(.delayed(.seconds(60), reply), .delayed(.seconds(1), reply))
            expected = nil
        case .firstBeatsHedge:
            mock.enqueue(.delayed(.seconds(2), reply), .delayed(.seconds(60), reply))
            expected = nil
        case .hedgedFailures:
            mock.enqueue(.delayed(.seconds(2), .status(500)), .delayed(.seconds(2), .status(500)))
            expected = "unacceptableStatus"
        default:
            mock.enqueue(.delayed(.seconds(60), reply), .delayed(.seconds(60), reply))
            expected = "cancelled"
        }
        let task = Task { await outcome(client, request) }
        // The first attempt and the hedge timer.
        if let stalled = await stalled(waitingFor: 2, on: clock, task) { return stalled }
        clock.advance(by: .seconds(1))
        // A behavior that lets one attempt through at a time holds the hedge back: say so.
        var polls = 0
        while clock.sleeperCount < 2 && polls < 1_000_000 {
            await Task.yield()
            polls += 1
        }
        var problems: [String] = []
        if clock.sleeperCount < 2 {
            problems.append("the hedge did not reach the transport while the first attempt was in flight")
        }
        if scenario == .cancelledWhileHedged {
            task.cancel()
        } else {
            clock.advanceToNextDeadline()  // one attempt answers
            // Both fail: the first at 2 s, the hedge at 3 s.
            if scenario == .hedgedFailures { clock.advanceToNextDeadline() }
        }
        problems += expect(await task.value, toBe: expected)
        if mock.requests.count != 2 { problems.append("expected 2 attempts in flight at once, saw \(mock.requests.count)") }
        return problems
    }

    /// Waits until `count` tasks sleep on `clock` (an attempt held by the transport, a backoff, a
    /// timer); `nil` then. When they never do (the behavior refused the request or answered it
    /// itself, so it never reached the transport), it ends the request and says so, instead of
    /// waiting forever.
    private func stalled(waitingFor count: Int, on clock: ManualClock, _ task: Task<String?, Never>) async -> [String]? {
        var polls = 0
        while clock.sleeperCount < count && polls < 1_000_000 {
            await Task.yield()
            polls += 1
        }
        guard clock.sleeperCount < count else { return nil }
        task.cancel()
        for _ in 0..<1_000 where clock.sleeperCount > 0 {
            clock.advance(by: .seconds(120))
            await Task.yield()
        }
        let ended = await task.value
        return [
            "the request did not reach the transport (it ended: \(ended ?? "succeeded")): a behavior that refuses "
                + "or answers the scenario's requests itself cannot be checked by it"
        ]
    }

    /// `nil` for success, else the error's case name; a `behaviorFailed` is reported as such.
    private func outcome(_ client: NetworkClient, _ request: Request<Void>) async -> String? {
        do {
            try await client.send(request)
            return nil
        } catch {
            switch error {
            case .behaviorFailed:
                return "the behavior \(error.behavior ?? "?") threw in \(error.hook.map { "\($0)" } ?? "?")"
            case .invalidRequest: return "the request became invalid: \(error.reason ?? "")"
            case .unacceptableStatus: return "unacceptableStatus"
            case .connectionFailed: return "connectionFailed"
            case .cancelled: return "cancelled"
            default: return "\(error)"
            }
        }
    }

    private func expect(_ outcome: String?, toBe expected: String?) -> [String] {
        guard outcome != expected else { return [] }
        return ["expected \(expected ?? "success"), got \(outcome ?? "success")"]
    }
}

/// Retries attempts below a number after a delay, for the retry scenarios.
private final class RetryCounter: RetryDeciding {
    private let settings = Locked<(below: Int, delay: Duration)>((0, .zero))

    func retryAttempts(below attempt: Int, after delay: Duration) {
        settings.withLock { $0 = (attempt, delay) }
    }

    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        let (below, delay) = settings.withLock { $0 }
        return context.attempt < below ? .retry(after: delay) : .doNotRetry
    }
}
