/// A small value that takes part in every request a client sends: it adds headers, adjusts the
/// request, answers or judges the response, asks for retries and observes the outcome.
///
/// A behavior **declares** each hook it implements by conforming to that hook's protocol, and
/// the compiler checks the method against it. A type that conforms to `RequestBehavior` alone
/// does not compile, so a behavior cannot implement nothing by accident, and a method whose
/// signature misses its hook's (another return type, a missing `async`, `throws` or `inout`,
/// another label) is a compile error, never a method the pipeline silently leaves alone.
///
/// | protocol | hook | runs |
/// |---|---|---|
/// | ``HeaderAdding`` | ``HeaderAdding/additionalHeaders(for:context:)`` | every attempt, first to last |
/// | ``RequestModifying`` | ``RequestModifying/modify(_:context:)`` | every attempt, first to last |
/// | ``SendObserving`` | ``SendObserving/beforeSend(_:context:)`` | once per request, first to last |
/// | ``AttemptIntercepting`` | ``AttemptIntercepting/intercept(_:context:next:)`` | every attempt, first outermost |
/// | ``ResponseValidating`` | ``ResponseValidating/validate(_:context:)`` | every attempt, last to first |
/// | ``RetryDeciding`` | ``RetryDeciding/retryDecision(after:response:context:)`` | every failed attempt, first to last |
/// | ``SuccessObserving`` | ``SuccessObserving/afterSuccess(_:context:)`` | once per request, last to first |
/// | ``FailureObserving`` | ``FailureObserving/afterFailure(_:context:)`` | once per request, last to first |
/// | ``TransferProgressObserving`` | ``TransferProgressObserving/transferProgressed(_:context:)`` | as bytes move |
///
/// Which members a chain calls for each hook is fixed when the chain is built, from these
/// conformances: nothing is learned while requests run, and a behavior costs nothing for a hook
/// it does not declare.
///
/// ### Order
/// A request's chain is the client's behaviors followed by the request's own. Request-side hooks
/// run first to last; response-side hooks run last to first, so the first behavior is outermost.
/// `intercept` nests the same way: the first behavior's is outermost, the last one's calls the
/// transport. `retryDecision` asks first to last; the first `.retry` wins.
///
/// ### Attempts and requests
/// `additionalHeaders`, `modify`, `intercept`, `validate` and `retryDecision` run for **every
/// attempt** (a retried request gets a fresh token). `beforeSend` runs **once per logical
/// request**, after the first attempt is prepared, and then exactly one of `afterSuccess` /
/// `afterFailure` runs, after all attempts and backoff waits — also on cancellation or when
/// another behavior throws. `context.attempt` tells which attempt is running.
///
/// ### State
/// One behavior value serves many concurrent requests: keep per-request state in the
/// ``RequestContext``, never in stored properties. Global state (a token store, a counter)
/// belongs behind an injected protocol so the behavior can be tested alone.
///
/// ### Implement a behavior
/// ```swift
/// struct APIKeyBehavior: HeaderAdding {
///     let key: String
///     func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
///         ["X-API-Key": key]
///     }
/// }
///
/// struct TimingBehavior: SendObserving, SuccessObserving, FailureObserving {
///     enum Start: RequestContextKey { static let defaultValue: ContinuousClock.Instant? = nil }
///     func beforeSend(_ request: HTTPRequest, context: RequestContext) async { context[Start.self] = .now }
///     func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { report(context) }
///     func afterFailure(_ error: NetworkError, context: RequestContext) async { report(context) }
///     func report(_ context: RequestContext) {
///         if let start = context[Start.self] { print("took", ContinuousClock.now - start) }
///     }
/// }
/// ```
///
/// The members whose names begin with an underscore connect the hook protocols to the engine.
/// Each hook protocol supplies them; never implement or call them yourself.
public protocol RequestBehavior: Sendable {
    /// The name used in errors and logs and by ``BehaviorExclusion/named(_:)``. Defaults to the
    /// type's name.
    var name: String { get }

