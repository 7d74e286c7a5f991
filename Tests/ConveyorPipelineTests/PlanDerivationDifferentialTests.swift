@testable import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

// Differential test of the plans a client derives for a request (Sources/Pipeline/HookPlan.swift).
//
// A chain's plan is built once, from the hook protocols each member declares. A request that
// leaves out client behaviors or brings its own gets a plan derived from the client's: filtered
// (and, for exclusions by type, kept per chain for the next request with the same exclusions)
// and extended. The claim attacked: a derived plan runs exactly what a plan built from scratch
// for the same members would run, and a method that has a hook's name but is no witness of a
// declared hook never runs. Each request runs twice on the same behavior values and the same
// transport replies:
//
// (a) through a real `NetworkClient` (its plan, filtered by the request's exclusions and
//     extended with its own behaviors), and
// (b) through `RequestRunner` with `HookPlan(behaviors:)` built from scratch from the same
//     flattened list (client behaviors minus exclusions, then the request's own). A
//     `CombinedRequestBehavior` nested inside a wrapper (not flattened, so it has a plan of its
//     own) is replaced in (b) by `ReferenceChain`, which runs the same members through a plan
//     built from scratch.
//
// The hook trace (every implemented hook and every transport call, with the headers and statuses
// it saw) and the outcome (the body, or the NetworkError's case and description) must be equal.
//
// The randomness is in which behavior types and values are composed: types are compile-time, so
// the file declares a zoo (`SkipZoo`) covering the traps: hook subsets, a generic type with a
// constrained extension that declares same-named hooks (not the witnesses), a class hierarchy
// whose subclass overrides one hook and declares another that is not a witness (also stored as
// its base class), two different types with the same name, forwarding wrappers (all hooks /
// some hooks) and nested chains.
//
// A failure names its scenario's seed and the run's base seed: replay it alone with
// CONVEYOR_SKIPPING_SEED=<seed> CONVEYOR_SKIPPING_COUNT=1 swift test --filter derivedPlansRunWhatAFreshPlanRuns.

// MARK: - The zoo

/// What one behavior value records and decides; the zoo's types call it from the hooks they implement.
struct SkipProbe: Sendable {
    /// How an implemented `intercept` treats an attempt.
    enum InterceptMode: Sendable, CaseIterable {
        /// Calls `next`.
        case pass
        /// Answers the first attempt with a 503 itself (no transport call); later attempts call `next`.
        case answer503First
        /// Calls `next` and turns a 404 into a 200.
        case rewrite404
        /// Answers every attempt with a 201 itself.
        case answer201
    }

    struct Planned: Error, SafelyDescribable {
        let label: String
        var description: String { "planned failure of \(label)" }
    }

    let type: String
    let label: String
    let tape: Locked<[String]>
    /// `validate` throws on this status.
    let validateThrowsOn: Int?
    /// `retryDecision` retries a 503 or a lost connection while the attempt is below this.
    let retryBelow: Int
    let intercept: InterceptMode
    /// The header `additionalHeaders` adds (shared names let later behaviors win).
    let headerName: String

    var summary: String {
        var parts: [String] = []
        if let validateThrowsOn { parts.append("validate throws on \(validateThrowsOn)") }
        if retryBelow > 1 { parts.append("retry below attempt \(retryBelow)") }
        if intercept != .pass { parts.append("intercept \(intercept)") }
        parts.append("header \(headerName)")
        return "\(type)#\(label){\(parts.joined(separator: ", "))}"
    }

    func log(_ hook: String, _ context: RequestContext, _ detail: String = "") {
        let line = "\(type)#\(label).\(hook)(\(context.attempt))" + (detail.isEmpty ? "" : " " + detail)
        tape.withLock { $0.append(line) }
    }

    func additionalHeaders(_ request: HTTPRequest, _ context: RequestContext) -> HTTPHeaders {
        log("additionalHeaders", context, skipHeaderSummary(request.headers))
        return [headerName: "\(label)@\(context.attempt)"]
    }

    func modify(_ request: inout HTTPRequest, _ context: RequestContext) {
        log("modify", context, skipHeaderSummary(request.headers))
        request.headers.add(name: "X-Modified-By", value: label)
    }

    func beforeSend(_ request: HTTPRequest, _ context: RequestContext) {
        log("beforeSend", context, skipHeaderSummary(request.headers))
    }

