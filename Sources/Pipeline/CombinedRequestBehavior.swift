/// A chain of behaviors that is itself a behavior: it runs each hook over its members in the
/// contract's order (request side first to last, response side last to first).
///
/// Nested chains are flattened when the chain is built, so a chain costs one array walk per
/// hook however it was assembled. Build it with the result builder:
///
/// ```swift
/// let chain = CombinedRequestBehavior {
///     HeadersBehavior(["User-Agent": "MyApp/1.0"])
///     if debug { LoggingBehavior(sink: PrintLogSink()) }
/// }
/// ```
///
/// A hook that throws fails with ``NetworkError/behaviorFailed(behavior:hook:underlying:)``
/// naming the member that threw; a `NetworkError` a member throws passes through unchanged.
public struct CombinedRequestBehavior: RequestBehavior {
    /// The members, flattened, in registration order.
    public let behaviors: [any RequestBehavior]
    /// Which members each hook calls; members' no-op default hooks are left out once learned.
    let planSource: HookPlanSource

    /// Creates a chain, flattening members that are chains themselves.
    /// - Parameter behaviors: The members, outermost first.
    public init(_ behaviors: [any RequestBehavior]) {
        let flat = Self.flatten(behaviors)
        self.behaviors = flat
        self.planSource = .cache(HookPlanCache(behaviors: flat))
    }

    private init(behaviors: [any RequestBehavior], plan: HookPlan) {
        self.behaviors = behaviors
        self.planSource = .fixed(plan)
    }

    private static func flatten(_ behaviors: [any RequestBehavior]) -> [any RequestBehavior] {
        guard behaviors.contains(where: { $0 is CombinedRequestBehavior }) else { return behaviors }
        var flat: [any RequestBehavior] = []
        flat.reserveCapacity(behaviors.count)
        for behavior in behaviors {
            if let chain = behavior as? CombinedRequestBehavior {
                flat.append(contentsOf: chain.behaviors)
            } else {
                flat.append(behavior)
            }
        }
        return flat
    }

    /// Creates a chain from a result-builder block.
    /// - Parameter build: The members, outermost first.
    public init(@RequestBehaviorBuilder _ build: () -> [any RequestBehavior]) {
        self.init(build())
    }

    /// `Combined[A, B, …]`.
    public var name: String { "Combined[\(behaviors.map(\.name).joined(separator: ", "))]" }

    /// Whether the chain has no members.
    public var isEmpty: Bool { behaviors.isEmpty }

    /// A chain of this chain's members followed by `other`'s, flattened.
    ///
    /// Meant for one request's chain: it extends this chain's current plan instead of building
    /// a new one, so a request's own behaviors cost little more than the client's.
    /// - Parameter other: Members to append (run after, i.e. inside, these).
    /// - Returns: The longer chain.
    public func appending(_ other: [any RequestBehavior]) -> CombinedRequestBehavior {
        if other.isEmpty { return self }
        let extra = Self.flatten(other)
        let plan = HookPlan(extending: plan(), with: extra, masks: DefaultHooks.masks())
        return CombinedRequestBehavior(behaviors: behaviors + extra, plan: plan)
    }

    /// This chain without the members that any of the exclusions match.
    /// - Parameter exclusions: Which members to leave out.
    /// - Returns: The shorter chain.
    /// Like ``appending(_:)``, it derives a one-request plan from this chain's current one instead
    /// of building a new plan.
    public func removing(_ exclusions: [BehaviorExclusion]) -> CombinedRequestBehavior {
        if exclusions.isEmpty { return self }
        let keep: (any RequestBehavior) -> Bool = { behavior in !exclusions.contains { $0.matches(behavior) } }
        return CombinedRequestBehavior(
            behaviors: behaviors.filter(keep), plan: HookPlan(filtering: plan(), keep: keep))
    }

    /// The members to call for each hook, for one request.
    package func plan() -> HookPlan { planSource.current() }

