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
public struct CombinedRequestBehavior: HeaderAdding, RequestModifying, SendObserving, AttemptIntercepting,
    ResponseValidating, RetryDeciding, SuccessObserving, FailureObserving, TransferProgressObserving
{
    /// The members, flattened, in registration order.
    public let behaviors: [any RequestBehavior]
    /// Which members each hook calls: fixed when the chain is built.
    package let plan: HookPlan
    /// Plans without some members (a request's exclusions by type, in a chain without wrappers),
    /// derived from `plan` once per exclusion set: requests that leave out the same types reuse
    /// one plan instead of filtering every hook's list again. Per chain, never process-wide.
    private let withoutMembers: ExclusionPlans?

    /// Creates a chain, flattening members that are chains themselves.
    /// - Parameter behaviors: The members, outermost first.
    public init(_ behaviors: [any RequestBehavior]) {
        let flat = Self.flatten(behaviors)
        self.behaviors = flat
        self.plan = HookPlan(behaviors: flat)
        self.withoutMembers = ExclusionPlans()
    }

    private init(behaviors: [any RequestBehavior], plan: HookPlan) {
        self.behaviors = behaviors
        self.plan = plan
        self.withoutMembers = nil
    }

    static func flatten(_ behaviors: [any RequestBehavior]) -> [any RequestBehavior] {
        // A metatype comparison, not `is`: a dynamic cast per member costs far more, and
        // `CombinedRequestBehavior` is a struct, so no subclass can hide behind it.
        guard behaviors.contains(where: { type(of: $0) == CombinedRequestBehavior.self }) else { return behaviors }
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
    package var isEmpty: Bool { behaviors.isEmpty }

    /// A chain of this chain's members followed by `other`'s, flattened.
    ///
    /// It extends this chain's plan instead of building a new one.
    /// - Parameter other: Members to append (run after, i.e. inside, these).
    /// - Returns: The longer chain.
    package func appending(_ other: [any RequestBehavior]) -> CombinedRequestBehavior {
        if other.isEmpty { return self }
        let extra = Self.flatten(other)
        return CombinedRequestBehavior(behaviors: behaviors + extra, plan: HookPlan.extending(plan, with: extra))
    }

    /// This chain without the members that any of the exclusions match.
    ///
    /// Like ``appending(_:)``, it derives its plan from this chain's.
    /// - Parameter exclusions: Which members to leave out.
    /// - Returns: The shorter chain.
    package func removing(_ exclusions: [BehaviorExclusion]) -> CombinedRequestBehavior {
        if exclusions.isEmpty { return self }
        let keep = keeping(exclusions)
        return CombinedRequestBehavior(behaviors: behaviors.filter(keep), plan: HookPlan(filtering: plan, keep: keep))
    }

    /// Whether a member stays when `exclusions` are applied: the one rule ``removing(_:)`` and
    /// ``plan(excluding:adding:)`` share. Only members whose type wraps others are looked into.
    private func keeping(_ exclusions: [BehaviorExclusion]) -> (any RequestBehavior) -> Bool {
        let hasWrappers = plan.hasWrappers
        return { behavior in
            let wraps = hasWrappers && HookBits.of(behavior) & HookBits.wraps != 0
            return !exclusions.contains { $0.matches(behavior, mayWrap: wraps) }
        }
    }

    /// The plan for one request that leaves out some of these members and adds its own after
    /// them: this chain's plan, filtered and extended, with no chain built around it.
    /// - Parameters:
    ///   - exclusions: Which members to leave out.
    ///   - extra: The request's own behaviors.
    package func plan(excluding exclusions: [BehaviorExclusion], adding extra: [any RequestBehavior]) -> HookPlan {
        var plan = self.plan
        if !exclusions.isEmpty {
            let base = plan
            let make = { () -> HookPlan in
                let keep = keeping(exclusions)
                // An exclusion that matches no member (a request built for several clients)
                // keeps the plan as it is.
                return behaviors.allSatisfy(keep) ? base : HookPlan(filtering: base, keep: keep)
            }
            // Only a choice that cannot change is kept: exclusions by type, in a chain where no
            // member wraps others. A name is whatever `name` returns now, and a wrapper may wrap
            // something else on the next request, so those are matched on every request.
            if let withoutMembers, exclusions.allSatisfy(\.isByType), !base.hasWrappers {
                plan = withoutMembers.plan(excluding: exclusions, make: make)
            } else {
                plan = make()
            }
        }
        if !extra.isEmpty { plan = HookPlan.extending(plan, with: extra) }  // flattens what it must
        return plan
    }

    /// Merges members' headers first to last; a later member wins on the same name.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        try await plan.runAdditionalHeaders(for: request, context: context)
    }

    /// Runs members' `modify` first to last.
    public func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        try await plan.runModify(&request, context: context)
    }

    /// Runs members' `beforeSend` first to last.
    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        await plan.runBeforeSend(request, context: context)
    }

    /// Runs the members' `intercept`, first outermost, around `next`.
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext)
        async throws -> HTTPResponse
    {
        try await plan.runIntercept(request, context: context, innermost: next)
    }

    /// Runs members' `validate` last to first; the first to throw fails the attempt.
    public func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        try await plan.runValidate(response, context: context)
    }

    /// Asks members first to last; the first `.retry` wins and later members are not asked.
    public func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        await plan.runRetryDecision(after: failure, response: response, context: context)
    }

    /// Runs members' `afterSuccess` last to first.
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        await plan.runAfterSuccess(response, context: context)
    }

    /// Runs members' `afterFailure` last to first.
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        await plan.runAfterFailure(error, context: context)
    }

    /// Tells members that observe progress, first to last.
    public func transferProgressed(_ progress: TransferProgress, context: RequestContext) {
        for member in plan.progressObservers { member._transferProgressed(progress, context: context) }
    }
}

