
/// A typed key for per-request state stored in a ``RequestContext``, like SwiftUI's
/// `EnvironmentKey`.
///
/// ```swift
/// enum StartTimeKey: RequestContextKey {
///     static let defaultValue: ContinuousClock.Instant? = nil
/// }
/// context[StartTimeKey.self] = .now          // in beforeSend
/// let start = context[StartTimeKey.self]      // in afterSuccess
/// ```
public protocol RequestContextKey: Sendable {
    /// The type of the stored value.
    associatedtype Value: Sendable
    /// The value read before anything was stored.
    static var defaultValue: Value { get }
}

/// Values a request carries into its ``RequestContext`` before any behavior runs (see
/// `Request.setting(_:to:)`): what the caller knows about the request that behaviors may act on,
/// such as the operation a generated client is calling.
public struct RequestContextValues: Sendable {
    /// The values in the order they were set; a later value for the same key replaces an earlier one.
    var entries: [RequestContext.Entry] = []

    /// No values.
    public init() {}

    /// Whether no value is set.
    public var isEmpty: Bool { entries.isEmpty }

    /// Stores `value` under `key`, replacing a value stored under it before.
    /// - Parameters:
    ///   - key: The key type.
    ///   - value: The value the context starts with.
    public mutating func set<Key: RequestContextKey>(_ key: Key.Type, to value: Key.Value) {
        let id = ObjectIdentifier(key)
        if let index = entries.firstIndex(where: { $0.key == id }) {
            entries[index].value = value
        } else {
            entries.append(RequestContext.Entry(key: id, value: value))
        }
    }

    /// The value stored under `key`, or its default value.
    /// - Parameter key: The key type.
    public subscript<Key: RequestContextKey>(key: Key.Type) -> Key.Value {
        let id = ObjectIdentifier(key)
        guard let entry = entries.first(where: { $0.key == id }) else { return Key.defaultValue }
        return entry.value as? Key.Value ?? Key.defaultValue
    }
}

