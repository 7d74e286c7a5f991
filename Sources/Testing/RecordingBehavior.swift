public import ConveyorPipeline

/// A spy behavior: records every hook call into a shared ``HookRecorder`` so a test can assert
/// the exact sequence across behaviors, attempts and requests.
///
/// ```swift
/// let recorder = HookRecorder()
/// let client = NetworkClient(baseURL: api, transport: mock) {
///     RecordingBehavior("outer", recorder: recorder)
///     RecordingBehavior("inner", recorder: recorder)
/// }
/// _ = try await client.send(Request<Void>(path: "/ping"))
/// #expect(recorder.hooks(of: "outer") == [.additionalHeaders, .modify, .beforeSend, .validate, .afterSuccess])
/// ```
public struct RecordingBehavior: HeaderAdding, RequestModifying, SendObserving, ResponseValidating, RetryDeciding, SuccessObserving, FailureObserving {
    /// The label events are recorded under; also the behavior's ``name``.
    public let label: String
    /// Where events go.
    public let recorder: HookRecorder
    /// Headers returned from `additionalHeaders`.
    package var headers: HTTPHeaders
    /// Hooks that throw ``Failure`` (after recording the call).
    package var failing: Set<RequestHook>
    /// Decides retries; never retries by default.
    package var retry: @Sendable (NetworkError, RequestContext) -> RetryDecision

    /// Creates a recording behavior.
    /// - Parameters:
    ///   - label: The label and name.
    ///   - recorder: Where events go.
    ///   - headers: Headers to add to every attempt.
    ///   - failing: Hooks that throw.
    ///   - retry: The retry decision for failed attempts.
    public init(
        _ label: String, recorder: HookRecorder, headers: HTTPHeaders = [:], failing: Set<RequestHook> = [],
        retry: @escaping @Sendable (NetworkError, RequestContext) -> RetryDecision = { _, _ in .doNotRetry }
    ) {
        self.label = label
        self.recorder = recorder
        self.headers = headers
        self.failing = failing
        self.retry = retry
    }

    /// The thrown error: names the label and the hook.
    public struct Failure: Error, Hashable, SafelyDescribable {
        /// The behavior's label.
        public let label: String
        /// The hook that threw.
        public let hook: RequestHook
        /// Creates a failure.
        /// - Parameters:
        ///   - label: The behavior's label.
        ///   - hook: The hook.
        package init(label: String, hook: RequestHook) {
            self.label = label
            self.hook = hook
        }
        /// `label failed in hook`.
        public var description: String { "\(label) failed in \(hook)" }
    }

    /// The label.
    public var name: String { label }

    private func record(_ hook: RequestHook, _ context: RequestContext, outcome: HookRecorder.Outcome? = nil) throws {
        recorder.append(
            HookRecorder.Event(
                label: label, hook: hook, requestID: context.requestID, attempt: context.attempt, outcome: outcome))
        if failing.contains(hook) { throw Failure(label: label, hook: hook) }
    }

    /// Records and returns ``headers``.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        try record(.additionalHeaders, context)
        return headers
    }
    /// Records.
    public func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        try record(.modify, context)
    }
    /// Records.
    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        try? record(.beforeSend, context)
    }
    /// Records.
    public func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        try record(.validate, context)
    }
    /// Records and returns ``retry``'s answer.
    public func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        try? record(.retryDecision, context)
        return retry(failure, context)
    }
    /// Records with the status.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        try? record(.afterSuccess, context, outcome: .success(status: response.status))
    }
    /// Records with the error's description.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        try? record(.afterFailure, context, outcome: .failure(error.description))
    }
}

/// A thread-safe log of hook calls, shared by ``RecordingBehavior``s.
public final class HookRecorder: Sendable {
    /// How a request ended, as seen by `afterSuccess` / `afterFailure`.
    public enum Outcome: Hashable, Sendable {
        /// `afterSuccess` with this status.
        case success(status: Int)
        /// `afterFailure` with this error description.
        case failure(String)
    }

    /// One hook call.
    public struct Event: Hashable, Sendable, CustomStringConvertible {
        /// The recording behavior's label.
        public let label: String
        /// The hook.
        public let hook: RequestHook
        /// The request.
        public let requestID: RequestID
        /// The attempt at the time of the call.
        public let attempt: Int
        /// For `afterSuccess`/`afterFailure`, the outcome.
        public let outcome: Outcome?

        /// Creates an event.
        package init(label: String, hook: RequestHook, requestID: RequestID, attempt: Int, outcome: Outcome? = nil) {
            self.label = label
            self.hook = hook
            self.requestID = requestID
            self.attempt = attempt
            self.outcome = outcome
        }

        /// `label.hook#attempt`.
        public var description: String { "\(label).\(hook)#\(attempt)" }
    }

    private let log = Locked<[Event]>([])

    /// Creates an empty recorder.
    public init() {}

    /// Every event in order.
    public var events: [Event] { log.withLock { $0 } }

    /// Appends an event.
    /// - Parameter event: The event.
    package func append(_ event: Event) { log.withLock { $0.append(event) } }

    /// The hooks one label saw, in order.
    /// - Parameter label: The label.
    public func hooks(of label: String) -> [RequestHook] { events.filter { $0.label == label }.map(\.hook) }

    /// `label.hook` for every event, in order: handy for asserting cross-behavior order.
    public var trace: [String] { events.map { "\($0.label).\($0.hook)" } }

    /// Forgets all events.
    public func reset() { log.withLock { $0.removeAll() } }
}