/// A chain's plans without some members, one per set of exclusions by type: built on a
/// request's first use, then shared. Bounded; the set starts over when full.
final class ExclusionPlans: Sendable {
    static let capacity = 16
    private let plans = Locked<[[BehaviorExclusion]: HookPlan]>([:])

    func plan(excluding exclusions: [BehaviorExclusion], make: () -> HookPlan) -> HookPlan {
        if let kept = plans.withLock({ $0[exclusions] }) { return kept }
        let plan = make()
        plans.withLock { plans in
            if plans.count >= Self.capacity { plans = [:] }
            plans[exclusions] = plan
        }
        return plan
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

    /// Whether this selects by type, a choice a member's value cannot change.
    var isByType: Bool {
        if case .type = selector { true } else { false }
    }

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

    /// Whether the exclusion selects this behavior, or one that it wraps (see
    /// ``WrappingRequestBehavior``), however deep.
    /// - Parameter behavior: A behavior.
    public func matches(_ behavior: any RequestBehavior) -> Bool {
        matches(behavior, mayWrap: true)
    }

    /// ``matches(_:)``, told whether the behavior's type may wrap others (`false` skips the cast).
    func matches(_ behavior: any RequestBehavior, mayWrap: Bool) -> Bool {
        let direct =
            switch selector {
            case .type(let id): ObjectIdentifier(Swift.type(of: behavior)) == id
            case .name(let name): behavior.name == name
            }
        if direct { return true }
        guard mayWrap else { return false }
        return behavior._wrappedBehaviors.contains { matches($0) }
    }
}

/// A behavior that wraps others (runs them only for some requests, times them, renames them…).
///
/// Conform your wrapper so that a request's exclusion reaches what it wraps:
/// `.excluding(.type(AuthTokenBehavior.self))` then also leaves out a wrapper around an
/// `AuthTokenBehavior`, as it would leave out the bare behavior.
///
/// ```swift
/// struct OnlyForHost: WrappingRequestBehavior, HeaderAdding {
///     let host: String
///     let inner: CombinedRequestBehavior  // calls whichever hooks the wrapped behaviors declare
///     init(host: String, _ inner: any RequestBehavior) {
///         self.host = host
///         self.inner = CombinedRequestBehavior([inner])
///     }
///     var wrappedBehaviors: [any RequestBehavior] { inner.behaviors }
///
///     func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
///         request.url.host == host ? try await inner.additionalHeaders(for: request, context: context) : [:]
///     }
/// }
/// ```
///
/// A wrapper declares the hooks it forwards, like any behavior; ``CombinedRequestBehavior``
/// declares every hook and runs each over the members that declare it.
public protocol WrappingRequestBehavior: RequestBehavior {
    /// The behaviors this one wraps; exclusions match them as well as the wrapper.
    var wrappedBehaviors: [any RequestBehavior] { get }
}

extension WrappingRequestBehavior {
    /// This protocol's bit.
    @inlinable public static var _wrappingBit: UInt16 { 512 }
    /// ``wrappedBehaviors``.
    @inlinable public var _wrappedBehaviors: [any RequestBehavior] { wrappedBehaviors }
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