    /// Merges members' headers first to last; a later member wins on the same name.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        try await additionalHeaders(plan(), for: request, context: context)
    }

    package func additionalHeaders(_ plan: HookPlan, for request: HTTPRequest, context: RequestContext)
        async throws(NetworkError) -> HTTPHeaders
    {
        var merged = HTTPHeaders()
        for behavior in plan.additionalHeaders {
            let headers: HTTPHeaders
            do {
                headers = try await behavior.additionalHeaders(for: request, context: context)
            } catch {
                throw NetworkError(hookError: error, behavior: behavior, hook: .additionalHeaders)
            }
            if headers.isEmpty { continue }
            if merged.isEmpty { merged = headers } else { merged.merge(headers) }
        }
        return merged
    }

    /// Runs members' `modify` first to last.
    public func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        try await modify(plan(), &request, context: context)
    }

    package func modify(_ plan: HookPlan, _ request: inout HTTPRequest, context: RequestContext)
        async throws(NetworkError)
    {
        for behavior in plan.modify {
            do {
                try await behavior.modify(&request, context: context)
            } catch {
                throw NetworkError(hookError: error, behavior: behavior, hook: .modify)
            }
        }
    }

    /// Runs members' `beforeSend` first to last.
    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        await beforeSend(plan(), request, context: context)
    }

    package func beforeSend(_ plan: HookPlan, _ request: HTTPRequest, context: RequestContext) async {
        for behavior in plan.beforeSend { await behavior.beforeSend(request, context: context) }
    }

    /// Runs members' `validate` last to first; the first to throw fails the attempt.
    public func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        try await validate(plan(), response, context: context)
    }

    package func validate(_ plan: HookPlan, _ response: HTTPResponse, context: RequestContext)
        async throws(NetworkError)
    {
        for behavior in plan.validate {
            do {
                try await behavior.validate(response, context: context)
            } catch {
                throw NetworkError(hookError: error, behavior: behavior, hook: .validate)
            }
        }
    }

    /// Asks members first to last; the first `.retry` wins and later members are not asked.
    public func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        await retryDecision(plan(), after: failure, response: response, context: context)
    }

    package func retryDecision(
        _ plan: HookPlan, after failure: NetworkError, response: HTTPResponse?, context: RequestContext
    ) async -> RetryDecision {
        for behavior in plan.retryDecision {
            let decision = await behavior.retryDecision(after: failure, response: response, context: context)
            if case .retry = decision { return decision }
        }
        return .doNotRetry
    }

    /// Runs members' `afterSuccess` last to first.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        await afterSuccess(plan(), response, context: context)
    }

    package func afterSuccess(_ plan: HookPlan, _ response: HTTPResponse, context: RequestContext) async {
        for behavior in plan.afterSuccess { await behavior.afterSuccess(response, context: context) }
    }

    /// Runs members' `afterFailure` last to first.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        await afterFailure(plan(), error, context: context)
    }

    package func afterFailure(_ plan: HookPlan, _ error: NetworkError, context: RequestContext) async {
        for behavior in plan.afterFailure { await behavior.afterFailure(error, context: context) }
    }
}

/// Selects client behaviors that one request leaves out (for example, a login call without
/// the auth header).
///
/// ```swift
/// let login = Request<Session>(.post, "/login", body: .json(credentials))
///     .excluding(.type(AuthTokenBehavior.self))
/// ```
public struct BehaviorExclusion: Sendable, Hashable {
    enum Selector: Hashable {
        case type(ObjectIdentifier)
        case name(String)
    }

    let selector: Selector

    /// Leaves out every behavior of this type.
    /// - Parameter type: The behavior type.
    public static func type(_ type: any RequestBehavior.Type) -> BehaviorExclusion {
        BehaviorExclusion(selector: .type(ObjectIdentifier(type)))
    }

    /// Leaves out every behavior whose ``RequestBehavior/name`` is this.
    /// - Parameter name: The behavior name.
    public static func named(_ name: String) -> BehaviorExclusion {
        BehaviorExclusion(selector: .name(name))
    }

    /// Whether the exclusion selects this behavior.
    /// - Parameter behavior: A behavior.
    public func matches(_ behavior: any RequestBehavior) -> Bool {
        switch selector {
        case .type(let id): ObjectIdentifier(Swift.type(of: behavior)) == id
        case .name(let name): behavior.name == name
        }
    }
}

extension NetworkError {
    /// Maps an error a hook threw: `NetworkError` passes through, cancellation becomes
    /// ``cancelled``, anything else becomes ``behaviorFailed(behavior:hook:underlying:)``.
    package init(hookError error: any Error, behavior: any RequestBehavior, hook: RequestHook) {
        switch error {
        case let error as NetworkError: self = error
        case is CancellationError: self = .cancelled
        default: self = .behaviorFailed(behavior: behavior.name, hook: hook, underlying: error)
        }
    }
}
