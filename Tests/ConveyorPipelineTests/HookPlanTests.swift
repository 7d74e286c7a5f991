@testable import ConveyorPipeline
import ConveyorTesting
import Foundation
import Testing

/// A chain calls each member for exactly the hooks its type declares, in contract order, from the
/// first request on: the plan is fixed when the chain is built.
@Suite struct HookPlanTests {
    /// Implements modify and afterSuccess only.
    struct CountsModify: RequestModifying, SuccessObserving {
        let calls: Locked<[String]>
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
            calls.withLock { $0.append("modify") }
        }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            calls.withLock { $0.append("afterSuccess") }
        }
    }

    /// Declares only `retryDecision`: on a successful request it takes part in nothing.
    struct OnlyRetries: RetryDeciding {
        func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
            -> RetryDecision
        {
            .doNotRetry
        }
    }
    struct AlsoOnlyRetries: RetryDeciding {
        func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
            -> RetryDecision
        {
            .doNotRetry
        }
    }

    @Test func thePlanHoldsDeclaredHooksOnlyBeforeAnyRequest() async throws {
        let calls = Locked<[String]>([])
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = makeClient(mock) {
            OnlyRetries()
            CountsModify(calls: calls)
        }
        // Before any request: only the declared hooks, nothing to learn.
        let plan = client.behaviors.plan
        #expect(plan.retryDecision.map(\.name) == ["OnlyRetries"])
        #expect(plan.afterFailure.isEmpty)
        for _ in 0..<3 { try await client.send(Request<Void>(path: "/x")) }
        // Declared hooks ran on every request.
        #expect(calls.withLock { $0 } == Array(repeating: ["modify", "afterSuccess"], count: 3).flatMap { $0 })
        #expect(client.behaviors.plan === plan)  // never rebuilt
        #expect(plan.additionalHeaders.isEmpty)
        #expect(plan.beforeSend.isEmpty)
        #expect(plan.validate.isEmpty)
        #expect(plan.modify.map(\.name) == ["CountsModify"])
        #expect(plan.afterSuccess.map(\.name) == ["CountsModify"])
    }

    @Test func aBehaviorThatDeclaresEveryHookRunsEach() async throws {
        let recorder = HookRecorder()
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = makeClient(mock) { RecordingBehavior("spy", recorder: recorder) }
        for _ in 0..<3 { try await client.send(Request<Void>(path: "/x")) }
        #expect(recorder.hooks(of: "spy").count == 15)
        let plan = client.behaviors.plan
        #expect([plan.additionalHeaders, plan.modify, plan.beforeSend, plan.validate, plan.afterSuccess].allSatisfy { $0.count == 1 })
    }

    @Test func ordersArePreservedInThePlan() async throws {
        let recorder = HookRecorder()
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder)
            AlsoOnlyRetries()
            RecordingBehavior("B", recorder: recorder)
        }
        let plan = client.behaviors.plan
        #expect(plan.modify.map(\.name) == ["A", "B"])
        #expect(plan.validate.map(\.name) == ["B", "A"])
        #expect(plan.afterSuccess.map(\.name) == ["B", "A"])
        #expect(plan.afterFailure.map(\.name) == ["B", "A"])
        #expect(plan.retryDecision.map(\.name) == ["A", "AlsoOnlyRetries", "B"])

        mock.enqueue(.status(500))
        try? await client.send(Request<Void>(path: "/x"))
        #expect(recorder.trace.suffix(2) == ["B.afterFailure", "A.afterFailure"])
    }

    @Test func anOptOutDerivesItsPlanFromTheClientsAndKeepsOrder() async throws {
        let recorder = HookRecorder()
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder)
            RecordingBehavior("B", recorder: recorder)
            RecordingBehavior("C", recorder: recorder)
        }
        let chain = client.behaviors.removing([.named("B")])
        #expect(chain.behaviors.map(\.name) == ["A", "C"])
        let plan = chain.plan
        #expect(plan.modify.map(\.name) == ["A", "C"])
        #expect(plan.validate.map(\.name) == ["C", "A"])
        #expect(plan.afterFailure.map(\.name) == ["C", "A"])
        try await client.send(Request<Void>(path: "/x").excluding(.named("B")))
        #expect(recorder.trace == [
            "A.additionalHeaders", "C.additionalHeaders", "A.modify", "C.modify", "A.beforeSend", "C.beforeSend",
            "C.validate", "A.validate", "C.afterSuccess", "A.afterSuccess",
        ])
    }

    /// Implements only `afterFailure`: a request's own behavior such as "show the error".
    struct OnlyOnFailure: FailureObserving {
        let calls: Locked<Int>
        func afterFailure(_ error: NetworkError, context: RequestContext) async { calls.withLock { $0 += 1 } }
    }

    /// A chain a request carries is flattened into its members (found by its hook bits, then its
    /// type); a list only the request's behaviors fill is theirs, in contract order, with a
    /// client that has none of its own.
    @Test func aRequestsOwnChainIsFlattenedAndItsListsKeepContractOrder() async throws {
        let recorder = HookRecorder()
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = makeClient(mock)
        #expect(HookBits.of(CombinedRequestBehavior([])) == CombinedRequestBehavior._declaredHooks)
        let chain = CombinedRequestBehavior {
            RecordingBehavior("C1", recorder: recorder)
            RecordingBehavior("C2", recorder: recorder)
        }
        let plan = client.behaviors.plan(excluding: [], adding: [RecordingBehavior("R", recorder: recorder), chain])
        #expect(plan.modify.map(\.name) == ["R", "C1", "C2"])
        #expect(plan.afterSuccess.map(\.name) == ["C2", "C1", "R"])
        let single = client.behaviors.plan(excluding: [], adding: [RecordingBehavior("S", recorder: recorder)])
        #expect(single.modify.map(\.name) == ["S"] && single.afterSuccess.map(\.name) == ["S"])
        try await client.send(Request<Void>(path: "/x", behaviors: [chain]))
        #expect(recorder.trace == [
            "C1.additionalHeaders", "C2.additionalHeaders", "C1.modify", "C2.modify", "C1.beforeSend", "C2.beforeSend",
            "C2.validate", "C1.validate", "C2.afterSuccess", "C1.afterSuccess",
        ])
    }

    @Test func aRequestsOwnBehaviorsExtendTheClientsPlanInContractOrder() async throws {
        let recorder = HookRecorder()
        let failures = Locked(0)
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder)
            RecordingBehavior("B", recorder: recorder)
        }
        try await client.send(Request<Void>(path: "/x", behaviors: [OnlyOnFailure(calls: failures)]))
        mock.enqueue(.status(500))
        try? await client.send(Request<Void>(path: "/x", behaviors: [OnlyOnFailure(calls: failures)]))
        #expect(failures.withLock { $0 } == 1)

        let plan = client.behaviors.plan(
            excluding: [.named("A")], adding: [RecordingBehavior("D", recorder: recorder), OnlyOnFailure(calls: failures)])
        #expect(plan.modify.map(\.name) == ["B", "D"])
        #expect(plan.beforeSend.map(\.name) == ["B", "D"])
        #expect(plan.validate.map(\.name) == ["D", "B"])
        #expect(plan.retryDecision.map(\.name) == ["B", "D"])
        #expect(plan.afterSuccess.map(\.name) == ["D", "B"])
        #expect(plan.afterFailure.map(\.name) == ["OnlyOnFailure", "D", "B"])
        // The client's own plan is untouched.
        #expect(client.behaviors.plan.modify.map(\.name) == ["A", "B"])

        recorder.reset()
        try await client.send(
            Request<Void>(path: "/x", behaviors: [RecordingBehavior("D", recorder: recorder)]).excluding(.named("A")))
        #expect(recorder.trace == [
            "B.additionalHeaders", "D.additionalHeaders", "B.modify", "D.modify", "B.beforeSend", "D.beforeSend",
            "D.validate", "B.validate", "D.afterSuccess", "B.afterSuccess",
        ])
    }

    @Test func nestedChainsAreFlattenedAndOtherBehaviorsAreNot() {
        let inner = CombinedRequestBehavior([OnlyRetries(), AlsoOnlyRetries()])
        let outer = CombinedRequestBehavior([inner, OnlyRetries()])
        #expect(outer.behaviors.map(\.name) == ["OnlyRetries", "AlsoOnlyRetries", "OnlyRetries"])
        #expect(outer.appending([inner]).behaviors.count == 5)
    }

    /// A subclass that writes a method with a hook's name its base class does not declare: not a
    /// witness, never called, whatever the value's static type.
    class Base: SuccessObserving, @unchecked Sendable {
        // @unchecked: only an immutable stored property.
        let calls: Locked<[String]>
        init(calls: Locked<[String]>) { self.calls = calls }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            calls.withLock { $0.append("afterSuccess") }
        }
    }
    final class Derived: Base, @unchecked Sendable {
        // @unchecked: no stored property of its own.
        func afterFailure(_ error: NetworkError, context: RequestContext) async {
            calls.withLock { $0.append("TRAP afterFailure") }
        }
    }

    @Test func aMethodNamedLikeAnUndeclaredHookNeverRuns() async throws {
        let calls = Locked<[String]>([])
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        mock.stub(nil, "/api/fail", reply: .status(500))
        let client = makeClient(mock) { Derived(calls: calls) }
        #expect(client.behaviors.plan.afterFailure.isEmpty)
        try await client.send(Request<Void>(path: "/x"))
        try? await client.send(Request<Void>(path: "/fail"))
        #expect(calls.withLock { $0 } == ["afterSuccess"])
    }
}