    func intercept(_ request: HTTPRequest, _ context: RequestContext, _ next: InterceptNext) async throws
        -> HTTPResponse
    {
        log("intercept", context, skipHeaderSummary(request.headers))
        switch intercept {
        case .pass:
            return try await next(request)
        case .answer503First where context.attempt == 1:
            return HTTPResponse(status: 503, body: Data("answered by \(label)".utf8), request: request)
        case .answer503First:
            return try await next(request)
        case .rewrite404:
            var response = try await next(request)
            if response.status == 404 { response.status = 200 }
            return response
        case .answer201:
            return HTTPResponse(status: 201, body: Data("made by \(label)".utf8), request: request)
        }
    }

    func validate(_ response: HTTPResponse, _ context: RequestContext) throws {
        log("validate", context, "\(response.status)")
        if response.status == validateThrowsOn { throw Planned(label: label) }
    }

    func retryDecision(_ failure: NetworkError, _ response: HTTPResponse?, _ context: RequestContext) -> RetryDecision {
        log("retryDecision", context, "\(failure.name) \(response.map { "\($0.status)" } ?? "-")")
        let retryable: Bool
        switch failure {
        case .connectionFailed: retryable = true
        default: retryable = response?.status == 503
        }
        return retryable && context.attempt < retryBelow ? .retryNow : .doNotRetry
    }

    func afterSuccess(_ response: HTTPResponse, _ context: RequestContext) {
        log("afterSuccess", context, "\(response.status) \(String(decoding: response.body, as: UTF8.self))")
    }

    func afterFailure(_ error: NetworkError, _ context: RequestContext) {
        log("afterFailure", context, error.name)
    }

    /// Marks a call the pipeline must never make (a method that is not a protocol witness).
    func trap(_ what: String) {
        tape.withLock { $0.append("TRAP \(type)#\(label).\(what)") }
    }
}

func skipHeaderSummary(_ headers: HTTPHeaders) -> String {
    "[" + headers.map { "\($0.name)=\($0.value)" }.joined(separator: ",") + "]"
}

/// A zoo member that can describe itself for failure messages.
protocol SkipDescribed {
    var summary: String { get }
}

/// A wrapper whose inner behavior (b) rebuilds.
protocol SkipRewrapping {
    func rewrapped(_ transform: (any RequestBehavior) -> any RequestBehavior) -> any RequestBehavior
}

