import Foundation

/// Which hooks each behavior type leaves at the protocol's no-op default.
///
/// A type's implementation of a hook is fixed when it is compiled: if the default ran once for a
/// type, it runs for every value of that type. The defaults in `RequestBehavior`'s extension
/// record themselves here the first time they run, and chains stop calling them from then on.
/// Skipping a proven no-op changes nothing a behavior can observe, and saves an async call per
/// hook per behavior on every request.
package enum DefaultHooks {
    private static let state = Locked<State>(State())

    fileprivate struct State {
        var version = 0
        var masks: [ObjectIdentifier: UInt8] = [:]
        /// Learned once per type (see ``Conformances``); not part of `version`.
        var conformances: [ObjectIdentifier: Conformances] = [:]
    }

    /// What a behavior type conforms to, beyond `RequestBehavior`, that a request's plan asks
    /// about: learned once per type. A dynamic cast to a protocol the type does not conform to
    /// costs about 2,500 instructions; a per-request behavior or an exclusion asked it on every
    /// request (BENCHMARKS.md, round two).
    struct Conformances: OptionSet {
        let rawValue: UInt8
        static let observesProgress = Conformances(rawValue: 1)
        static let wraps = Conformances(rawValue: 2)

        init(rawValue: UInt8) { self.rawValue = rawValue }

        init(of behavior: any RequestBehavior) {
            var found: Conformances = []
            if behavior is any TransferProgressObserving { found.insert(.observesProgress) }
            if behavior is any WrappingRequestBehavior { found.insert(.wraps) }
            self = found
        }
    }

    /// Every hook's bit.
    static let allHooks: UInt8 = 255

    /// `false` when the environment has `CONVEYOR_SKIP_DEFAULT_HOOKS=0`: nothing is learned, so
    /// every chain calls every hook of every member. A diagnostic switch, read once: it measures
    /// what skipping saves (BENCHMARKS.md, round two) and rules it out when a hook seems not to run.
    static let learns = ProcessInfo.processInfo.environment["CONVEYOR_SKIP_DEFAULT_HOOKS"] != "0"

    /// Records that `type` uses the default for `hook`.
    package static func record(_ type: Any.Type, _ hook: RequestHook) {
        guard learns else { return }
        let bit = hook.bit
        let usesNoHook = state.withLock { state -> Bool in
            let id = ObjectIdentifier(type)
            let mask = state.masks[id, default: 0]
            guard mask & bit == 0 else { return false }
            state.masks[id] = mask | bit
            state.version += 1
            return mask | bit == allHooks  // true once per type: the moment the last bit is set
        }
        if usesNoHook { warnImplementsNoHook(type) }
    }

    /// Whether `type` has been seen running the default of every hook: it implements none.
    package static func usesDefaultForEveryHook(_ type: Any.Type) -> Bool {
        state.withLock { $0.masks[ObjectIdentifier(type), default: 0] == allHooks }
    }

    /// The explanation given for a behavior type that implements no hook.
    package static func noHookMessage(_ type: Any.Type) -> String {
        "behavior \(type) implements none of RequestBehavior's hooks: each one ran the protocol's no-op "
            + "default. A method whose signature differs from the hook's (a missing `async`, `throws` or "
            + "`inout`, another label or parameter type) is a new method that the pipeline never calls."
    }

    /// The types warned about, in order (debug builds).
    package static var warnedTypes: [String] { warned.withLock { $0 } }
    private static let warned = Locked<[String]>([])

    /// In debug builds, prints once per behavior type that implements no hook: a hook written
    /// with a slightly wrong signature compiles silently as a new method.
    private static func warnImplementsNoHook(_ type: Any.Type) {
        #if DEBUG
            warned.withLock { $0.append(String(describing: type)) }
            FileHandle.standardError.write(Data("Conveyor warning: \(noHookMessage(type))\n".utf8))
        #endif
    }

    /// What each behavior's type conforms to, in order; a type seen for the first time is asked
    /// once (conformance belongs to the type, so every value of it answers the same).
    static func conformances(of behaviors: [any RequestBehavior]) -> [Conformances] {
        state.withLock { state in behaviors.map { state.learnConformances(of: $0) } }
    }

    /// The current mask of each behavior's type (hooks it leaves at the default) and what it
    /// conforms to, in order: one lock and one array for a request's own behaviors.
    static func masksAndConformances(
        of behaviors: [any RequestBehavior]
    ) -> [(mask: UInt8, conformances: Conformances)] {
        state.withLock { state in
            behaviors.map { (state.masks[ObjectIdentifier(type(of: $0)), default: 0], state.learnConformances(of: $0)) }
        }
    }

    /// The current version and the masks, if they changed since `version`.
    static func changes(since version: Int) -> (version: Int, masks: [ObjectIdentifier: UInt8])? {
        state.withLock { $0.version == version ? nil : ($0.version, $0.masks) }
    }
}

