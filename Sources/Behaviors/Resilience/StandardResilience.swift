public import ConveyorPipeline

extension CombinedRequestBehavior {
    /// The standard resilience chain, in its order: ``RetryBehavior`` (backoff with full jitter,
    /// spending the client's retry budget), ``RateLimitBehavior`` (the quotas origins announce),
    /// ``ConcurrencyLimitBehavior`` when you pass a limiter, and ``CircuitBreakerBehavior``, last.
    /// Pair it with ``NetworkClient/Configuration/standardResilience`` for the timeouts; Docs,
    /// "Resilience", gives each default and why.
    ///
    /// ```swift
    /// let client = NetworkClient(baseURL: api, configuration: .standardResilience) {
    ///     AuthTokenBehavior(tokens: keychain)
    ///     CombinedRequestBehavior.standardResilience()
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - retry: The retry policy: 3 attempts, 1 s base, 30 s cap, full jitter.
    ///   - rateLimiter: The rate limiter; pass one instance to several clients to share it.
    ///   - concurrencyLimiter: A concurrency limiter, or `nil` (the default): none. Its signal is
    ///     an origin's latency, so an origin whose endpoints differ in speed by more than its
    ///     tolerance would read its slow endpoints as overload; opt in where they do not.
    ///   - breaker: The circuit breaker; pass one instance to several clients to share it.
    /// - Returns: The chain, one member of a client's chain (exclusions by type reach its members).
    public static func standardResilience(
        retry: RetryPolicy = .exponentialBackoff(),
        rateLimiter: RateLimiter = RateLimiter(),
        concurrencyLimiter: ConcurrencyLimiter? = nil,
        breaker: CircuitBreaker = CircuitBreaker()
    ) -> CombinedRequestBehavior {
        var members: [any RequestBehavior] = [RetryBehavior(retry), RateLimitBehavior(rateLimiter)]
        if let concurrencyLimiter { members.append(ConcurrencyLimitBehavior(concurrencyLimiter)) }
        members.append(CircuitBreakerBehavior(breaker, policy: retry))
        return CombinedRequestBehavior(members)
    }
}