    /// The hooks this type declares, one bit per hook protocol. Supplied by the hook protocols:
    /// a type that conforms to `RequestBehavior` and to no hook protocol does not compile.
    static var _declaredHooks: UInt16 { get }

    /// ``HeaderAdding``'s bit, or 0. Supplied by ``HeaderAdding``.
    static var _headerAddingBit: UInt16 { get }
    /// ``RequestModifying``'s bit, or 0. Supplied by ``RequestModifying``.
    static var _requestModifyingBit: UInt16 { get }
    /// ``SendObserving``'s bit, or 0. Supplied by ``SendObserving``.
    static var _sendObservingBit: UInt16 { get }
    /// ``AttemptIntercepting``'s bit, or 0. Supplied by ``AttemptIntercepting``.
    static var _attemptInterceptingBit: UInt16 { get }
    /// ``ResponseValidating``'s bit, or 0. Supplied by ``ResponseValidating``.
    static var _responseValidatingBit: UInt16 { get }
    /// ``RetryDeciding``'s bit, or 0. Supplied by ``RetryDeciding``.
    static var _retryDecidingBit: UInt16 { get }
    /// ``SuccessObserving``'s bit, or 0. Supplied by ``SuccessObserving``.
    static var _successObservingBit: UInt16 { get }
    /// ``FailureObserving``'s bit, or 0. Supplied by ``FailureObserving``.
    static var _failureObservingBit: UInt16 { get }
    /// ``TransferProgressObserving``'s bit, or 0. Supplied by ``TransferProgressObserving``.
    static var _transferProgressObservingBit: UInt16 { get }
    /// ``WrappingRequestBehavior``'s bit, or 0. Supplied by ``WrappingRequestBehavior``.
    static var _wrappingBit: UInt16 { get }
    /// ``WrappingRequestBehavior/wrappedBehaviors``, or empty. Supplied by ``WrappingRequestBehavior``.
    var _wrappedBehaviors: [any RequestBehavior] { get }
    /// ``SensitiveHeaderDeclaring/sensitiveHeaderNames``, or empty. Supplied by ``SensitiveHeaderDeclaring``.
    var _sensitiveHeaderNames: [String] { get }

    /// The engine's entry to ``HeaderAdding/additionalHeaders(for:context:)``.
    func _additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders
    /// The engine's entry to ``RequestModifying/modify(_:context:)``.
    func _modify(_ request: inout HTTPRequest, context: RequestContext) async throws
    /// The engine's entry to ``SendObserving/beforeSend(_:context:)``.
    func _beforeSend(_ request: HTTPRequest, context: RequestContext) async
    /// The engine's entry to ``AttemptIntercepting/intercept(_:context:next:)``.
    func _intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    /// The engine's entry to ``ResponseValidating/validate(_:context:)``.
    func _validate(_ response: HTTPResponse, context: RequestContext) async throws
    /// The engine's entry to ``RetryDeciding/retryDecision(after:response:context:)``.
    func _retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    /// The engine's entry to ``SuccessObserving/afterSuccess(_:context:)``.
    func _afterSuccess(_ response: HTTPResponse, context: RequestContext) async
    /// The engine's entry to ``FailureObserving/afterFailure(_:context:)``.
    func _afterFailure(_ error: NetworkError, context: RequestContext) async
    /// The engine's entry to ``TransferProgressObserving/transferProgressed(_:context:)``.
    func _transferProgressed(_ progress: TransferProgress, context: RequestContext)
}

/// Sends a request through the rest of the chain's ``AttemptIntercepting/intercept(_:context:next:)``
/// members and the transport: the `next` a behavior's `intercept` is given.
public typealias InterceptNext = @Sendable (HTTPRequest) async throws(NetworkError) -> HTTPResponse

extension RequestBehavior {
    /// The type's name.
    public var name: String { String(describing: Self.self) }