extension DefaultHooks.State {
    /// What `behavior`'s type conforms to, asked once per type.
    fileprivate mutating func learnConformances(of behavior: any RequestBehavior) -> DefaultHooks.Conformances {
        let id = ObjectIdentifier(type(of: behavior))
        if let known = conformances[id] { return known }
        let found = DefaultHooks.Conformances(of: behavior)
        conformances[id] = found
        return found
    }
}

extension RequestHook {
    var bit: UInt8 {
        switch self {
        case .additionalHeaders: 1
        case .modify: 2
        case .beforeSend: 4
        case .validate: 8
        case .retryDecision: 16
        case .afterSuccess: 32
        case .afterFailure: 64
        case .intercept: 128
        }
    }
}

/// For one chain: which members to call for each hook, in the order the contract requires.
/// Immutable; a chain swaps in a new plan when ``DefaultHooks`` learns something.
package final class HookPlan: Sendable {
    let version: Int
    let additionalHeaders: [any RequestBehavior]
    let modify: [any RequestBehavior]
    let beforeSend: [any RequestBehavior]
    /// First to last: the first is outermost, nearest the caller; the last is next to the transport.
    let intercept: [any RequestBehavior]
    /// Last to first.
    let validate: [any RequestBehavior]
    let retryDecision: [any RequestBehavior]
    /// Last to first.
    let afterSuccess: [any RequestBehavior]
    /// Last to first.
    let afterFailure: [any RequestBehavior]
    /// Members told about upload and download progress, first to last.
    package let progressObservers: [any TransferProgressObserving]

    /// A client's plan extended by a request's own behaviors (which run inside the client's).
    /// Lists the extra behaviors don't take part in are shared with `base`, not copied.
    init(extending base: HookPlan, with extra: [any RequestBehavior]) {
        // One registry read, and one mask per extra behavior (not one lookup per hook).
        let facts = DefaultHooks.masksAndConformances(of: extra)
        func forward(_ list: [any RequestBehavior], _ hook: RequestHook) -> [any RequestBehavior] {
            var result = list  // shared with `base` unless an extra behavior takes part
            for index in extra.indices where facts[index].mask & hook.bit == 0 { result.append(extra[index]) }
            return result
        }
        func backward(_ list: [any RequestBehavior], _ hook: RequestHook) -> [any RequestBehavior] {
            guard facts.contains(where: { $0.mask & hook.bit == 0 }) else { return list }
            var result: [any RequestBehavior] = []
            result.reserveCapacity(list.count + extra.count)
            for index in extra.indices.reversed() where facts[index].mask & hook.bit == 0 {
                result.append(extra[index])
            }
            result.append(contentsOf: list)
            return result
        }
        version = base.version
        additionalHeaders = forward(base.additionalHeaders, .additionalHeaders)
        modify = forward(base.modify, .modify)
        beforeSend = forward(base.beforeSend, .beforeSend)
        intercept = forward(base.intercept, .intercept)
        validate = backward(base.validate, .validate)
        retryDecision = forward(base.retryDecision, .retryDecision)
        afterSuccess = backward(base.afterSuccess, .afterSuccess)
        afterFailure = backward(base.afterFailure, .afterFailure)
        if facts.contains(where: { $0.conformances.contains(.observesProgress) }) {
            progressObservers = base.progressObservers + extra.compactMap { $0 as? any TransferProgressObserving }
        } else {
            progressObservers = base.progressObservers
        }
    }

    /// A client's plan without the members `keep` rejects (a request's opt-outs); order is kept.
    init(filtering base: HookPlan, keep: (any RequestBehavior) -> Bool) {
        version = base.version
        additionalHeaders = base.additionalHeaders.filter(keep)
        modify = base.modify.filter(keep)
        beforeSend = base.beforeSend.filter(keep)
        intercept = base.intercept.filter(keep)
        validate = base.validate.filter(keep)
        retryDecision = base.retryDecision.filter(keep)
        afterSuccess = base.afterSuccess.filter(keep)
        afterFailure = base.afterFailure.filter(keep)
        progressObservers = base.progressObservers.filter(keep)
    }

    init(behaviors: [any RequestBehavior], version: Int, masks: [ObjectIdentifier: UInt8]) {
        func members(_ hook: RequestHook) -> [any RequestBehavior] {
            behaviors.filter { masks[ObjectIdentifier(type(of: $0)), default: 0] & hook.bit == 0 }
        }
        self.version = version
        additionalHeaders = members(.additionalHeaders)
        modify = members(.modify)
        beforeSend = members(.beforeSend)
        intercept = members(.intercept)
        validate = members(.validate).reversed()
        retryDecision = members(.retryDecision)
        afterSuccess = members(.afterSuccess).reversed()
        afterFailure = members(.afterFailure).reversed()
        progressObservers = behaviors.compactMap { $0 as? any TransferProgressObserving }
    }
}

