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
            ])
    }

    @Test func throwingWhereItShouldNotIsReported() async {
        let violations = await BehaviorContractCheck(ThrowsOnRetry()) { 0 }.run()
        #expect(violations.map(\.description) == [
            "two retries, then success: expected success, got the behavior ThrowsOnRetry threw in modify",
            "two retries, then success: expected 3 attempts, saw 1",
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