/// A number that identifies one logical request (all its attempts) among the requests of the
/// client that sent it. Each client counts from 1: nothing is shared between clients.
public struct RequestID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The raw number, increasing from 1 per client.
    public let rawValue: UInt64

    /// Creates an identifier from a raw number.
    /// - Parameter rawValue: The number.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// `#N`.
    public var description: String { "#\(rawValue)" }

    /// Orders identifiers by their number.
    public static func < (lhs: RequestID, rhs: RequestID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The state of one logical request, shared by every behavior's hooks across all its attempts.
///
/// A behavior value serves many requests at once, so it must keep per-request state here,
/// never in its own properties (design contract, point 6):
///
/// ```swift
/// struct TimingBehavior: SendObserving, SuccessObserving {
///     enum Start: RequestContextKey { static let defaultValue: ContinuousClock.Instant? = nil }
///     func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
///         context[Start.self] = .now
///     }
///     func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
///         if let start = context[Start.self] { print(ContinuousClock.now - start) }
///     }
/// }
/// ```
///
/// It is safe to read and write from any task.
public final class RequestContext: Sendable {
    /// One stored value and the key type it belongs to.
    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline let key: ObjectIdentifier
        @usableFromInline var value: any Sendable

        @inlinable
        init(key: ObjectIdentifier, value: any Sendable) {
            self.key = key
            self.value = value
        }
    }

    @usableFromInline
    struct State {
        var requestID: RequestID?
        var attempt = 1
        /// Values by key type. A request stores a handful, so a linear scan beats hashing.
        @usableFromInline var storage: [Entry] = []
        var cancelRequested = false
        var interruptible = false
        /// The guarded step `cancel()` must end now, if any (a request is in one step at a time).
        var interruptTarget: (any ContextInterruptible)?

        @inlinable
        func value<Key: RequestContextKey>(_ key: Key.Type) -> Key.Value {
            let id = ObjectIdentifier(key)
            guard let index = storage.firstIndex(where: { $0.key == id }) else { return Key.defaultValue }
            return storage[index].value as? Key.Value ?? Key.defaultValue
        }

        @inlinable
        mutating func set<Key: RequestContextKey>(_ value: Key.Value, for key: Key.Type) {
            let id = ObjectIdentifier(key)
            if let index = storage.firstIndex(where: { $0.key == id }) {
                storage[index].value = value
            } else {
                if storage.capacity == 0 { storage.reserveCapacity(4) }
                storage.append(Entry(key: id, value: value))
            }
        }
    }

    // The key-value accessors below are `@inlinable`: behaviors call them on every request from
    // other modules, and unspecialized they pay a runtime metadata lookup and a generic cast per
    // access.
    @usableFromInline let state = Locked(State())

    /// Identifies this logical request (the same for all attempts) among its client's requests.
    /// Assigned when first read, from the client's counter, so requests that never read it touch
    /// nothing shared. A context made without a client counts on its own (its first ID is `#1`).
    public var requestID: RequestID {
        if let owner { return owner.requestID }
        if let id = state.withLock({ $0.requestID }) { return id }
        let fresh = scope.nextRequestID()
        return state.withLock { state in
            if let id = state.requestID { return id }
            state.requestID = fresh
            return fresh
        }
    }

    /// The request as the caller made it, before any behavior changed it.
    public let originalRequest: HTTPRequest

    /// The origin of the sending client's base URL, which credential behaviors scope their
    /// headers to by default; `nil` when the request was not sent by a client with a base URL.
    public var baseOrigin: Origin? { scope.origin }

    /// The origin the request goes to, as the caller made it: ``baseOrigin`` when it targets it,
    /// else the request URL's. The per-origin behaviors (circuit breaker, limiters) count by it.
    package var requestOrigin: Origin? {
        (targetsBaseOrigin ? baseOrigin : nil) ?? Origin(originalRequest.url)
    }

    /// The sending client's scope when the request, as the caller made it, goes to the client's
    /// base origin; `nil` otherwise. The same object for every such request of one client, so a
    /// per-origin record (a circuit, a limiter's account) is found by its identity without making
    /// or comparing ``requestOrigin``.
    package var baseOriginScope: AnyObject? {
        scope.hasOrigin && targetsBaseOrigin ? scope : nil
    }

    /// The identity of ``baseOriginScope``, read without retaining it.
    package var baseOriginScopeID: ObjectIdentifier? {
        scope.hasOrigin && targetsBaseOrigin ? ObjectIdentifier(scope) : nil
    }

    /// What the sending client shares with its requests (its base origin, its request-ID
    /// counter): made once per client, and each request stores one reference.
    private let scope: ClientScope

    /// For one attempt's own view of the request (an attempt that runs beside another: a hedge,
    /// contract rule 20), the request's context; `nil` for the request's context itself.
    /// Cancellation and the request ID are the request's; the values are the attempt's own copy.
    private let owner: RequestContext?

    /// Whether the request, as the caller made it, goes to ``baseOrigin`` (a relative path, or
    /// an absolute URL on the same scheme, host and port). `true` when there is no base origin.
    public let targetsBaseOrigin: Bool

    /// Creates a context for a new logical request.
    /// - Parameters:
    ///   - request: The request as the caller made it.
    ///   - requestID: Its identifier; by default a new one, assigned when first read.
    ///   - baseOrigin: The origin of the sending client's base URL, if any.
    ///   - targetsBaseOrigin: Whether the request goes to that origin.
    public convenience init(
        request: HTTPRequest, requestID: RequestID? = nil, baseOrigin: Origin? = nil, targetsBaseOrigin: Bool = true
    ) {
        self.init(request: request, requestID: requestID, scope: ClientScope(origin: baseOrigin), targetsBaseOrigin: targetsBaseOrigin)
    }

    /// Creates a context for a request of the client that `scope` belongs to; `transfer` is
    /// where its response body goes and who hears of progress, if anyone.
    package init(
        request: HTTPRequest, requestID: RequestID? = nil, scope: ClientScope, targetsBaseOrigin: Bool,
        transfer: TransferHandler? = nil, values: RequestContextValues = RequestContextValues()
    ) {
        self.originalRequest = request
        self.scope = scope
        self.targetsBaseOrigin = !scope.hasOrigin || targetsBaseOrigin
        self.transfer = transfer
        self.owner = nil
        if requestID != nil || !values.entries.isEmpty {
            state.withLock {
                $0.requestID = requestID
                $0.storage = values.entries
            }
        }
        transfer?.attach(self)
    }

    /// An attempt's own view of `owner`'s request (contract rule 20): it starts with a copy of the
    /// request's values and keeps what the attempt's hooks write to itself, so attempts that run
    /// at once never see each other's per-attempt values. ``adopt(_:)`` keeps the winner's.
    private init(viewOf owner: RequestContext, attempt: Int) {
        self.originalRequest = owner.originalRequest
        self.scope = owner.scope
        self.targetsBaseOrigin = owner.targetsBaseOrigin
        self.transfer = nil  // a request with a transfer is never hedged
        self.owner = owner
        let storage = owner.state.withLock { $0.storage }
        state.withLock {
            $0.storage = storage
            $0.attempt = attempt
        }
    }

    /// Whether this is one attempt's view of a request (``attemptView(_:)``).
    package var isAttemptView: Bool { owner != nil }

    /// A view of this request for attempt number `attempt`, run beside others.
    package func attemptView(_ attempt: Int) -> RequestContext {
        RequestContext(viewOf: self, attempt: attempt)
    }

    /// Makes `view`'s values the request's: the request goes on as the attempt it saw left it,
    /// as if that attempt had been the only one.
    package func adopt(_ view: RequestContext) {
        guard view.owner === self else { return }
        let storage = view.state.withLock { $0.storage }
        state.withLock { $0.storage = storage }
    }

    /// The request's transfer: where its response body goes and who hears of progress. The
    /// engine hands it to a ``StreamingHTTPTransport``; it is not part of the request.
    package let transfer: TransferHandler?

    /// Whether the response body goes somewhere other than ``HTTPResponse/body`` (a file, a
    /// caller's stream): behaviors that keep or share responses (a cache, de-duplication) leave
    /// such a request alone, since its response reaches them with an empty body.
    public var streamsResponseBody: Bool { transfer?.takesBodies ?? false }

    /// Whether a credential may go with this request: to the client's base origin, or to one of
    /// `allowed`. Credential behaviors call it before adding a header (contract rule 11).
    /// - Parameter allowed: Other origins the credential may go to.
    public func credentialsAllowed(alsoTo allowed: Set<Origin>) -> Bool {
        if targetsBaseOrigin { return true }
        guard !allowed.isEmpty, let origin = Origin(originalRequest.url) else { return false }
        return allowed.contains(origin)
    }

    /// Which attempt is being prepared, sent or judged: 1 for the first, 2 for the first retry…
    public var attempt: Int { state.withLock { $0.attempt } }

    package func setAttempt(_ attempt: Int) {
        state.withLock { $0.attempt = attempt }
    }

    /// Which attempt since an event stream last reconnected: ``attempt`` for every other request.
    /// Retry limits and "once per request" rules (one token refresh) count from here, so a
    /// stream that has reconnected a hundred times still gets its retries and its refresh.
    package var attemptSinceReconnect: Int {
        state.withLock { $0.attempt - $0.value(RunStart.self) + 1 }
    }

    /// The attempt that starts a new run after a reconnect (see ``attemptSinceReconnect``).
    package var runStart: Int { state.withLock { $0.value(RunStart.self) } }

    /// Starts a new run of attempts at `attempt` (an event stream reconnected).
    package func startRun(at attempt: Int) {
        state.withLock {
            $0.attempt = attempt
            $0.set(attempt, for: RunStart.self)
        }
    }

    /// Where the current run of attempts started: kept with the request's values (only event
    /// streams write it), so that plain requests carry nothing more.
    private enum RunStart: RequestContextKey { static let defaultValue = 1 }

    /// Sets the deadline of the attempt about to start (only when it has one).
    package func setAttemptDeadline(_ deadline: Deadline) {
        state.withLock { $0.set(deadline, for: AttemptDeadline.self) }
    }

    /// Whether the attempt in flight has passed its deadline: an attempt that ended as cancelled
    /// with this true was ended by its timeout, not by the caller. Read by the circuit breaker.
    package var attemptDeadlineHasPassed: Bool {
        state.withLock { $0.value(AttemptDeadline.self) }?.hasPassed() ?? false
    }

    /// How long the attempt in flight has left before its deadline, or `nil` when it has no fixed
    /// one (no timeout, an event stream's idle timeout, or a chain with no `intercept` member).
    /// Read by the rate limiter, which fails an attempt at once rather than wait past it.
    package var attemptTimeRemaining: Duration? {
        state.withLock { $0.value(AttemptDeadline.self) }?.remaining()
    }

    /// The deadline of the attempt in flight: kept with the request's values, written only when
    /// an attempt with a deadline has an `intercept` member, so other requests carry nothing more.
    private enum AttemptDeadline: RequestContextKey { static let defaultValue: Deadline? = nil }

    /// Why the engine did not send the retry (or reconnect) the behaviors asked for, if it did
    /// not: the origin's retry budget was spent. Read by the logging behavior.
    package var retryRefusal: RetryRefusal? { state.withLock { $0.value(RefusedRetry.self) } }

    /// Notes that the retry budget refused this request's retry.
    package func noteRetryRefused(_ refusal: RetryRefusal) {
        state.withLock { $0.set(refusal, for: RefusedRetry.self) }
    }

    /// How long the rate limiter held this request's attempts back in all, if it did. Read by
    /// the logging behavior.
    package var pacedFor: Duration? { state.withLock { $0.value(PacedFor.self) } }

    /// Adds `wait` to the time the rate limiter held this request back.
    package func notePaced(_ wait: Duration) {
        state.withLock { $0.set(($0.value(PacedFor.self) ?? .zero) + wait, for: PacedFor.self) }
    }

    private enum PacedFor: RequestContextKey { static let defaultValue: Duration? = nil }

    private enum RefusedRetry: RequestContextKey { static let defaultValue: RetryRefusal? = nil }

    /// Notes that the retry a behavior is asking for resends the request with a credential it just
    /// refreshed (`AuthTokenBehavior`): the retry budget counts it but does not refuse it.
    package func noteRetryWithNewCredential() {
        state.withLock { $0.set(true, for: NewCredential.self) }
    }

    /// Whether the retry being decided resends with a new credential; reading it clears it.
    package func takeRetryWithNewCredential() -> Bool {
        state.withLock { state in
            guard state.value(NewCredential.self) else { return false }
            state.set(false, for: NewCredential.self)
            return true
        }
    }

    private enum NewCredential: RequestContextKey { static let defaultValue = false }

    /// Asks the request to stop: no further attempt, retry or backoff wait starts, a backoff wait
    /// in progress ends at once, an attempt in flight is interrupted if ``makeInterruptible()``
    /// was called, and the request fails with ``NetworkError/cancelled`` (behaviors still get
    /// their `afterFailure`).
    ///
    /// For behaviors that must stop a request from outside its task, such as a background task
    /// that expires.
    public func cancel() {
        if let owner { return owner.cancel() }
        let target = state.withLock { state in
            state.cancelRequested = true
            defer { state.interruptTarget = nil }
            return state.interruptTarget
        }
        target?.interrupt()
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool {
        if let owner { return owner.isCancelled }
        return state.withLock { $0.cancelRequested }
    }

    /// Lets ``cancel()`` interrupt an attempt that is already in flight (its hooks and its
    /// transport call), not only the waits between attempts. Call it from a request-side hook
    /// (`additionalHeaders`, `modify`, `beforeSend`) of a behavior that may cancel; every attempt
    /// then runs in a task of its own (a few microseconds), so requests that never need it don't
    /// pay.
    public func makeInterruptible() {
        if let owner { return owner.makeInterruptible() }
        state.withLock { $0.interruptible = true }
    }

    /// Whether ``makeInterruptible()`` was called. An attempt's view says `false`: the attempts
    /// that run at once are interrupted together, by the request (see ``attemptView(_:)``).
    package var isInterruptible: Bool {
        if owner != nil { return false }
        return state.withLock { $0.interruptible }
    }

    /// ``isCancelled`` and ``isInterruptible`` in one read of the lock.
    package var cancellationState: (cancelled: Bool, interruptible: Bool) {
        if let owner { return (owner.isCancelled, false) }
        return state.withLock { ($0.cancelRequested, $0.interruptible) }
    }

    /// Makes `target` the step that ``cancel()`` ends (`nil` to clear it). If the request was
    /// cancelled already, `target` is ended at once.
    package func setInterruptTarget(_ target: (any ContextInterruptible)?) {
        let cancelled = state.withLock { state -> Bool in
            state.interruptTarget = state.cancelRequested ? nil : target
            return state.cancelRequested
        }
        if cancelled { target?.interrupt() }
    }

    /// Reads or writes the value stored for a key; reads the key's default until one is written.
    /// - Parameter key: The key type.
    @inlinable
    public subscript<Key: RequestContextKey>(key: Key.Type) -> Key.Value {
        get { state.withLock { $0.value(key) } }
        set { state.withLock { $0.set(newValue, for: key) } }
    }

    /// Atomically reads and changes the value for a key.
    /// - Parameters:
    ///   - key: The key type.
    ///   - body: Receives the current value (or the default) to change in place.
    /// - Returns: What `body` returns.
    @inlinable
    public func update<Key: RequestContextKey, Result>(
        _ key: Key.Type, _ body: (inout Key.Value) throws -> Result
    ) rethrows -> Result {
        try state.withLock { state in
            var value = state.value(key)
            let result = try body(&value)
            state.set(value, for: key)
            return result
        }
    }
}

extension RequestContext: CustomReflectable {
    /// A mirror of the request's identity only: behaviors keep tokens and other secrets in the
    /// context's storage, so `dump(context)` shows neither the values nor the original request's
    /// headers.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["requestID": requestID, "attempt": attempt, "request": originalRequest.description],
            displayStyle: .class)
    }
}

/// What a client shares with its requests' contexts: its base origin and its request-ID counter.
/// Made once per client; never shared between clients.
package final class ClientScope: Sendable {
    package let origin: Origin?
    /// Whether ``origin`` is set, read without copying the origin.
    let hasOrigin: Bool
    private let lastRequestID = Locked<UInt64>(0)
    package init(origin: Origin?) {
        self.origin = origin
        self.hasOrigin = origin != nil
    }

    /// The next request identifier of this client.
    func nextRequestID() -> RequestID {
        RequestID(rawValue: lastRequestID.withLock { $0 += 1; return $0 })
    }
}
