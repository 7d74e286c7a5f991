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

/// An ``ActivityCounter`` that lives on the main actor, for a spinner bound to a main-actor model:
/// the count is kept on the main actor and `onChange` runs there, once per transition, in the
/// order the transitions happen (busy, idle, busy…; never two of a kind in a row).
///
/// ```swift
/// @MainActor @Observable final class Model {
///     var isSpinning = false
///     lazy var client = NetworkClient(baseURL: api) {
///         ActivityCounterBehavior(counter: MainActorActivityCounter { [unowned self] in isSpinning = $0 })
///     }
/// }
/// ```
///
/// Each request's start and end hop to the main actor (one hop each). A spinner driven by
/// ``NetworkActivityCounter`` with `Task { @MainActor in … }` in its observer can see `false`
/// before `true`: the tasks it starts are not ordered.
@MainActor public final class MainActorActivityCounter: ActivityCounter {
    private let onChange: @MainActor (Bool) -> Void

    /// Requests in flight.
    public private(set) var count = 0

    /// Whether a request is in flight: what `onChange` was last called with.
    public var isBusy: Bool { count > 0 }

    /// Creates a counter; it can be made anywhere, and counts on the main actor.
    /// - Parameter onChange: Called on the main actor with `true` when the count goes 0 → 1,
    ///   `false` when 1 → 0.
    public nonisolated init(onChange: @escaping @MainActor (Bool) -> Void = { _ in }) {
        self.onChange = onChange
    }

    /// Adds one; reports `true` on 0 → 1.
    public func increment() async {
        count += 1
        if count == 1 { onChange(true) }
    }

    /// Removes one (never below zero); reports `false` on 1 → 0.
    public func decrement() async {
        guard count > 0 else { return }
        count -= 1
        if count == 0 { onChange(false) }
    }
}
