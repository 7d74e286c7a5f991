public import ConveyorPipeline
import Foundation

/// When and how long ``RetryBehavior`` waits before trying a failed request again.
///
/// ```swift
/// RetryBehavior(.exponentialBackoff(maxAttempts: 3))            // 1 s, 2 s (with full jitter)
/// RetryBehavior(RetryPolicy(maxAttempts: 5, baseDelay: .milliseconds(200), maxDelay: .seconds(5), jitter: .none))
/// ```
///
/// The delay before retry *n* (n = 1 after the first failure) is
/// `min(baseDelay × multiplier^(n-1), maxDelay)`, then jittered (full jitter by default: uniform
/// in `0...delay`, so waits at ``maxDelay`` stay spread). A `Retry-After` header (seconds or
/// HTTP-date) on a retryable response replaces that delay, and it is a floor: the wait is never
/// shorter, and is spread up to a fifth above it by the part ``jitter`` would take off a delay
/// (`.full`: 100–120 % of it; `.none`: exactly it), so clients the server sent away at once do not
/// all come back at the same instant. If it asks for more than ``maxRetryAfter``, the request is
/// **not** retried: the server wants more patience than the policy allows, and retrying early
/// would only add load (a value at most ``maxRetryAfter`` is spread above it as any other). A
/// negative or unparsable value is ignored.
public struct RetryPolicy: Sendable {
    /// Attempts in all, the first included (3 = the first try and two retries).
    public var maxAttempts: Int
    /// The delay before the first retry.
    public var baseDelay: Duration
    /// How much each further delay grows.
    public var multiplier: Double
    /// The longest computed delay.
    public var maxDelay: Duration
    /// Randomizes computed delays; spreads a `Retry-After` wait upward by up to a fifth, never
    /// below it (``Jitter/none``: exactly the server's wait).
    public var jitter: Jitter
    /// Statuses worth retrying: 408, 429, 500, 502, 503, 504 by default.
    public var retryableStatuses: Set<Int> {
        didSet { lowestRetryableStatus = retryableStatuses.min() ?? .max }
    }
    /// The lowest of ``retryableStatuses``: a status below it (every success, with the default
    /// set) is judged without hashing it, on every answer a gate counts.
    private var lowestRetryableStatus: Int
    /// Methods retried without further proof of idempotency: GET, HEAD, PUT, DELETE, OPTIONS, TRACE.
    /// A request that carries an idempotency key (see ``IdempotencyKeyBehavior``) is retried
    /// whatever its method.
    public var retryableMethods: Set<HTTPMethod>
    /// Whether `Retry-After` replaces the computed delay.
    public var honorsRetryAfter: Bool
    /// The longest `Retry-After` wait accepted; longer ones end the retries.
    public var maxRetryAfter: Duration

    /// Creates a policy.
    /// - Parameters:
    ///   - maxAttempts: Attempts in all, the first included.
    ///   - baseDelay: The delay before the first retry.
    ///   - multiplier: Growth factor per retry.
    ///   - maxDelay: Cap on computed delays.
    ///   - jitter: Randomization of computed delays.
    ///   - retryableStatuses: Statuses worth retrying.
    ///   - retryableMethods: Methods retried without an idempotency key.
    ///   - honorsRetryAfter: Whether `Retry-After` replaces the computed delay.
    ///   - maxRetryAfter: The longest `Retry-After` wait accepted.
    public init(
        maxAttempts: Int = 3, baseDelay: Duration = .seconds(1), multiplier: Double = 2,
        maxDelay: Duration = .seconds(30), jitter: Jitter = .full,
        retryableStatuses: Set<Int> = [408, 429, 500, 502, 503, 504],
        retryableMethods: Set<HTTPMethod> = [.get, .head, .put, .delete, .options, .trace],
        honorsRetryAfter: Bool = true, maxRetryAfter: Duration = .seconds(60)
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = max(.zero, baseDelay)
        self.multiplier = multiplier.isNaN ? 1 : max(1, multiplier)
        self.maxDelay = max(.zero, maxDelay)
        self.jitter = jitter
        self.retryableStatuses = retryableStatuses
        self.lowestRetryableStatus = retryableStatuses.min() ?? .max
        self.retryableMethods = retryableMethods
        self.honorsRetryAfter = honorsRetryAfter
        self.maxRetryAfter = max(.zero, maxRetryAfter)
    }

