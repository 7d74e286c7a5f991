@testable import ConveyorPipeline
import ConveyorTesting
import Foundation
import Testing

/// Chains stop calling hooks that a behavior type leaves at the no-op default, and only those.
@Suite struct HookPlanTests {
    /// Implements modify and afterSuccess only.
    struct CountsModify: RequestBehavior {
        let calls: Locked<[String]>
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
            calls.withLock { $0.append("modify") }
        }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            calls.withLock { $0.append("afterSuccess") }
        }
    }

    struct NothingAtAll: RequestBehavior {}
    /// Its own type, so what other tests teach the (process-wide) registry cannot leak in.
    struct NothingEither: RequestBehavior {}

    @Test func defaultHooksAreLearnedAndSkippedImplementedOnesAlwaysRun() async throws {
        let calls = Locked<[String]>([])
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = makeClient(mock) {
            NothingAtAll()
            CountsModify(calls: calls)
        }
        for _ in 0..<3 { try await client.send(Request<Void>(path: "/x")) }
        // Implemented hooks ran on every request.
        #expect(calls.withLock { $0 } == Array(repeating: ["modify", "afterSuccess"], count: 3).flatMap { $0 })
        // After the first request, the plan calls only the implemented hooks.
        let plan = client.behaviors.plan()
        #expect(plan.additionalHeaders.isEmpty)
        #expect(plan.beforeSend.isEmpty)
        #expect(plan.validate.isEmpty)
        #expect(plan.modify.map(\.name) == ["CountsModify"])
        #expect(plan.afterSuccess.map(\.name) == ["CountsModify"])
    }

    @Test func aBehaviorThatImplementsEveryHookIsNeverSkipped() async throws {
        let recorder = HookRecorder()
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = makeClient(mock) { RecordingBehavior("spy", recorder: recorder) }
        for _ in 0..<3 { try await client.send(Request<Void>(path: "/x")) }
        #expect(recorder.hooks(of: "spy").count == 15)
        let plan = client.behaviors.plan()
        #expect([plan.additionalHeaders, plan.modify, plan.beforeSend, plan.validate, plan.afterSuccess].allSatisfy { $0.count == 1 })
    }

    @Test func ordersArePreservedInThePlan() async throws {
        let recorder = HookRecorder()
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder)
            NothingEither()
            RecordingBehavior("B", recorder: recorder)
        }
        for _ in 0..<2 { try await client.send(Request<Void>(path: "/x")) }
        let plan = client.behaviors.plan()
        #expect(plan.modify.map(\.name) == ["A", "B"])
        #expect(plan.validate.map(\.name) == ["B", "A"])
        #expect(plan.afterSuccess.map(\.name) == ["B", "A"])
        // afterFailure has not run yet, so it is not known to be a no-op for NothingEither.
        #expect(plan.afterFailure.map(\.name) == ["B", "NothingEither", "A"])

        mock.enqueue(.status(500))
        try? await client.send(Request<Void>(path: "/x"))
        #expect(client.behaviors.plan().afterFailure.map(\.name) == ["B", "A"])
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
        let plan = chain.plan()
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
    struct OnlyOnFailure: RequestBehavior {
        let calls: Locked<Int>
        func afterFailure(_ error: NetworkError, context: RequestContext) async { calls.withLock { $0 += 1 } }
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
        // Teach the registry which hooks OnlyOnFailure leaves at their defaults: one success
        // (validate, afterSuccess) and one failure (retryDecision).
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
        #expect(client.behaviors.plan().modify.map(\.name) == ["A", "B"])

        recorder.reset()
        try await client.send(
            Request<Void>(path: "/x", behaviors: [RecordingBehavior("D", recorder: recorder)]).excluding(.named("A")))
        #expect(recorder.trace == [
            "B.additionalHeaders", "D.additionalHeaders", "B.modify", "D.modify", "B.beforeSend", "D.beforeSend",
            "D.validate", "B.validate", "D.afterSuccess", "B.afterSuccess",
        ])
    }

    @Test func nestedChainsAreFlattenedAndOtherBehaviorsAreNot() {
        let inner = CombinedRequestBehavior([NothingAtAll(), NothingEither()])
        let outer = CombinedRequestBehavior([inner, NothingAtAll()])
        #expect(outer.behaviors.map(\.name) == ["NothingAtAll", "NothingEither", "NothingAtAll"])
        #expect(outer.appending([inner]).behaviors.count == 5)
    }

    /// Its own types, so other tests cannot teach the registry about them first.
    struct SettlingObserver: RequestBehavior {
        let calls: Locked<[String]>
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            calls.withLock { $0.append("afterSuccess") }
        }
        // afterFailure, validate, retryDecision…: defaults, first reached late.
    }
    struct SettlingProbe: RequestBehavior {}

    /// A client's plan follows the registry on every request, however many came before: a default
    /// first reached late (here `afterFailure`, after a hundred successes) is skipped from then on.
    @Test func aClientsPlanLearnsADefaultReachedLate() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let calls = Locked<[String]>([])
        let client = makeClient(mock) {
            SettlingObserver(calls: calls)
            SettlingProbe()
        }
        for _ in 0..<100 { try await client.send(Request<Void>(path: "/x")) }
        #expect(client.behaviors.plan().afterFailure.count == 2)  // no failure seen yet: not learned
        mock.stub(nil, "/api/fail", reply: .status(500))
        do throws(NetworkError) {
            try await client.send(Request<Void>(path: "/fail"))
            Issue.record("a 500 succeeded")
        } catch {
            #expect(error.status == 500)
        }
        // Both members ran their default `afterFailure` once; the same client now skips them.
        #expect(client.behaviors.plan().afterFailure.isEmpty)
        #expect(calls.withLock { $0.count } == 100)
    }
}