enum SkipZoo {
    struct HeadersOnly: HeaderAdding, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            probe.additionalHeaders(request, context)
        }
    }

    struct ModifyOnly: RequestModifying, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws { probe.modify(&request, context) }
    }

    struct Observer: SendObserving, SuccessObserving, FailureObserving, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async { probe.beforeSend(request, context) }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { probe.afterSuccess(response, context) }
        func afterFailure(_ error: NetworkError, context: RequestContext) async { probe.afterFailure(error, context) }
    }

    struct Validator: ResponseValidating, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func validate(_ response: HTTPResponse, context: RequestContext) async throws { try probe.validate(response, context) }
    }

    struct Retrier: RetryDeciding, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
            -> RetryDecision
        {
            probe.retryDecision(failure, response, context)
        }
    }

    struct Judge: ResponseValidating, RetryDeciding, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func validate(_ response: HTTPResponse, context: RequestContext) async throws { try probe.validate(response, context) }
        func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
            -> RetryDecision
        {
            probe.retryDecision(failure, response, context)
        }
    }

    struct Interceptor: AttemptIntercepting, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            try await probe.intercept(request, context, next)
        }
    }

    struct SuccessOnly: SuccessObserving, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { probe.afterSuccess(response, context) }
    }

    struct FailureOnly: FailureObserving, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func afterFailure(_ error: NetworkError, context: RequestContext) async { probe.afterFailure(error, context) }
    }

    struct Everything: HeaderAdding, RequestModifying, SendObserving, AttemptIntercepting, ResponseValidating, RetryDeciding, SuccessObserving, FailureObserving, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            probe.additionalHeaders(request, context)
        }
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws { probe.modify(&request, context) }
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async { probe.beforeSend(request, context) }
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            try await probe.intercept(request, context, next)
        }
        func validate(_ response: HTTPResponse, context: RequestContext) async throws { try probe.validate(response, context) }
        func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
            -> RetryDecision
        {
            probe.retryDecision(failure, response, context)
        }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { probe.afterSuccess(response, context) }
        func afterFailure(_ error: NetworkError, context: RequestContext) async { probe.afterFailure(error, context) }
    }

    /// Implements beforeSend, retryDecision and afterFailure for every `T`; used with several `T`,
    /// each its own type.
    struct Generic<T: Sendable>: SendObserving, RetryDeciding, FailureObserving, SkipDescribed {
        let probe: SkipProbe
        var summary: String { probe.summary }
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async { probe.beforeSend(request, context) }
        func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
            -> RetryDecision
        {
            probe.retryDecision(failure, response, context)
        }
        func afterFailure(_ error: NetworkError, context: RequestContext) async { probe.afterFailure(error, context) }
    }

    /// Two base classes, one final subclass that overrides `validate` and declares `modify` and
    /// `afterFailure`, which the base leaves at the default: those are not witnesses.
    class Base: HeaderAdding, ResponseValidating, SuccessObserving, SkipDescribed, @unchecked Sendable {
        // @unchecked: only immutable stored properties.
        let probe: SkipProbe
        init(probe: SkipProbe) { self.probe = probe }
        var summary: String { probe.summary }
        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            probe.additionalHeaders(request, context)
        }
        func validate(_ response: HTTPResponse, context: RequestContext) async throws { try probe.validate(response, context) }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { probe.afterSuccess(response, context) }
    }

    final class Derived: Base, @unchecked Sendable {
        override func validate(_ response: HTTPResponse, context: RequestContext) async throws {
            probe.log("validate(override)", context, "\(response.status)")
            if response.status == probe.validateThrowsOn { throw SkipProbe.Planned(label: probe.label) }
        }
        /// Not a witness: `Base` takes `modify` from the protocol's default.
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws { probe.trap("modify") }
        /// Not a witness either.
        func afterFailure(_ error: NetworkError, context: RequestContext) async { probe.trap("afterFailure") }
    }

    /// Declares one hook and does nothing in it.
    final class Inert: SendObserving, SkipDescribed {
        let probe: SkipProbe
        init(probe: SkipProbe) { self.probe = probe }
        var summary: String { probe.summary }
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async {}
    }

    /// Forwards every hook to what it wraps, logging each; exclusions reach through it.
    struct ForwardAll: WrappingRequestBehavior, HeaderAdding, RequestModifying, SendObserving, AttemptIntercepting, ResponseValidating, RetryDeciding, SuccessObserving, FailureObserving, SkipDescribed, SkipRewrapping {
        let probe: SkipProbe
        let inner: any RequestBehavior
        var wrappedBehaviors: [any RequestBehavior] { [inner] }
        var summary: String { "\(probe.summary)(\(skipSummary(inner)))" }
        func rewrapped(_ transform: (any RequestBehavior) -> any RequestBehavior) -> any RequestBehavior {
            ForwardAll(probe: probe, inner: transform(inner))
        }

        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            probe.log("additionalHeaders", context)
            return try await CombinedRequestBehavior([inner]).additionalHeaders(for: request, context: context)
        }
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
            probe.log("modify", context)
            try await CombinedRequestBehavior([inner]).modify(&request, context: context)
        }
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
            probe.log("beforeSend", context)
            await CombinedRequestBehavior([inner]).beforeSend(request, context: context)
        }
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            probe.log("intercept", context)
            return try await CombinedRequestBehavior([inner]).intercept(request, context: context, next: next)
        }
        func validate(_ response: HTTPResponse, context: RequestContext) async throws {
            probe.log("validate", context)
            try await CombinedRequestBehavior([inner]).validate(response, context: context)
        }
        func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
            -> RetryDecision
        {
            probe.log("retryDecision", context)
            return await CombinedRequestBehavior([inner]).retryDecision(after: failure, response: response, context: context)
        }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            probe.log("afterSuccess", context)
            await CombinedRequestBehavior([inner]).afterSuccess(response, context: context)
        }
        func afterFailure(_ error: NetworkError, context: RequestContext) async {
            probe.log("afterFailure", context)
            await CombinedRequestBehavior([inner]).afterFailure(error, context: context)
        }
    }

    /// Forwards some hooks only (headers, intercept, validate, afterFailure); the rest of what it
    /// wraps never runs. Not a `WrappingRequestBehavior`: exclusions do not reach through it.
    struct ForwardSome: HeaderAdding, AttemptIntercepting, ResponseValidating, FailureObserving, SkipDescribed, SkipRewrapping {
        let probe: SkipProbe
        let inner: any RequestBehavior
        var summary: String { "\(probe.summary)(\(skipSummary(inner)))" }
        func rewrapped(_ transform: (any RequestBehavior) -> any RequestBehavior) -> any RequestBehavior {
            ForwardSome(probe: probe, inner: transform(inner))
        }

        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            probe.log("additionalHeaders", context)
            return try await CombinedRequestBehavior([inner]).additionalHeaders(for: request, context: context)
        }
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            probe.log("intercept", context)
            return try await CombinedRequestBehavior([inner]).intercept(request, context: context, next: next)
        }
        func validate(_ response: HTTPResponse, context: RequestContext) async throws {
            probe.log("validate", context)
            try await CombinedRequestBehavior([inner]).validate(response, context: context)
        }
        func afterFailure(_ error: NetworkError, context: RequestContext) async {
            probe.log("afterFailure", context)
            await CombinedRequestBehavior([inner]).afterFailure(error, context: context)
        }
    }

    /// Two types with the same name (and default ``RequestBehavior/name``) and different hooks.
    enum Left {
        struct Twin: RequestModifying, SkipDescribed {
            let probe: SkipProbe
            var summary: String { "Left." + probe.summary }
            func modify(_ request: inout HTTPRequest, context: RequestContext) async throws { probe.modify(&request, context) }
        }
    }

    enum Right {
        struct Twin: ResponseValidating, SuccessObserving, SkipDescribed {
            let probe: SkipProbe
            var summary: String { "Right." + probe.summary }
            func validate(_ response: HTTPResponse, context: RequestContext) async throws { try probe.validate(response, context) }
            func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { probe.afterSuccess(response, context) }
        }
    }
}

