public import ConveyorPipeline

/// Counts each request once while it is in flight, retries and backoff waits included.
///
/// ```swift
/// let counter = NetworkActivityCounter { active in print(active ? "busy" : "idle") }
/// let client = NetworkClient(baseURL: api) { ActivityCounterBehavior(counter: counter) }
/// ```
///
/// It increments in `beforeSend` and decrements in `afterSuccess`/`afterFailure`, which the
/// pipeline pairs exactly, also on failure and cancellation, so the count returns to zero.
public struct ActivityCounterBehavior: SendObserving, SuccessObserving, FailureObserving {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String

    enum Counted: RequestContextKey { static let defaultValue = false }

    /// The counter.
    package let counter: any ActivityCounter

    /// Creates the behavior.
    /// - Parameters:
    ///   - counter: The counter to increment and decrement.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default. Give two behaviors of one type different names to leave one out.
    public init(counter: any ActivityCounter, name: String? = nil) {
        self.name = name ?? String(describing: Self.self)
        self.counter = counter
    }

    /// Increments the counter.
    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        context[Counted.self] = true
        await counter.increment()
    }

    /// Decrements the counter.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { await end(context) }

    /// Decrements the counter.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async { await end(context) }

    private func end(_ context: RequestContext) async {
        let counted = context.update(Counted.self) { counted in
            defer { counted = false }
            return counted
        }
        if counted { await counter.decrement() }
    }
}