    /// Refuses a type that declares no hook: conform to one of the hook protocols.
    @available(
        *, unavailable,
        message:
            "a behavior declares its hooks: conform to HeaderAdding, RequestModifying, SendObserving, AttemptIntercepting, ResponseValidating, RetryDeciding, SuccessObserving, FailureObserving or TransferProgressObserving instead of RequestBehavior alone"
    )
    public static var _declaredHooks: UInt16 { 0 }

    /// Not a ``HeaderAdding``.
    @inlinable public static var _headerAddingBit: UInt16 { 0 }
    /// Not a ``RequestModifying``.
    @inlinable public static var _requestModifyingBit: UInt16 { 0 }
    /// Not a ``SendObserving``.
    @inlinable public static var _sendObservingBit: UInt16 { 0 }
    /// Not an ``AttemptIntercepting``.
    @inlinable public static var _attemptInterceptingBit: UInt16 { 0 }
    /// Not a ``ResponseValidating``.
    @inlinable public static var _responseValidatingBit: UInt16 { 0 }
    /// Not a ``RetryDeciding``.
    @inlinable public static var _retryDecidingBit: UInt16 { 0 }
    /// Not a ``SuccessObserving``.
    @inlinable public static var _successObservingBit: UInt16 { 0 }
    /// Not a ``FailureObserving``.
    @inlinable public static var _failureObservingBit: UInt16 { 0 }
    /// Not a ``TransferProgressObserving``.
    @inlinable public static var _transferProgressObservingBit: UInt16 { 0 }
    /// Not a ``WrappingRequestBehavior``.
    @inlinable public static var _wrappingBit: UInt16 { 0 }
    /// Wraps nothing.
    @inlinable public var _wrappedBehaviors: [any RequestBehavior] { [] }
    /// Declares no sensitive header.
    @inlinable public var _sensitiveHeaderNames: [String] { [] }

    /// Never called: the chain calls this entry only for a ``HeaderAdding``.
    @inlinable
    public func _additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        HTTPHeaders()
    }
    /// Never called: the chain calls this entry only for a ``RequestModifying``.
    @inlinable
    public func _modify(_ request: inout HTTPRequest, context: RequestContext) async throws {}
    /// Never called: the chain calls this entry only for a ``SendObserving``.
    @inlinable
    public func _beforeSend(_ request: HTTPRequest, context: RequestContext) async {}
    /// Never called: the chain calls this entry only for an ``AttemptIntercepting``.
    @inlinable
    public func _intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext)
        async throws -> HTTPResponse
    {
        try await next(request)
    }
    /// Never called: the chain calls this entry only for a ``ResponseValidating``.
    @inlinable
    public func _validate(_ response: HTTPResponse, context: RequestContext) async throws {}
    /// Never called: the chain calls this entry only for a ``RetryDeciding``.
    @inlinable
    public func _retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        .doNotRetry
    }
    /// Never called: the chain calls this entry only for a ``SuccessObserving``.
    @inlinable
    public func _afterSuccess(_ response: HTTPResponse, context: RequestContext) async {}
    /// Never called: the chain calls this entry only for a ``FailureObserving``.
    @inlinable
    public func _afterFailure(_ error: NetworkError, context: RequestContext) async {}
    /// Never called: the chain calls this entry only for a ``TransferProgressObserving``.
    @inlinable
    public func _transferProgressed(_ progress: TransferProgress, context: RequestContext) {}
}

/// What every hook protocol refines: it supplies ``RequestBehavior/_declaredHooks``, so a type
/// that declares at least one hook is a behavior. Conform to a hook protocol, not to this.
public protocol _RequestHookDeclaring: RequestBehavior {}

extension _RequestHookDeclaring {
    /// Every hook protocol's bit that this type conforms to.
    @inlinable
    public static var _declaredHooks: UInt16 {
        _headerAddingBit | _requestModifyingBit | _sendObservingBit | _attemptInterceptingBit
            | _responseValidatingBit | _retryDecidingBit | _successObservingBit | _failureObservingBit
            | _transferProgressObservingBit | _wrappingBit
    }
}