/// The trap: same-named hooks that only `Generic<Int>` has. They are not the protocol's
/// witnesses (those are chosen for every `T`): `validate` stays the default, `afterFailure` the
/// unconstrained one. The pipeline must never call these.
extension SkipZoo.Generic where T == Int {
    func validate(_ response: HTTPResponse, context: RequestContext) async throws { probe.trap("validate") }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { probe.trap("afterFailure") }
}

/// For (b): runs its members through a plan that skips nothing, as a `CombinedRequestBehavior`
/// whose plan is built from scratch would.
struct ReferenceChain: HeaderAdding, RequestModifying, SendObserving, AttemptIntercepting, ResponseValidating, RetryDeciding, SuccessObserving, FailureObserving {
    let members: [any RequestBehavior]
    let plan: HookPlan

    init(_ members: [any RequestBehavior]) {
        self.members = members
        plan = HookPlan(behaviors: members)
    }

    var name: String { "Combined[\(members.map(\.name).joined(separator: ", "))]" }

    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        try await plan.runAdditionalHeaders(for: request, context: context)
    }
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        try await plan.runModify(&request, context: context)
    }
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        await plan.runBeforeSend(request, context: context)
    }
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await plan.runIntercept(request, context: context, innermost: next)
    }
    func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        try await plan.runValidate(response, context: context)
    }
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        await plan.runRetryDecision(after: failure, response: response, context: context)
    }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        await plan.runAfterSuccess(response, context: context)
    }
    func afterFailure(_ error: NetworkError, context: RequestContext) async {
        await plan.runAfterFailure(error, context: context)
    }
}

func skipSummary(_ behavior: any RequestBehavior) -> String {
    if let described = behavior as? any SkipDescribed { return described.summary }
    if let chain = behavior as? CombinedRequestBehavior { return "Combined[\(chain.behaviors.map(skipSummary).joined(separator: ", "))]" }
    return behavior.name
}

/// Top-level chains flattened, as the client and `plan(excluding:adding:)` do.
func skipFlattened(_ behaviors: [any RequestBehavior]) -> [any RequestBehavior] {
    behaviors.flatMap { behavior -> [any RequestBehavior] in
        if let chain = behavior as? CombinedRequestBehavior { return skipFlattened(chain.behaviors) }
        return [behavior]
    }
}

/// The same behavior with every chain inside a wrapper replaced by a `ReferenceChain`.
func skipNothing(_ behavior: any RequestBehavior) -> any RequestBehavior {
    if let chain = behavior as? CombinedRequestBehavior { return ReferenceChain(skipFlattened(chain.behaviors).map(skipNothing)) }
    if let wrapper = behavior as? any SkipRewrapping { return wrapper.rewrapped(skipNothing) }
    return behavior
}

// MARK: - Scenarios

/// One client, its behaviors, a few request shapes, and the replies of each request.
struct SkipScenario: CustomStringConvertible {
    struct Shape {
        var method: HTTPMethod
        var path: String
        var headers: HTTPHeaders
        var behaviors: [any RequestBehavior]
        var exclusions: [(BehaviorExclusion, String)]
    }

    enum Reply: CustomStringConvertible {
        case status(Int)
        case lost
        case offline

        var description: String {
            switch self {
            case .status(let status): "\(status)"
            case .lost: "lost"
            case .offline: "offline"
            }
        }
    }

    let seed: UInt64
    let tape = Locked<[String]>([])
    let attemptLimit: Int
    let clientBehaviors: [any RequestBehavior]
    let shapes: [Shape]
    /// Per request: which shape, and the transport's replies in call order.
    let requests: [(shape: Int, replies: [Reply])]

