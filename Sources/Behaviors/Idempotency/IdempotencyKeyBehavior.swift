public import ConveyorPipeline
public import Foundation

/// The idempotency key of a request, stored in its context by ``IdempotencyKeyBehavior``.
/// ``RetryBehavior`` retries any request that has one, whatever its method.
public enum IdempotencyKey: RequestContextKey {
    /// No key until the behavior makes one.
    public static let defaultValue: String? = nil
}

/// Adds one `Idempotency-Key` per logical request, the same on every attempt, so a server can
/// recognise a retried `POST` and a ``RetryBehavior`` may safely retry it.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     IdempotencyKeyBehavior()                      // POST and PATCH get a key
///     RetryBehavior(.exponentialBackoff(maxAttempts: 3))
/// }
/// ```
public struct IdempotencyKeyBehavior: HeaderAdding {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String

    /// `Idempotency-Key`.
    public static let defaultHeaderName = "Idempotency-Key"

    /// The header name.
    package let headerName: String
    /// The methods that get a key.
    package let methods: Set<HTTPMethod>
    /// Makes a new key; a UUID by default.
    package let makeKey: @Sendable () -> String

    /// Creates the behavior.
    /// - Parameters:
    ///   - headerName: The header; `Idempotency-Key` by default.
    ///   - methods: Which methods get a key; POST and PATCH by default.
    ///   - makeKey: Makes a key; a random UUID by default.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default. Give two behaviors of one type different names to leave one out.
    public init(
        headerName: String = IdempotencyKeyBehavior.defaultHeaderName, methods: Set<HTTPMethod> = [.post, .patch],
        makeKey: @escaping @Sendable () -> String = { UUID().uuidString }, name: String? = nil
    ) {
        self.name = name ?? String(describing: Self.self)
        self.headerName = headerName
        self.methods = methods
        self.makeKey = makeKey
    }

    /// Adds the request's key, making it on the first attempt.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        guard methods.contains(request.method) else { return HTTPHeaders() }
        let key = context.update(IdempotencyKey.self) { key in
            if key == nil { key = makeKey() }
            return key ?? ""
        }
        return [headerName: key]
    }
}

extension IdempotencyKey {
    /// The one rule for sending a failed request again (contract rule 16), asked by
    /// ``RetryBehavior`` before a retry and by an event stream before a reconnect: its method is
    /// one of `methods` (``HTTPMethod/isIdempotent`` when `nil`), or it carries an idempotency
    /// key (in its context, from ``IdempotencyKeyBehavior``, or as an `Idempotency-Key` header).
    package static func allowsResending(
        _ request: HTTPRequest, context: RequestContext, methods: Set<HTTPMethod>? = nil
    ) -> Bool {
        (methods?.contains(request.method) ?? request.method.isIdempotent) || context[IdempotencyKey.self] != nil
            || request.headers.contains(IdempotencyKeyBehavior.defaultHeaderName)
    }
}
