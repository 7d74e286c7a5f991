/// The bits of ``RequestBehavior/_declaredHooks``: which hook protocols a behavior's type
/// conforms to. Each protocol's extension supplies its own bit, so a type's set is fixed when
/// it is compiled and read with one call, with no dynamic cast.
package enum HookBits {
    package static let additionalHeaders: UInt16 = 1
    package static let modify: UInt16 = 2
    package static let beforeSend: UInt16 = 4
    package static let intercept: UInt16 = 8
    package static let validate: UInt16 = 16
    package static let retryDecision: UInt16 = 32
    package static let afterSuccess: UInt16 = 64
    package static let afterFailure: UInt16 = 128
    package static let transferProgress: UInt16 = 256
    package static let wraps: UInt16 = 512
    /// A ``RequestHedging`` member: the engine hedges the chain's requests by its policy.
    package static let hedges: UInt16 = 1024
    /// An ``AttemptGating`` member: it admits each exchange with the transport. A gate also
    /// declares ``intercept`` (its public `intercept` does the same work around `next`), which the
    /// plan uses only for a member that is not itself a gate (a wrapper around one).
    package static let gates: UInt16 = 2048

    /// The hooks `behavior`'s type declares.
    @inline(__always)
    package static func of(_ behavior: any RequestBehavior) -> UInt16 {
        type(of: behavior)._declaredHooks
    }
}

extension RequestHook {
    /// This hook's bit in ``RequestBehavior/_declaredHooks``.
    package var bit: UInt16 {
        switch self {
        case .additionalHeaders: HookBits.additionalHeaders
        case .modify: HookBits.modify
        case .beforeSend: HookBits.beforeSend
        case .intercept: HookBits.intercept
        case .validate: HookBits.validate
        case .retryDecision: HookBits.retryDecision
        case .afterSuccess: HookBits.afterSuccess
        case .afterFailure: HookBits.afterFailure
        }
    }
}

