public import ConveyorPipeline

/// Lets identical `GET` and `HEAD` requests in flight at the same time share one transport
/// call: the first one sends, the others wait for its response.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     AuthTokenBehavior(tokens: keychain)
///     DeduplicationBehavior()
/// }
/// // Ten views ask for the same list at once: one request reaches the server.
/// ```
///
/// Two attempts are identical when they have the same method, URL, body, timeout and size
/// limit, and the same headers, as the whole chain prepared them (credentials included), apart
/// from the ignored headers (``defaultIgnoredHeaders`` unless you pass others): per-request identifiers such as `X-Request-ID` or `traceparent`.
/// Requests with different tokens never share. A credential header is never ignored, even if
/// listed.
///
/// - Each caller gets the response with its own request as ``HTTPResponse/request``, and runs
///   its own `validate`, `retryDecision` and `afterSuccess`/`afterFailure` hooks on it: to the
///   rest of its chain the shared response is the transport's. An error (`.timedOut`,
///   `.connectionFailed`…) reaches every caller as it is; a 500 is a response like any other.
/// - The call runs in a task of its own. A caller that is cancelled, or whose timeout passes,
///   leaves at once with ``NetworkError/cancelled`` and the others go on waiting; when the last
///   caller leaves, the call is cancelled. If the call ends with ``NetworkError/cancelled``
///   because the caller that started it left, the callers still waiting send again, one of them
///   for all.
/// - This is not a cache: once the response is back, the next identical request sends again.
///   A retry is a new attempt and joins whatever is in flight then.
/// - Other methods are never shared. A request that must not share leaves the behavior out:
///   `.excluding(.type(DeduplicationBehavior.self))`.
///
/// Every copy of a value shares one table of calls in flight: create the behavior once, in the
/// client's list (a behavior made per request shares nothing). Neither its description nor
/// `dump` shows a request or a header.
public struct DeduplicationBehavior: AttemptIntercepting {
    /// `X-Request-ID`, `X-Correlation-ID`, `traceparent`, `tracestate` and `Idempotency-Key`:
    /// headers that differ on every request without changing what the server answers.
    public static let defaultIgnoredHeaders = [
        "X-Request-ID", "X-Correlation-ID", "traceparent", "tracestate", "Idempotency-Key",
    ]

    /// The header names left out when attempts are compared; case-insensitive. The shared call
    /// carries the values of the caller that started it.
    package let ignoredHeaders: [String]

    /// The calls in flight, shared by every copy of this value.
    let calls: InFlightCalls

    /// Creates the behavior, with a table of calls in flight of its own.
    /// - Parameter ignoredHeaders: Header names left out when attempts are compared;
    ///   ``defaultIgnoredHeaders`` by default. Credential headers (``SensitiveHeaders``) always
    ///   count, even if listed here.
    public init(ignoring ignoredHeaders: [String] = DeduplicationBehavior.defaultIgnoredHeaders) {
        self.ignoredHeaders = ignoredHeaders
        self.calls = InFlightCalls()
    }

    /// How many callers wait on calls in flight now, the one that started each call included:
    /// one gauge for a dashboard, and for a test the moment every caller has joined (callers that
    /// share one call number more than the calls, ``callsInFlight``).
    public var waitingCallers: Int { calls.waiting }

    /// How many calls are in flight now.
    public var callsInFlight: Int { calls.count }

    /// Joins the identical call in flight, or starts it with `next`; other methods go straight
    /// to `next`.
    /// - Parameters:
    ///   - request: The attempt, as the whole chain prepared it.
    ///   - context: The request's context.
    ///   - next: Sends through the rest of the chain and the transport.
    /// - Returns: The shared response, with `request` as its ``HTTPResponse/request``.
    /// - Throws: The shared call's ``NetworkError``, or ``NetworkError/cancelled`` when this
    ///   caller's task is cancelled (or its step abandoned) while it waits.
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext)
        async throws -> HTTPResponse
    {
        // A download or streamed response has one reader: each caller gets its own transfer.
        guard request.method == .get || request.method == .head, !context.streamsResponseBody else {
            return try await next(request)
        }
        let perAttempt = context[PerAttemptHeaders.self]
        let key = CallKey(request, ignoring: perAttempt.isEmpty ? ignoredHeaders : ignoredHeaders + perAttempt)
        // Whether this caller's own `next` ran (it led the call, or took it over): otherwise the
        // answer came from another caller's transport call.
        let ranOwnCall = Locked(false)
        context[SharedCallAnswer.self] = false
        let response = try await calls.join(key, request: request) { (request: HTTPRequest) async throws(NetworkError) -> HTTPResponse in
            ranOwnCall.withLock { $0 = true }
            return try await next(request)
        }.get()
        context[SharedCallAnswer.self] = !ranOwnCall.withLock { $0 }
        return response
    }
}

/// Whether the attempt's response was another caller's (a de-duplicated call this attempt
/// joined) rather than one its own transport call brought: set by ``DeduplicationBehavior``.
enum SharedCallAnswer: RequestContextKey {
    static let defaultValue = false
}

/// Header names a behavior sets to a new value on every attempt by design (a nonce): they make
/// no two attempts alike, so de-duplication leaves them out of a call's identity.
enum PerAttemptHeaders: RequestContextKey {
    static let defaultValue: [String] = []
}
