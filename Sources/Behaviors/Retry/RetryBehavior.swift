public import ConveyorPipeline
public import Foundation

/// Retries failed attempts with exponential backoff: idempotent requests (or ones with an
/// idempotency key), retryable statuses (408, 429, 5xx gateway errors) and transient transport
/// failures (timeouts, lost or refused connections, DNS). Honours `Retry-After` as a floor: never
/// sooner, spread up to a fifth later (see ``RetryPolicy``).
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior(.exponentialBackoff(maxAttempts: 3))
/// }
/// ```
///
/// The waits happen on the client's clock (`NetworkClient.Configuration.clock`), so tests pass an
/// `ImmediateClock` and assert the exact schedule. A cancelled request never retries, and a
/// cancelled wait ends at once.
public struct RetryBehavior: RetryDeciding {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String

    /// The policy.
    package let policy: RetryPolicy
    /// The current time, for `Retry-After` HTTP-dates.
    package let now: @Sendable () -> Date

    /// Creates the behavior.
    /// - Parameters:
    ///   - policy: When and how long to wait.
    ///   - now: The current time, for `Retry-After` dates; injectable for tests.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default. Give two behaviors of one type different names to leave one out.
    public init(_ policy: RetryPolicy = .exponentialBackoff(), now: @escaping @Sendable () -> Date = { Date() }, name: String? = nil) {
        self.name = name ?? String(describing: Self.self)
        self.policy = policy
        self.now = now
    }

    /// Decides whether and when to retry.
    public func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        let attempt = context.attemptSinceReconnect  // an event stream's reconnects start the count again
        guard attempt < policy.maxAttempts, isRetryable(failure, response: response) else { return .doNotRetry }
        let request = response?.request ?? context.originalRequest
        guard IdempotencyKey.allowsResending(request, context: context, methods: policy.retryableMethods) else {
            return .doNotRetry
        }
        if policy.honorsRetryAfter, let value = response?.headers["Retry-After"],
            let wait = RetryAfter.delay(from: value, now: now())
        {
            // The server's wait is judged against the policy, then spread above it, never below.
            return wait <= policy.maxRetryAfter ? .retry(after: policy.delay(retryAfter: wait)) : .doNotRetry
        }
        return .retry(after: policy.delay(beforeRetry: attempt))
    }

    private func isRetryable(_ failure: NetworkError, response: HTTPResponse?) -> Bool {
        policy.isUpstreamFailure(failure, status: response?.status)
    }
}
