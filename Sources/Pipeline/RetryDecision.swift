/// What a behavior answers when an attempt failed: try again (after a wait) or not.
///
/// ```swift
/// func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async -> RetryDecision {
///     context.attempt < 3 && failure == .timedOut ? .retry(after: .seconds(1)) : .doNotRetry
/// }
/// ```
public enum RetryDecision: Sendable, Hashable {
    /// Let the failure stand (as far as this behavior is concerned).
    case doNotRetry
    /// Send another attempt after waiting this long on the client's clock (`.zero`: at once).
    case retry(after: Duration)

    /// Send another attempt at once.
    public static var retryNow: RetryDecision { .retry(after: .zero) }
}
