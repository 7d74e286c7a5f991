import ConveyorPipeline

/// A clock whose `sleep` returns at once and records how long it was asked to wait, so a test can
/// assert a retry schedule exactly with no real waiting.
///
/// ```swift
/// let clock = ImmediateClock()
/// let client = NetworkClient(baseURL: api, transport: mock, configuration: .init(clock: clock)) {
///     RetryBehavior(.exponentialBackoff(maxAttempts: 4))
/// }
/// _ = try? await client.get("/flaky") as Data
/// #expect(clock.sleeps == [.seconds(1), .seconds(2), .seconds(4)])
/// ```
///
/// `now` moves forward by each sleep. A cancelled task's sleep throws `CancellationError`.
public final class ImmediateClock: Clock, Sendable {
    /// A point on the immediate clock: an offset from its start.
    public struct Instant: InstantProtocol, Hashable, Sendable {
        /// The offset from the clock's start.
        public var offset: Duration
        /// Creates an instant.
        /// - Parameter offset: The offset from the start.
        public init(offset: Duration = .zero) { self.offset = offset }
        /// This instant moved by `duration`.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// The duration from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        /// Earlier instants are smaller.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let state = Locked<(now: Instant, sleeps: [Duration])>((Instant(), []))

    /// Creates a clock at offset zero.
    public init() {}

    /// The current instant (moved forward by every sleep).
    public var now: Instant { state.withLock { $0.now } }
    /// The smallest step: one nanosecond.
    public var minimumResolution: Duration { .nanoseconds(1) }
    /// Every duration a caller slept for, in order.
    public var sleeps: [Duration] { state.withLock { $0.sleeps } }

    /// Records the wait and returns at once (throws if the task is cancelled).
    /// - Parameters:
    ///   - deadline: When the caller wanted to wake.
    ///   - tolerance: Ignored.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        state.withLock { state in
            state.sleeps.append(state.now.duration(to: deadline))
            if deadline > state.now { state.now = deadline }
        }
    }
}