/// For one chain: which members to call for each hook, in the order the contract requires.
///
/// Built when the chain is built, from the hook protocols each member's type conforms to
/// (``RequestBehavior/_declaredHooks``), and never changed: what runs is known before the first
/// request, and nothing is learned or locked while requests run.
package final class HookPlan: Sendable {
    let additionalHeaders: [any RequestBehavior]
    let modify: [any RequestBehavior]
    let beforeSend: [any RequestBehavior]
    /// First to last: the first is outermost, nearest the caller; the last is nearest the gates.
    let intercept: [any RequestBehavior]
    /// First to last, next to the transport, inside every `intercept` member.
    let gates: [any Gate]
    /// Whether an attempt goes straight to the transport: no `intercept` member and no gate.
    let sendsDirectly: Bool
    /// Last to first.
    let validate: [any RequestBehavior]
    let retryDecision: [any RequestBehavior]
    /// Last to first.
    let afterSuccess: [any RequestBehavior]
    /// Last to first.
    let afterFailure: [any RequestBehavior]
    /// Members told about upload and download progress, first to last.
    package let progressObservers: [any RequestBehavior]
    /// Whether a member wraps others (``WrappingRequestBehavior``).
    let hasWrappers: Bool
    /// The member that hedges the chain's requests (the last one, if several): found once, and
    /// boxed, so that a chain without one pays a pointer test per attempt (testing an optional
    /// existential copied it: +800 instructions per request, measured) and a plan stays small.
    let hedging: Hedging?

    /// A gate of the chain, in a box of its own type: the engine calls it through a class
    /// reference, and the box calls the member in place. (Called as an existential value, the
    /// member was copied out and destroyed for every call: about 200 instructions a request.)
    protocol Gate: AnyObject, Sendable {
        /// The behavior, for a request's opt-outs.
        var member: any AttemptGating { get }
        func admit(_ request: HTTPRequest, context: RequestContext) throws(NetworkError) -> GatePass
        func waitForTurn(_ pass: GatePass, context: RequestContext) async throws(NetworkError) -> GatePass
        func release(_ pass: GatePass, answered response: HTTPResponse, context: RequestContext)
        func release(_ pass: GatePass, failed failure: NetworkError, context: RequestContext)
    }

    /// ``Gate`` for a member of type `Member`.
    final class GateBox<Member: AttemptGating>: Gate {
        let gate: Member
        init(_ gate: Member) { self.gate = gate }
        var member: any AttemptGating { gate }
        func admit(_ request: HTTPRequest, context: RequestContext) throws(NetworkError) -> GatePass {
            try gate.admit(request, context: context)
        }
        func waitForTurn(_ pass: GatePass, context: RequestContext) async throws(NetworkError) -> GatePass {
            try await gate.waitForTurn(pass, context: context)
        }
        func release(_ pass: GatePass, answered response: HTTPResponse, context: RequestContext) {
            gate.release(pass, answered: response, context: context)
        }
        func release(_ pass: GatePass, failed failure: NetworkError, context: RequestContext) {
            gate.release(pass, failed: failure, context: context)
        }
    }

    /// `gate` in a box of its own type.
    static func boxed<Member: AttemptGating>(_ gate: Member) -> any Gate { GateBox(gate) }

    /// Whether the chain hedges its requests.
    var hedges: Bool { hedging != nil }

    /// A chain's hedging member, in a box.
    final class Hedging: Sendable {
        let member: any RequestHedging
        init(_ member: any RequestHedging) { self.member = member }
    }

    /// The plan of `behaviors`, in registration order.
    init(behaviors: [any RequestBehavior]) {
        let bits = behaviors.map(HookBits.of)
        func members(_ bit: UInt16) -> [any RequestBehavior] {
            var list: [any RequestBehavior] = []
            for index in behaviors.indices where bits[index] & bit != 0 { list.append(behaviors[index]) }
            return list
        }
        additionalHeaders = members(HookBits.additionalHeaders)
        modify = members(HookBits.modify)
        beforeSend = members(HookBits.beforeSend)
        (intercept, gates) = Self.interceptorsAndGates(behaviors, bits: bits)
        sendsDirectly = intercept.isEmpty && gates.isEmpty
        validate = members(HookBits.validate).reversed()
        retryDecision = members(HookBits.retryDecision)
        afterSuccess = members(HookBits.afterSuccess).reversed()
        afterFailure = members(HookBits.afterFailure).reversed()
        progressObservers = members(HookBits.transferProgress)
        hasWrappers = bits.contains { $0 & HookBits.wraps != 0 }
        hedging = Self.lastHedger(in: behaviors, bits: bits)
    }

    /// The members that intercept and the gates, first to last. A member that declares
    /// ``HookBits/gates`` and is a gate is a gate only; one that declares it without being one (a
    /// wrapper that forwards every hook) intercepts.
    private static func interceptorsAndGates(_ behaviors: [any RequestBehavior], bits: [UInt16])
        -> ([any RequestBehavior], [any Gate])
    {
        var interceptors: [any RequestBehavior] = []
        var gates: [any Gate] = []
        for index in behaviors.indices where bits[index] & (HookBits.intercept | HookBits.gates) != 0 {
            if bits[index] & HookBits.gates != 0, let gate = behaviors[index] as? any AttemptGating {
                gates.append(boxed(gate))
            } else if bits[index] & HookBits.intercept != 0 {
                interceptors.append(behaviors[index])
            }
        }
        return (interceptors, gates)
    }

    /// The last member whose type declares ``HookBits/hedges``.
    private static func lastHedger(in behaviors: [any RequestBehavior], bits: [UInt16]) -> Hedging? {
        for index in behaviors.indices.reversed() where bits[index] & HookBits.hedges != 0 {
            if let hedger = behaviors[index] as? any RequestHedging { return Hedging(hedger) }
        }
        return nil
    }

    /// A client's plan extended by a request's own behaviors (which run inside the client's),
    /// chains among them flattened.
    static func extending(_ base: HookPlan, with extra: [any RequestBehavior]) -> HookPlan {
        // One call per extra behavior (its type's hook bits), not one per hook; up to 8 of them
        // kept inline (an array of them was a malloc per request).
        var bits = ExtraBits(count: extra.count)
        var mayNest = false
        for index in extra.indices {
            let declared = HookBits.of(extra[index])
            bits[index] = declared
            // Only a member that declares what a chain declares can be one: the metatype is
            // compared for it alone (about 100 instructions a member otherwise).
            if declared == CombinedRequestBehavior._declaredHooks { mayNest = true }
        }
        if mayNest, extra.contains(where: { type(of: $0) == CombinedRequestBehavior.self }) {
            let flat = CombinedRequestBehavior.flatten(extra)
            var flatBits = ExtraBits(count: flat.count)
            for index in flat.indices { flatBits[index] = HookBits.of(flat[index]) }
            return HookPlan(extending: base, with: flat, bits: flatBits)
        }
        return HookPlan(extending: base, with: extra, bits: bits)
    }

    /// `base` extended by `extra` (no chain among them), whose hook bits are `bits`. Lists the
    /// extra behaviors don't take part in are shared with `base`, not copied; a list only they
    /// fill, all of them in their order, is `extra` itself (a request's one behavior with two
    /// hooks allocates no list).
    private init(extending base: HookPlan, with extra: [any RequestBehavior], bits: ExtraBits) {
        var all: UInt16 = 0
        var common: UInt16 = extra.isEmpty ? 0 : .max
        for index in extra.indices {
            all |= bits[index]
            common &= bits[index]
        }
        func forward(_ list: [any RequestBehavior], _ bit: UInt16) -> [any RequestBehavior] {
            guard all & bit != 0 else { return list }  // shared with `base`
            if list.isEmpty && common & bit != 0 { return extra }  // shared with the request
            var result: [any RequestBehavior] = []
            result.reserveCapacity(list.count + extra.count)  // one allocation, no growth
            result.append(contentsOf: list)
            for index in extra.indices where bits[index] & bit != 0 { result.append(extra[index]) }
            return result
        }
        func backward(_ list: [any RequestBehavior], _ bit: UInt16) -> [any RequestBehavior] {
            guard all & bit != 0 else { return list }
            if list.isEmpty && extra.count == 1 && common & bit != 0 { return extra }
            var result: [any RequestBehavior] = []
            result.reserveCapacity(list.count + extra.count)
            for index in extra.indices.reversed() where bits[index] & bit != 0 { result.append(extra[index]) }
            result.append(contentsOf: list)
            return result
        }
        additionalHeaders = forward(base.additionalHeaders, HookBits.additionalHeaders)
        modify = forward(base.modify, HookBits.modify)
        beforeSend = forward(base.beforeSend, HookBits.beforeSend)
        if all & (HookBits.intercept | HookBits.gates) != 0 {
            let (interceptors, gates) = Self.interceptorsAndGates(extra, bits: extra.indices.map { bits[$0] })
            intercept = base.intercept + interceptors
            self.gates = base.gates + gates
        } else {
            intercept = base.intercept
            gates = base.gates
        }
        sendsDirectly = intercept.isEmpty && gates.isEmpty
        validate = backward(base.validate, HookBits.validate)
        retryDecision = forward(base.retryDecision, HookBits.retryDecision)
        afterSuccess = backward(base.afterSuccess, HookBits.afterSuccess)
        afterFailure = backward(base.afterFailure, HookBits.afterFailure)
        progressObservers = forward(base.progressObservers, HookBits.transferProgress)
        hasWrappers = base.hasWrappers || all & HookBits.wraps != 0
        // A request's own hedging member replaces the client's.
        hedging =
            all & HookBits.hedges != 0
            ? Self.lastHedger(in: extra, bits: extra.indices.map { bits[$0] }) ?? base.hedging : base.hedging
    }

    /// A plan without the members `keep` rejects (a request's opt-outs); order is kept.
    init(filtering base: HookPlan, keep: (any RequestBehavior) -> Bool) {
        additionalHeaders = base.additionalHeaders.filter(keep)
        modify = base.modify.filter(keep)
        beforeSend = base.beforeSend.filter(keep)
        intercept = base.intercept.filter(keep)
        gates = base.gates.filter { keep($0.member) }
        sendsDirectly = intercept.isEmpty && gates.isEmpty
        validate = base.validate.filter(keep)
        retryDecision = base.retryDecision.filter(keep)
        afterSuccess = base.afterSuccess.filter(keep)
        afterFailure = base.afterFailure.filter(keep)
        progressObservers = base.progressObservers.filter(keep)
        hasWrappers = base.hasWrappers
        if let hedging = base.hedging, keep(hedging.member) { self.hedging = hedging } else { self.hedging = nil }
    }
}

/// The hook bits of a request's own behaviors: up to 8 inline, more in an array.
private struct ExtraBits {
    private var inline = SIMD8<UInt16>()
    private var spilled: [UInt16]?

    init(count: Int) {
        if count > 8 { spilled = Array(repeating: 0, count: count) }
    }

    subscript(index: Int) -> UInt16 {
        get { spilled?[index] ?? inline[index] }
        set {
            if spilled != nil { spilled?[index] = newValue } else { inline[index] = newValue }
        }
    }
}