    init(seed: UInt64) {
        self.seed = seed
        var rng = SplitMix64(state: seed)
        var nextLabel = 0
        let tape = self.tape
        func probe(_ type: String) -> SkipProbe {
            defer { nextLabel += 1 }
            let headerNames = ["X-Shared", "X-Shared", "x-shared", "X-B\(nextLabel)"]
            return SkipProbe(
                type: type, label: "b\(nextLabel)", tape: tape,
                validateThrowsOn: [nil, nil, 200, 201].randomElement(using: &rng)!,
                retryBelow: Int.random(in: 1...5, using: &rng),
                intercept: SkipProbe.InterceptMode.allCases.randomElement(using: &rng)!,
                headerName: headerNames.randomElement(using: &rng)!)
        }
        func behavior(depth: Int) -> any RequestBehavior {
            let kinds = depth < 2 ? 22 : 17
            switch Int.random(in: 0..<kinds, using: &rng) {
            case 0: return SkipZoo.HeadersOnly(probe: probe("HeadersOnly"))
            case 1: return SkipZoo.ModifyOnly(probe: probe("ModifyOnly"))
            case 2: return SkipZoo.Observer(probe: probe("Observer"))
            case 3: return SkipZoo.Validator(probe: probe("Validator"))
            case 4: return SkipZoo.Retrier(probe: probe("Retrier"))
            case 5: return SkipZoo.Judge(probe: probe("Judge"))
            case 6: return SkipZoo.Interceptor(probe: probe("Interceptor"))
            case 7: return SkipZoo.SuccessOnly(probe: probe("SuccessOnly"))
            case 8: return SkipZoo.FailureOnly(probe: probe("FailureOnly"))
            case 9: return SkipZoo.Everything(probe: probe("Everything"))
            case 10: return SkipZoo.Generic<Int>(probe: probe("Generic<Int>"))
            case 11: return SkipZoo.Generic<String>(probe: probe("Generic<String>"))
            case 12: return SkipZoo.Generic<Double>(probe: probe("Generic<Double>"))
            case 13: return SkipZoo.Base(probe: probe("Base"))
            case 14:
                let derived = SkipZoo.Derived(probe: probe("Derived"))
                // Half the time erased from a `Base`-typed value (the static type differs from the dynamic one).
                return Bool.random(using: &rng) ? derived as SkipZoo.Base : derived
            case 15: return SkipZoo.Inert(probe: probe("Inert"))
            case 16:
                return Bool.random(using: &rng)
                    ? SkipZoo.Left.Twin(probe: probe("Twin")) : SkipZoo.Right.Twin(probe: probe("Twin"))
            case 17, 18: return SkipZoo.ForwardAll(probe: probe("ForwardAll"), inner: behavior(depth: depth + 1))
            case 19: return SkipZoo.ForwardSome(probe: probe("ForwardSome"), inner: behavior(depth: depth + 1))
            default:
                // A chain, possibly with a chain inside (flattened when it is built).
                let count = Int.random(in: 1...3, using: &rng)
                return CombinedRequestBehavior((0..<count).map { _ in behavior(depth: depth + 1) })
            }
        }
        func behaviors(_ range: ClosedRange<Int>) -> [any RequestBehavior] {
            (0..<Int.random(in: range, using: &rng)).map { _ in behavior(depth: 0) }
        }

        attemptLimit = Int.random(in: 2...5, using: &rng)
        clientBehaviors = behaviors(0...7)
        let exclusionPool: [(BehaviorExclusion, String)] = [
            (.type(SkipZoo.Validator.self), "type Validator"), (.type(SkipZoo.Observer.self), "type Observer"),
            (.type(SkipZoo.Base.self), "type Base"), (.type(SkipZoo.Derived.self), "type Derived"),
            (.type(SkipZoo.Generic<Int>.self), "type Generic<Int>"), (.type(SkipZoo.ForwardAll.self), "type ForwardAll"),
            (.type(SkipZoo.Inert.self), "type Inert"), (.type(SkipZoo.Everything.self), "type Everything"),
            (.named("Twin"), "named Twin"), (.named("Generic<String>"), "named Generic<String>"),
            (.named("Base"), "named Base"), (.named("Interceptor"), "named Interceptor"), (.named("nothing"), "named nothing"),
        ]
        // The scenario's shapes draw their exclusions from a few, so that sets overlap (share a
        // first member, differ in the rest); some select the client's own members.
        let members = skipFlattened(clientBehaviors)
        var local = (0..<3).map { _ in exclusionPool.randomElement(using: &rng)! }
        for _ in 0..<(members.isEmpty ? 0 : 2) {
            let member = members.randomElement(using: &rng)!
            local.append(
                Bool.random(using: &rng)
                    ? (.type(type(of: member)), "type \(type(of: member))") : (.named(member.name), "named \(member.name)"))
        }
        var shapes: [Shape] = []
        for index in 0..<Int.random(in: 1...5, using: &rng) {
            let exclusions = (0..<[0, 0, 1, 1, 2, 3].randomElement(using: &rng)!).map { _ in local.randomElement(using: &rng)! }
            shapes.append(
                Shape(
                    method: [.get, .get, .post, .delete].randomElement(using: &rng)!, path: "/r\(index)",
                    headers: Bool.random(using: &rng) ? [:] : ["X-Shared": "request"],
                    behaviors: index == 0 ? [] : behaviors(0...3), exclusions: exclusions))
        }
        self.shapes = shapes
        let replyPool: [Reply] = [.status(200), .status(200), .status(201), .status(404), .status(503), .status(503), .lost, .offline]
        // Enough that every shape meets both the client's plan and derived ones.
        let count = 64 + Int.random(in: 4...16, using: &rng)
        requests = (0..<count).map { _ in
            (Int.random(in: 0..<shapes.count, using: &rng), (0..<6).map { _ in replyPool.randomElement(using: &rng)! })
        }
    }