/// Where a chain gets its plan: a client's long-lived chain refreshes its plan as defaults are
/// learned; a one-request chain (client behaviors plus the request's own) uses a fixed plan.
enum HookPlanSource: Sendable {
    case cache(HookPlanCache)
    case fixed(HookPlan)

    func current() -> HookPlan {
        switch self {
        case .cache(let cache): cache.current()
        case .fixed(let plan): plan
        }
    }
}

/// Holds a chain's current plan and refreshes it when new defaults have been learned: each
/// request compares the plan's registry version with the registry's (one lock, no copy).
///
/// Until round two a plan "settled" after 64 unchanged requests and stopped asking the registry:
/// it saved about 140 instructions per request in memory, nothing measurable end to end, and a
/// default first reached after settling was still called. Removed (Docs/Decisions.md).
final class HookPlanCache: Sendable {
    /// Exclusion sets whose plans are kept (per chain; the set starts over when full).
    static let exclusionCapacity = 16
    private let behaviors: [any RequestBehavior]
    private let state: Locked<HookPlan>
    /// Plans without some members (a request's exclusions by type, in a chain without wrappers),
    /// derived from `base`: requests that leave out the same types reuse one plan instead of
    /// filtering every hook's list again (about 22,000 instructions for ten members,
    /// BENCHMARKS.md round two). Dropped whenever the chain's plan changes.
    private let withoutMembers = Locked<(base: HookPlan?, plans: [[BehaviorExclusion]: HookPlan])>((nil, [:]))

    init(behaviors: [any RequestBehavior]) {
        self.behaviors = behaviors
        let (version, masks) = DefaultHooks.changes(since: -1) ?? (0, [:])
        state = Locked(HookPlan(behaviors: behaviors, version: version, masks: masks))
    }

    /// The plan to use for one request.
    func current() -> HookPlan {
        let plan = state.withLock { $0 }
        guard let (version, masks) = DefaultHooks.changes(since: plan.version) else { return plan }
        let fresh = HookPlan(behaviors: behaviors, version: version, masks: masks)
        state.withLock { current in
            if current.version < version { current = fresh }
        }
        return fresh
    }

    /// `base` (this chain's current plan) without the members `exclusions` select: the plan
    /// `make` builds, kept for the next request with the same exclusions while `base` is current.
    func plan(
        _ base: HookPlan, excluding exclusions: [BehaviorExclusion], make: () -> HookPlan
    ) -> HookPlan {
        if let kept = withoutMembers.withLock({ $0.base === base ? $0.plans[exclusions] : nil }) { return kept }
        let plan = make()
        withoutMembers.withLock { cached in
            if cached.base !== base || cached.plans.count >= Self.exclusionCapacity { cached = (base, [:]) }
            cached.plans[exclusions] = plan
        }
        return plan
    }
}
