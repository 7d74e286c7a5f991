/// Which hooks each behavior type leaves at the protocol's no-op default.
///
/// A type's implementation of a hook is fixed when it is compiled: if the default ran once for a
/// type, it runs for every value of that type. The defaults in `RequestBehavior`'s extension
/// record themselves here the first time they run, and chains stop calling them from then on.
/// Skipping a proven no-op changes nothing a behavior can observe, and saves an async call per
/// hook per behavior on every request.
package enum DefaultHooks {
    private static let state = Locked<(version: Int, masks: [ObjectIdentifier: UInt8])>((0, [:]))

    /// Records that `type` uses the default for `hook`.
    package static func record(_ type: Any.Type, _ hook: RequestHook) {
        let bit = hook.bit
        state.withLock { state in
            let id = ObjectIdentifier(type)
            let mask = state.masks[id, default: 0]
            guard mask & bit == 0 else { return }
            state.masks[id] = mask | bit
            state.version += 1
        }
    }

    /// The current version and the masks, if they changed since `version`.
    static func changes(since version: Int) -> (version: Int, masks: [ObjectIdentifier: UInt8])? {
        state.withLock { $0.version == version ? nil : $0 }
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
    /// Last to first.
    let validate: [any RequestBehavior]
    let retryDecision: [any RequestBehavior]
    /// Last to first.
    let afterSuccess: [any RequestBehavior]
    /// Last to first.
    let afterFailure: [any RequestBehavior]

    init(behaviors: [any RequestBehavior], version: Int, masks: [ObjectIdentifier: UInt8]) {
        func members(_ hook: RequestHook) -> [any RequestBehavior] {
            behaviors.filter { masks[ObjectIdentifier(type(of: $0)), default: 0] & hook.bit == 0 }
        }
        self.version = version
        additionalHeaders = members(.additionalHeaders)
        modify = members(.modify)
        beforeSend = members(.beforeSend)
        validate = members(.validate).reversed()
        retryDecision = members(.retryDecision)
        afterSuccess = members(.afterSuccess).reversed()
        afterFailure = members(.afterFailure).reversed()
    }
}

/// Holds a chain's current plan and refreshes it when new defaults have been learned.
package final class HookPlanCache: Sendable {
    private let behaviors: [any RequestBehavior]
    private let plan: Locked<HookPlan>

    init(behaviors: [any RequestBehavior]) {
        self.behaviors = behaviors
        let (version, masks) = DefaultHooks.changes(since: -1) ?? (0, [:])
        plan = Locked(HookPlan(behaviors: behaviors, version: version, masks: masks))
    }

    /// The plan to use for one request.
    package func current() -> HookPlan {
        let plan = self.plan.withLock { $0 }
        guard let (version, masks) = DefaultHooks.changes(since: plan.version) else { return plan }
        let fresh = HookPlan(behaviors: behaviors, version: version, masks: masks)
        self.plan.withLock { $0 = fresh }
        return fresh
    }
}