    func request(_ shape: Shape) -> Request<Data> {
        var request = Request<Data>(method: shape.method, path: shape.path, headers: shape.headers, behaviors: shape.behaviors)
        for (exclusion, _) in shape.exclusions { request = request.excluding(exclusion) }
        return request
    }

    /// (b)'s members: the client's behaviors, flattened, minus the exclusions, then the
    /// request's own; every chain inside a wrapper replaced by one that skips nothing.
    func referenceMembers(_ shape: Shape) -> [any RequestBehavior] {
        let client = skipFlattened(clientBehaviors).filter { member in
            !shape.exclusions.contains { $0.0.matches(member) }
        }
        return (client + skipFlattened(shape.behaviors)).map(skipNothing)
    }

    var description: String {
        var lines = ["scenario \(seed): attempt limit \(attemptLimit)"]
        lines.append("  client: [\(clientBehaviors.map(skipSummary).joined(separator: ", "))]")
        for (index, shape) in shapes.enumerated() {
            lines.append(
                "  shape \(index): \(shape.method) \(shape.path) headers \(skipHeaderSummary(shape.headers)) own "
                    + "[\(shape.behaviors.map(skipSummary).joined(separator: ", "))] excluding "
                    + "\(shape.exclusions.map(\.1))")
        }
        return lines.joined(separator: "\n")
    }
}

/// What one run came to: the trace and the outcome.
struct SkipRun: Equatable {
    var trace: [String]
    var outcome: String
}

@Suite struct PlanDerivationDifferentialTests {
    static let count = ProcessInfo.processInfo.environment["CONVEYOR_SKIPPING_COUNT"].flatMap(Int.init) ?? 100
    static let baseSeed =
        ProcessInfo.processInfo.environment["CONVEYOR_SKIPPING_SEED"].flatMap(UInt64.init)
        ?? UInt64.random(in: 1...UInt64.max / 2)

    /// What the scenarios covered, so a generator that stopped reaching a case is noticed.
    struct Coverage {
        var requests = 0
        var successes = 0
        var failures = 0
        var retried = 0
        var validateThrew = 0
        var interceptAnswered = 0
        /// Requests whose plan was derived (exclusions or the request's own behaviors).
        var derivedPlans = 0

        mutating func add(_ other: Coverage) {
            requests += other.requests
            successes += other.successes
            failures += other.failures
            retried += other.retried
            validateThrew += other.validateThrew
            interceptAnswered += other.interceptAnswered
            derivedPlans += other.derivedPlans
        }
    }

    /// The scenarios run in four shards side by side (in one sequence, this test was among the
    /// last to end in every `swift test` run); failures and coverage are counted over all of them.
    static let shards = 4

    @Test func derivedPlansRunWhatAFreshPlanRuns() async {
        let size = (Self.count + Self.shards - 1) / Self.shards
        let (failures, coverage) = await withTaskGroup(of: (Int, Coverage).self) { group in
            for shard in 0..<Self.shards {
                group.addTask { await runScenarios(min(Self.count, shard * size)..<min(Self.count, (shard + 1) * size)) }
            }
            return await group.reduce(into: (0, Coverage())) { total, shard in
                total.0 += shard.0
                total.1.add(shard.1)
            }
        }
        #expect(failures == 0)
        if Self.count >= 20 && failures == 0 {
            // The generator reaches what the claim is about: plans were derived, and
            // requests succeeded, failed, retried, were rejected by validate and answered by intercept.
            #expect(coverage.derivedPlans > 0, "no plan was derived: \(coverage)")
            #expect(coverage.successes > 0 && coverage.failures > 0 && coverage.retried > 0, "\(coverage)")
            #expect(coverage.validateThrew > 0 && coverage.interceptAnswered > 0, "\(coverage)")
        }
    }