    /// Exponential backoff: 1 s, 2 s, 4 s … up to 30 s, with full jitter.
    /// - Parameters:
    ///   - maxAttempts: Attempts in all, the first included.
    ///   - baseDelay: The delay before the first retry.
    ///   - maxDelay: Cap on computed delays.
    ///   - jitter: Randomization; `.full` by default, `.none` for exact delays.
    public static func exponentialBackoff(
        maxAttempts: Int = 3, baseDelay: Duration = .seconds(1), maxDelay: Duration = .seconds(30),
        jitter: Jitter = .full
    ) -> RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, baseDelay: baseDelay, maxDelay: maxDelay, jitter: jitter)
    }

    /// Whether an attempt failed because of the upstream or the way to it, not because of the
    /// request: a timeout, a failed connection, or a status in ``retryableStatuses``. The one
    /// judgment ``RetryBehavior`` retries on and ``CircuitBreakerBehavior`` counts; a 4xx the
    /// caller caused (other than 408 and 429) is never one.
    /// - Parameters:
    ///   - failure: How the attempt failed (`nil`: it got a response).
    ///   - status: The response's status, when one arrived.
    package func isUpstreamFailure(_ failure: NetworkError?, status: Int?) -> Bool {
        switch failure {
        case .timedOut?, .connectionFailed?: true
        case nil, .unauthorized?, .notFound?, .unacceptableStatus?:
            status.map { $0 >= lowestRetryableStatus && retryableStatuses.contains($0) } ?? false
        default: false
        }
    }

    /// What an exchange that ended with `failure` says of its upstream, as the breaker and the
    /// concurrency limiter count it: `true`, the upstream failed (``isUpstreamFailure(_:status:)``,
    /// or a cancellation its attempt's deadline caused); `nil`, nothing (the caller left, the
    /// request's own fault, a limiter's refusal).
    /// - Parameters:
    ///   - failure: How the exchange ended.
    ///   - deadlinePassed: Whether the attempt's deadline has passed (asked for a cancellation only).
    package func upstreamFailed(_ failure: NetworkError, deadlinePassed: () -> Bool) -> Bool? {
        if failure.isCancellation { return deadlinePassed() ? true : nil }
        return isUpstreamFailure(failure, status: failure.status) ? true : nil
    }

    /// The most a `Retry-After` wait is lengthened, as a part of it: 0.2 (as an event stream's
    /// default `EventStreamOptions.jitter`).
    package static let retryAfterSpread = 0.2

    /// The wait for a server's `Retry-After` of `floor`: never shorter, spread upward by up to
    /// ``retryAfterSpread`` of it, by the part ``jitter`` takes off the same delay (full jitter:
    /// uniform over 100–120 %; `.none`: exactly `floor`).
    /// - Parameter floor: The server's wait (already judged against ``maxRetryAfter``).
    package func delay(retryAfter floor: Duration) -> Duration {
        let floor = floor.clampedForConveyor
        guard floor > .zero else { return floor }
        let jittered = jitter.apply(floor).clampedForConveyor
        let takenOff = 1 - jittered.secondsValue / floor.secondsValue
        return FloorJitter.lengthen(floor, spread: Self.retryAfterSpread, random: takenOff)
    }

    /// The computed delay before retry `retry` (1-based), jitter applied.
    ///
    /// Computed in floating point and clamped, so no policy traps: an infinite or huge
    /// multiplier stops at ``maxDelay``, and the result (jitter included) is between zero and
    /// 100 years.
    /// - Parameter retry: 1 for the first retry.
    public func delay(beforeRetry retry: Int) -> Duration {
        let exponent = Double(min(max(1, retry), 100_000) - 1)
        let seconds = min(baseDelay.secondsValue * pow(multiplier, exponent), maxDelay.secondsValue)
        return jitter.apply(.clampedSeconds(seconds)).clampedForConveyor
    }
}

