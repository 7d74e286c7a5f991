import ConveyorPipeline

/// Counts requests in flight for ``ActivityCounterBehavior`` (a network-activity indicator).
public protocol ActivityCounter: Sendable {
    /// A request started.
    func increment() async
    /// A request ended.
    func decrement() async
}

/// A thread-safe ``ActivityCounter`` that tells an observer when activity starts (0 → 1) and
/// stops (1 → 0), the network-activity-indicator case. It never goes below zero.
///
/// ```swift
/// let counter = NetworkActivityCounter { active in
///     Task { @MainActor in spinner.isHidden = !active }
/// }
/// let client = NetworkClient(baseURL: api) { ActivityCounterBehavior(counter: counter) }
/// ```
///
/// The observer is called while the counter's lock is held, so transitions arrive in order;
/// it must not call back into the counter.
public final class NetworkActivityCounter: ActivityCounter {
    private let state = Locked(0)
    private let onChange: @Sendable (Bool) -> Void

    /// Creates a counter.
    /// - Parameter onChange: Called with `true` when the count goes 0 → 1, `false` when 1 → 0.
    public init(onChange: @escaping @Sendable (Bool) -> Void = { _ in }) {
        self.onChange = onChange
    }

    /// Requests in flight.
    public var count: Int { state.withLock { $0 } }

    /// Adds one; reports `true` on 0 → 1.
    public func increment() async {
        state.withLock { count in
            count += 1
            if count == 1 { onChange(true) }
        }
    }

    /// Removes one (never below zero); reports `false` on 1 → 0.
    public func decrement() async {
        state.withLock { count in
            guard count > 0 else { return }
            count -= 1
            if count == 0 { onChange(false) }
        }
    }
}