    /// Runs the scenarios at `offsets`, stopping after three that fail; returns how many failed
    /// and what they covered.
    func runScenarios(_ offsets: Range<Int>) async -> (Int, Coverage) {
        var failures = 0
        var coverage = Coverage()
        for offset in offsets {
            let scenario = SkipScenario(seed: Self.baseSeed &+ UInt64(offset))
            let problems = await check(scenario, coverage: &coverage)
            if !problems.isEmpty {
                failures += 1
                Issue.record(
                    """
                    A derived plan changed what happened in scenario \(offset). Replay it alone with \
                    CONVEYOR_SKIPPING_SEED=\(scenario.seed) CONVEYOR_SKIPPING_COUNT=1 swift test \
                    --filter derivedPlansRunWhatAFreshPlanRuns
                    \(scenario)
                    \(problems.joined(separator: "\n"))
                    """)
                if failures >= 3 { break }
            }
        }
        return (failures, coverage)
    }

    /// Runs every request of the scenario both ways; returns what differed.
    func check(_ scenario: SkipScenario, coverage: inout Coverage) async -> [String] {
        let mock = MockTransport()
        let clock = ImmediateClock()
        // The reference runner has no retry budget: neither has the client (the budget is the
        // same for both ways of building a plan, and its own tests are RetryBudgetTests).
        var configuration = NetworkClient.Configuration(clock: clock, attemptLimit: scenario.attemptLimit)
        configuration.retryBudget = nil
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/api")!, transport: mock, configuration: configuration
        ) { scenario.clientBehaviors }
        let runner = RequestRunner(transport: mock, clock: clock, attemptLimit: scenario.attemptLimit)
        var problems: [String] = []

        for (index, (shapeIndex, replies)) in scenario.requests.enumerated() {
            let shape = scenario.shapes[shapeIndex]
            let request = scenario.request(shape)

            // (a) The client, with the plan it derives.
            let skipping = await run(scenario, mock: mock, replies: replies) { () async throws(NetworkError) -> Data in
                try await client.send(request)
            }

            // (b) The same request through a plan built from scratch.
            let reference = await run(scenario, mock: mock, replies: replies) { () async throws(NetworkError) -> Data in
                let httpRequest = try client.makeHTTPRequest(request)
                let plan = HookPlan(behaviors: scenario.referenceMembers(shape))
                return try await runner.run(httpRequest, plan: plan, context: RequestContext(request: httpRequest)) {
                    $0.body
                }
            }

            coverage.requests += 1
            if !request.exclusions.isEmpty || !request.behaviors.isEmpty { coverage.derivedPlans += 1 }
            if reference.outcome.hasPrefix("success") { coverage.successes += 1 } else { coverage.failures += 1 }
            if reference.trace.contains(where: { $0.contains("(2)") }) { coverage.retried += 1 }
            if reference.outcome.contains("planned failure") { coverage.validateThrew += 1 }
            if reference.trace.contains(where: { $0.hasPrefix("transport") }) == false,
                reference.trace.contains(where: { $0.contains(".intercept(") })
            {
                coverage.interceptAnswered += 1
            }

            var differences: [String] = []
            if skipping.outcome != reference.outcome {
                differences.append("outcome: skipping \(skipping.outcome) | reference \(reference.outcome)")
            }
            if skipping.trace != reference.trace {
                let common = zip(skipping.trace, reference.trace).prefix { $0 == $1 }.count
                differences.append(
                    "trace differs at line \(common): skipping \(Array(skipping.trace.dropFirst(common).prefix(4))) | "
                        + "reference \(Array(reference.trace.dropFirst(common).prefix(4)))")
                differences.append("  full reference trace: \(reference.trace)")
            }
            if let trap = (skipping.trace + reference.trace).first(where: { $0.hasPrefix("TRAP") }) {
                differences.append("a method that is no protocol witness was called: \(trap)")
            }
            if !differences.isEmpty {
                problems.append("request \(index) (shape \(shapeIndex), replies \(replies)):")
                problems += differences.map { "  " + $0 }
                if problems.count > 12 { break }
            }
        }

