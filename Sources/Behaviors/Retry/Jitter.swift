import ConveyorPipeline

/// Randomizes a backoff delay so clients that failed together don't retry together.
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
