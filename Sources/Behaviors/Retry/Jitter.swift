import ConveyorPipeline

/// Randomizes a backoff delay so clients that failed together don't retry together.
///
/// A computed delay (no one asked for it) is jittered as the policy says: full jitter by default,
/// uniform in `0...delay`. A server's `Retry-After` is a floor: it is never shortened, only
/// lengthened by up to a fifth, by the part this jitter would have taken off (`.full`: 100–120 %
/// of the wait; `.equal`: 100–110 %; `.none`: exactly the wait). Reliability.md, "One jitter
/// rule", has the table for retries and event-stream reconnects.
///
/// ```swift
/// .none                                   // exact delays (tests)
/// .full                                   // uniform in 0...delay (the default)
/// .full(using: SeededGenerator(seed: 7))  // reproducible
/// .equal                                  // delay/2 + uniform in 0...delay/2
/// ```
public struct Jitter: Sendable {
    let apply: @Sendable (Duration) -> Duration

    /// Creates a jitter from a function of the computed delay.
    /// - Parameter apply: Returns the delay to wait; negative results count as zero.
    public init(_ apply: @escaping @Sendable (Duration) -> Duration) { self.apply = apply }

    /// No randomness: wait exactly the computed delay.
    public static let none = Jitter { $0 }

    /// "Full jitter": a uniformly random delay in `0...delay`.
    public static var full: Jitter { full(using: SystemRandomNumberGenerator()) }

    /// "Equal jitter": half the delay plus a uniformly random part of the other half.
    public static var equal: Jitter { equal(using: SystemRandomNumberGenerator()) }

    /// Full jitter drawing from `generator` (for reproducible tests).
    /// - Parameter generator: The random source.
    public static func full(using generator: some RandomNumberGenerator & Sendable) -> Jitter {
        let source = Locked(generator)
        return Jitter { delay in delay * source.withLock { Double.random(in: 0...1, using: &$0) } }
    }

    /// Equal jitter drawing from `generator`.
    /// - Parameter generator: The random source.
    public static func equal(using generator: some RandomNumberGenerator & Sendable) -> Jitter {
        let source = Locked(generator)
        return Jitter { delay in delay / 2 + (delay / 2) * source.withLock { Double.random(in: 0...1, using: &$0) } }
    }
}

/// The one jitter rule for a wait with a floor (a server's `Retry-After` or `retry:`, an event
/// stream's reconnection time): never below the floor, spread upward, and spread at a cap too
/// (the cap is the cap before jitter). Reliability.md, "One jitter rule".
package enum FloorJitter {
    /// `delay × (1 + spread × random)`: from `delay` up to `delay × (1 + spread)`, never shorter
    /// than `delay` (also after rounding), clamped to Conveyor's longest wait.
    /// - Parameters:
    ///   - delay: The wait before jitter: the floor, or a computed delay between the floor and its
    ///     cap.
    ///   - spread: The random part, in `0...1` (`NaN` counts as 0).
    ///   - random: A draw in `0...1`.
    package static func lengthen(_ delay: Duration, spread: Double, random: Double) -> Duration {
        let delay = delay.clampedForConveyor
        let spread = spread.isNaN ? 0 : min(1, max(0, spread))
        let random = random.isNaN ? 0 : min(1, max(0, random))
        return max(delay, Duration.clampedSeconds(delay.secondsValue * (1 + spread * random)))
    }
}