        return problems
    }

    /// Runs one request on fresh replies and returns its trace (hooks and transport calls) and outcome.
    func run(
        _ scenario: SkipScenario, mock: MockTransport, replies: [SkipScenario.Reply],
        _ body: () async throws(NetworkError) -> Data
    ) async -> SkipRun {
        let tape = scenario.tape
        tape.withLock { $0 = [] }
        mock.reset()
        for (call, reply) in replies.enumerated() {
            mock.enqueue(
                .handler { request in
                    tape.withLock {
                        $0.append("transport(\(call)) \(request.method) \(request.url.path) \(skipHeaderSummary(request.headers))")
                    }
                    switch reply {
                    case .status(let status):
                        return .response(status: status, headers: [:], body: Data("reply \(call): \(status)".utf8))
                    case .lost: return .failure(URLError(.networkConnectionLost))
                    case .offline: return .failure(URLError(.notConnectedToInternet))
                    }
                })
        }
        let outcome: String
        do {
            outcome = "success \(String(decoding: try await body(), as: UTF8.self))"
        } catch {
            outcome = "failure \(error.name): \(error.description)"
        }
        return SkipRun(trace: tape.withLock { $0 }, outcome: outcome)
    }
}

// MARK: - Exclusions of behaviors that change

/// A behavior whose name changes while the client runs (a feature-flagged or re-labelled one).
final class RenamableBehavior: HeaderAdding {
    let current: Locked<String>
    let tape: Locked<[String]>
    init(_ name: String, tape: Locked<[String]>) {
        current = Locked(name)
        self.tape = tape
    }
    var name: String { current.withLock { $0 } }
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        tape.withLock { $0.append("Renamable(\(name)).additionalHeaders(\(context.attempt))") }
        return [:]
    }
}

/// A wrapper whose wrapped behavior can be swapped while the client runs.
final class SwappableWrapper: WrappingRequestBehavior, RequestModifying {
    let inner: Locked<any RequestBehavior>
    let tape: Locked<[String]>
    init(_ inner: any RequestBehavior, tape: Locked<[String]>) {
        self.inner = Locked(inner)
        self.tape = tape
    }
    var wrappedBehaviors: [any RequestBehavior] { [inner.withLock { $0 }] }
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        tape.withLock { $0.append("SwappableWrapper.modify(\(context.attempt))") }
        try await CombinedRequestBehavior([inner.withLock { $0 }]).modify(&request, context: context)
    }
}

/// What `SwappableWrapper` wraps first. (Types of their own, so that this test, which runs in
/// parallel with the randomized one, shares nothing with the zoo.)
struct SwapModifier: RequestModifying {
    let tape: Locked<[String]>
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        tape.withLock { $0.append("SwapModifier.modify(\(context.attempt))") }
    }
}

/// What `SwappableWrapper` wraps later: the type the request excludes.
struct SwapValidator: ResponseValidating {
    let tape: Locked<[String]>
    func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        tape.withLock { $0.append("SwapValidator.validate(\(context.attempt))") }
    }
}

extension PlanDerivationDifferentialTests {
    /// An exclusion matches what a member is now: a behavior renamed to the excluded name, or a
    /// wrapper that now wraps an excluded type, is left out from then on. Found by this
    /// differential test: the first version of the per-chain cache of exclusion plans kept the
    /// plan derived the first time an exclusion set was used, so a renamed member still ran.
    /// Plans are now kept only for exclusions by type in chains without wrappers.
    @Test func anExclusionMatchesWhatAMemberIsNow() async throws {
        let tape = Locked<[String]>([])
        let renamable = RenamableBehavior("before", tape: tape)
        let swappable = SwappableWrapper(SwapModifier(tape: tape), tape: tape)
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:9/api")!, transport: mock) {
            renamable
            swappable
        }
        let runner = RequestRunner(transport: mock)

        for _ in 0..<3 { _ = try await client.send(Request<Data>(path: "/x")) }

        let byName = Request<Data>(path: "/x").excluding(.named("after"))
        let byType = Request<Data>(path: "/x").excluding(.type(SwapValidator.self))
        _ = try await client.send(byName)  // keeps the plan for [.named("after")]: nothing matched
        _ = try await client.send(byType)  // keeps the plan for [.type(SwapValidator)]: nothing matched
        renamable.current.withLock { $0 = "after" }
        swappable.inner.withLock { $0 = SwapValidator(tape: tape) }

        for request in [byName, byType] {
            tape.withLock { $0 = [] }
            _ = try await client.send(request)
            let skipping = tape.withLock { $0 }

            tape.withLock { $0 = [] }
            let members = skipFlattened(client.behaviors.behaviors).filter { member in
                !request.exclusions.contains { $0.matches(member) }
            }
            let httpRequest = try client.makeHTTPRequest(request)
            _ = try await runner.run(
                httpRequest, plan: HookPlan(behaviors: members),
                context: RequestContext(request: httpRequest)
            ) { $0.body }
            let reference = tape.withLock { $0 }

            #expect(skipping == reference, "excluding \(request.exclusions)")
            #expect(!skipping.isEmpty)
        }
    }
}
