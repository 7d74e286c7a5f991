import ConveyorTesting
import Foundation
import Testing

/// A counter of open "tasks" that behaviors begin and end.
final class OpenTasks: Sendable {
    private let open = Locked<Set<Int>>([])
    private let next = Locked(0)
    func begin() -> Int {
        let id = next.withLock { $0 += 1; return $0 }
        open.withLock { _ = $0.insert(id) }
        return id
    }
    func end(_ id: Int) { open.withLock { _ = $0.remove(id) } }
    var ids: Set<Int> { open.withLock { $0 } }
}

/// Keeps its task id in the request context: correct.
struct GoodTaskBehavior: SendObserving, SuccessObserving, FailureObserving {
    enum TaskID: RequestContextKey { static let defaultValue: Int? = nil }
    let tasks: OpenTasks
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async { context[TaskID.self] = tasks.begin() }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { context[TaskID.self].map(tasks.end) }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { context[TaskID.self].map(tasks.end) }
}

/// Keeps its task id on the instance, like the original article's BackgroundTaskBehavior: wrong.
final class InstanceStateTaskBehavior: SendObserving, SuccessObserving, FailureObserving {
    let tasks: OpenTasks
    let current = Locked<Int?>(nil)
    init(tasks: OpenTasks) { self.tasks = tasks }
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        let id = tasks.begin()
        current.withLock { $0 = id }
    }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { current.withLock { $0 }.map(tasks.end) }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { current.withLock { $0 }.map(tasks.end) }
}

/// Ends its work only on success: unbalanced on failure.
struct LeakyOnFailureBehavior: SendObserving, SuccessObserving {
    let tasks: OpenTasks
    enum TaskID: RequestContextKey { static let defaultValue: Int? = nil }
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async { context[TaskID.self] = tasks.begin() }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { context[TaskID.self].map(tasks.end) }
}

/// Takes a lease per attempt in `modify`, keeps its id in the context, and gives it back when the
/// attempt's `intercept` ends: correct only if each of two attempts in flight at once sees its own
/// value (contract rule 20).
struct PerAttemptLeaseBehavior: RequestModifying, AttemptIntercepting {
    enum LeaseID: RequestContextKey { static let defaultValue: Int? = nil }
    let tasks: OpenTasks
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        context[LeaseID.self] = tasks.begin()
    }
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        defer { context[LeaseID.self].map(tasks.end) }
        return try await next(request)
    }
}

/// Throws in modify on retries.
struct ThrowsOnRetry: RequestModifying {
    struct Oops: Error {}
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        if context.attempt > 1 { throw Oops() }
    }
}

@Suite struct BehaviorContractCheckTests {
    @Test func aBehaviorWithStateInTheContextPasses() async {
        let tasks = OpenTasks()
        let violations = await BehaviorContractCheck(GoodTaskBehavior(tasks: tasks)) { tasks.ids }.run()
        #expect(violations.isEmpty, "\(violations)")
    }

    @Test func stateOnTheInstanceIsCaughtByTheConcurrentScenario() async {
        let tasks = OpenTasks()
        let violations = await BehaviorContractCheck(InstanceStateTaskBehavior(tasks: tasks)) { tasks.ids }.run()
        #expect(violations.map(\.scenario) == ["concurrent requests finishing in reverse order"])
        #expect(violations.first?.message.contains("state not restored") == true)
    }

    @Test func unbalancedHooksAreCaughtOnEveryFailureScenario() async {
        let tasks = OpenTasks()
        let violations = await BehaviorContractCheck(LeakyOnFailureBehavior(tasks: tasks)) { tasks.ids }.run()
        #expect(
            Set(violations.map(\.scenario)) == [
                "error status 500", "transport failure", "cancelled mid-flight", "cancelled during a backoff wait",
                "hedged: both attempts fail", "hedged: cancelled with both attempts in flight",
            ])
    }

    /// Per-attempt state in the context holds when two attempts of one request are in flight at
    /// once: each sees its own value.
    @Test func perAttemptStateInTheContextHoldsWhenAttemptsOverlap() async {
        let tasks = OpenTasks()
        let violations = await BehaviorContractCheck(PerAttemptLeaseBehavior(tasks: tasks)) { tasks.ids }.run()
        #expect(violations.isEmpty, "\(violations)")
    }

    @Test func throwingWhereItShouldNotIsReported() async {
        let violations = await BehaviorContractCheck(ThrowsOnRetry()) { 0 }.run()
        #expect(violations.map(\.description) == [
            "two retries, then success: expected success, got the behavior ThrowsOnRetry threw in modify",
            "two retries, then success: expected 3 attempts, saw 1",
            "hedged: the second attempt answers first: the hedge did not reach the transport while the first attempt was in flight",
            "hedged: the second attempt answers first: expected 2 attempts in flight at once, saw 1",
            "hedged: the first attempt answers first: the hedge did not reach the transport while the first attempt was in flight",
            "hedged: the first attempt answers first: expected 2 attempts in flight at once, saw 1",
            "hedged: both attempts fail: the hedge did not reach the transport while the first attempt was in flight",
            "hedged: both attempts fail: expected 2 attempts in flight at once, saw 1",
            "hedged: cancelled with both attempts in flight: the hedge did not reach the transport while the first attempt was in flight",
            "hedged: cancelled with both attempts in flight: expected 2 attempts in flight at once, saw 1",
        ])
    }
}

@Suite struct RecordingBehaviorTests {
    @Test func recordsHooksAttemptsAndOutcomes() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(500), .status(200))
        let recorder = HookRecorder()
        let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:1")!, transport: mock) {
            RecordingBehavior("spy", recorder: recorder, retry: { _, context in context.attempt == 1 ? .retryNow : .doNotRetry })
        }
        try await client.send(Request<Void>(path: "/x"))
        #expect(recorder.hooks(of: "spy") == [
            .additionalHeaders, .modify, .beforeSend, .retryDecision, .additionalHeaders, .modify, .validate, .afterSuccess,
        ])
        #expect(recorder.events.map(\.attempt) == [1, 1, 1, 1, 2, 2, 2, 2])
        #expect(recorder.events.last?.outcome == .success(status: 200))
    }
}
