public import ConveyorPipeline

/// What ``CacheBehavior`` did with an attempt, stored in the request's context under this type:
/// `context[CacheOutcome.self]` reads it (`nil` when no cache took part). A behavior registered
/// before the cache sees it in `validate`, `afterSuccess` or `afterFailure`.
///
/// ```swift
/// struct CacheMetricsBehavior: SuccessObserving {
///     func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
///         if context[CacheOutcome.self] == .hit { print("served from the cache") }
///     }
/// }
/// ```
public enum CacheOutcome: Sendable, Hashable, RequestContextKey {
    /// Answered from storage; the server was not contacted.
    case hit
    /// The stored response was stale (or needed revalidation); the server answered a conditional
    /// request with `304 Not Modified` and the stored response was returned.
    case revalidated
    /// No usable stored response: the server's answer was returned (and stored if it allows).
    case miss
    /// The request was not one the cache serves (not a `GET`, `Cache-Control: no-store`, its own
    /// conditional or `Range` headers): it went to the server untouched. A successful unsafe
    /// method (`POST`, `PUT`, `PATCH`, `DELETE`) removed what was stored for its URL.
    case bypassed

    /// No outcome until a cache records one.
    public static let defaultValue: CacheOutcome? = nil
}
