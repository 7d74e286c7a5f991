public import ConveyorPipeline

/// Keeps the app running in the background until a request (and all its retries) has finished.
///
/// ```swift
/// #if canImport(UIKit)
/// let client = NetworkClient(baseURL: api) {
///     BackgroundTaskBehavior(runner: UIApplicationBackgroundTaskRunner())
/// }
/// #endif
/// ```
///
/// It begins a task in `beforeSend` and ends it exactly once in `afterSuccess`/`afterFailure`,
/// so the task spans retries and backoff waits. The identifier lives in the request's context,
/// so concurrent requests each end their own.
///
/// If the system's time runs out first, the request is cancelled at once: an attempt in flight
/// (its hooks and its transport call) is abandoned, a backoff wait ends, no further attempt or
/// retry starts, the request fails with `.cancelled` and the task is ended.
/// (`UIApplicationBackgroundTaskRunner` ends the UIKit task inside the expiration handler, as
/// UIKit requires.) Interrupting the attempt in flight runs each attempt in a task of its own
/// (BENCHMARKS.md gives the cost); pass `interruptsInFlightAttempt: false` to let an attempt in
/// flight finish on its own instead (a backoff wait still ends at once).
public struct BackgroundTaskBehavior: SendObserving, SuccessObserving, FailureObserving {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String

    enum TaskKey: RequestContextKey { static let defaultValue: BackgroundTaskID? = nil }

    /// Begins and ends the tasks.
    package let runner: any BackgroundTaskRunner
    /// The task name the system shows when debugging.
    package let taskName: String
    /// Whether expiration interrupts an attempt already in flight (at a cost on every request).
    package let interruptsInFlightAttempt: Bool

    /// Creates the behavior.
    /// - Parameters:
    ///   - runner: Begins and ends background tasks.
    ///   - taskName: A name for debugging.
    ///   - interruptsInFlightAttempt: Whether expiration also interrupts the attempt in flight;
    ///     `true` by default. With `false`, expiration stops the request at its next step.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default. Give two behaviors of one type different names to leave one out.
    public init(
        runner: any BackgroundTaskRunner, taskName: String = "Conveyor request", interruptsInFlightAttempt: Bool = true, name: String? = nil
    ) {
        self.name = name ?? String(describing: Self.self)
        self.runner = runner
        self.taskName = taskName
        self.interruptsInFlightAttempt = interruptsInFlightAttempt
    }

    /// Begins the background task; its expiration cancels this request.
    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        if interruptsInFlightAttempt { context.makeInterruptible() }
        let id = await runner.beginTask(named: taskName) { [context] in context.cancel() }
        context[TaskKey.self] = id
    }

    /// Ends the task.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { await end(context) }

    /// Ends the task.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async { await end(context) }

    private func end(_ context: RequestContext) async {
        let id = context.update(TaskKey.self) { id in
            defer { id = nil }
            return id
        }
        if let id { await runner.endTask(id) }
    }
}
