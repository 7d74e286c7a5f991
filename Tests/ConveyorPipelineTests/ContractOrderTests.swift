import ConveyorTesting
import Foundation
import Testing

/// Contract points 1 and 2: one chain (client then request behaviors), request side first to
/// last, response side last to first.
@Suite struct ContractOrderTests {
    @Test func successRunsRequestSideForwardAndResponseSideBackward() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(200))
        let recorder = HookRecorder()
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder)
            RecordingBehavior("B", recorder: recorder)
        }
        try await client.send(Request<Void>(path: "/x"), behaviors: [RecordingBehavior("C", recorder: recorder)])
        #expect(
            recorder.trace == [
                "A.additionalHeaders", "B.additionalHeaders", "C.additionalHeaders",
                "A.modify", "B.modify", "C.modify",
                "A.beforeSend", "B.beforeSend", "C.beforeSend",
                "C.validate", "B.validate", "A.validate",
                "C.afterSuccess", "B.afterSuccess", "A.afterSuccess",
            ])
    }

    @Test func failureRunsRetryDecisionForwardAndAfterFailureBackward() async {
        let mock = MockTransport()
        mock.enqueue(.status(500))
        let recorder = HookRecorder()
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder)
            RecordingBehavior("B", recorder: recorder)
        }
        await #expect(throws: NetworkError.self) { try await client.send(Request<Void>(path: "/x")) }
        #expect(
            recorder.trace == [
                "A.additionalHeaders", "B.additionalHeaders", "A.modify", "B.modify", "A.beforeSend", "B.beforeSend",
                "A.retryDecision", "B.retryDecision", "B.afterFailure", "A.afterFailure",
            ])
    }

    @Test func validateRunsLastToFirstAndTheFirstThrowStopsTheRest() async {
        let mock = MockTransport()
        mock.enqueue(.status(200))
        let recorder = HookRecorder()
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder)
            RecordingBehavior("B", recorder: recorder, failing: [.validate])
            RecordingBehavior("C", recorder: recorder)
        }
        do {
            try await client.send(Request<Void>(path: "/x"))
            Issue.record("validate should have failed the request")
        } catch {
            guard case .behaviorFailed = error, error.behavior == "B", error.hook == .validate else {
                Issue.record("unexpected \(error)")
                return
            }
        }
        #expect(recorder.events.filter { $0.hook == .validate }.map(\.label) == ["C", "B"])
        #expect(recorder.isBalanced(labels: ["A", "B", "C"]))
    }
}
