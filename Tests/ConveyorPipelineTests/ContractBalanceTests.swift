import ConveyorTesting
import Foundation
import Testing

/// Contract point 5: every behavior whose beforeSend ran gets exactly one afterSuccess or
/// afterFailure, whatever went wrong.
@Suite struct ContractBalanceTests {
    struct Movie: Codable, Equatable { var id: Int }

    /// Runs one request through three recording behaviors and returns the recorder and the error.
    func run(
        _ mock: MockTransport, clock: any Clock<Duration> = ImmediateClock(),
        failing: (label: String, hooks: Set<RequestHook>)? = nil, retries: Int = 0,
        request: Request<Movie> = Request<Movie>(path: "/movie")
    ) async -> (HookRecorder, NetworkError?) {
        let recorder = HookRecorder()
        let client = makeClient(mock, clock: clock) {
            for label in ["A", "B", "C"] {
                RecordingBehavior(
                    label, recorder: recorder, failing: failing?.label == label ? failing?.hooks ?? [] : [],
                    retry: retryFirst(retries))
            }
        }
        do {
            _ = try await client.send(request)
            return (recorder, nil)
        } catch {
            return (recorder, error)
        }
    }

    let labels = ["A", "B", "C"]

    @Test func transportThrows() async {
        let mock = MockTransport()
        mock.enqueue(.failure(URLError(.cannotConnectToHost)))
        let (recorder, error) = await run(mock)
        guard case .connectionFailed = error else {
            Issue.record("unexpected \(String(describing: error))")
            return
        }
        #expect(recorder.isBalanced(labels: labels))
        #expect(recorder.hooks(of: "A").last == .afterFailure)
    }

    @Test func statusIsNotAcceptable() async {
        let mock = MockTransport()
        mock.enqueue(.text("nope", status: 404))
        let (recorder, error) = await run(mock)
        guard case .notFound = error, let response = error?.response else {
            Issue.record("unexpected \(String(describing: error))")
            return
        }
        #expect(String(decoding: response.body, as: UTF8.self) == "nope")
        #expect(recorder.isBalanced(labels: labels))
    }

    @Test func decodingFails() async {
        let mock = MockTransport()
        mock.enqueue(.text(#"{"id": "#))
        let (recorder, error) = await run(mock)
        guard case .decodingFailed = error, let response = error?.response else {
            Issue.record("unexpected \(String(describing: error))")
            return
        }
        #expect(response.body == Data(#"{"id": "#.utf8))
        #expect(recorder.isBalanced(labels: labels))
        #expect(!recorder.hooks(of: "C").contains(.afterSuccess))
    }

    @Test(arguments: [RequestHook.validate])
    func aBehaviorThrowsOnTheResponseSide(hook: RequestHook) async {
        let mock = MockTransport()
        mock.enqueue(.json(Movie(id: 1)))
        let (recorder, error) = await run(mock, failing: ("B", [hook]))
        guard case .behaviorFailed = error, error?.behavior == "B", error?.hook == hook else {
            Issue.record("unexpected \(String(describing: error))")
            return
        }
        #expect(recorder.isBalanced(labels: labels))
    }

    @Test func aBehaviorThrowsWhilePreparingTheFirstAttempt() async {
        let mock = MockTransport()
        let (recorder, error) = await run(mock, failing: ("B", [.modify]))
        guard case .behaviorFailed = error, error?.behavior == "B", error?.hook == .modify else {
            Issue.record("unexpected \(String(describing: error))")
            return
        }
        // Nothing was sent and no beforeSend ran, so no afterFailure either.
        #expect(mock.requests.isEmpty)
        #expect(recorder.trace == ["A.additionalHeaders", "B.additionalHeaders", "C.additionalHeaders", "A.modify", "B.modify"])
        #expect(recorder.isBalanced(labels: labels))
    }

    @Test func aBehaviorThrowsWhilePreparingARetry() async {
        // B throws in additionalHeaders on attempt 2 only: beforeSend ran, so afterFailure must follow.
        struct FailOnRetry: HeaderAdding {
            func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
                if context.attempt > 1 { throw URLError(.userAuthenticationRequired) }
                return [:]
            }
        }
        let mock = MockTransport()
        mock.enqueue(.status(500))
        let recorder = HookRecorder()
        let client = makeClient(mock) {
            RecordingBehavior("A", recorder: recorder, retry: retryFirst(1))
            FailOnRetry()
            RecordingBehavior("C", recorder: recorder)
        }
        do {
            try await client.send(Request<Void>(path: "/x"))
            Issue.record("expected a failure")
        } catch {
            guard case .behaviorFailed = error, error.behavior == "FailOnRetry", error.hook == .additionalHeaders else {
                Issue.record("unexpected \(error)")
                return
            }
        }
        #expect(mock.requests.count == 1)
        #expect(recorder.isBalanced(labels: ["A", "C"]))
        #expect(recorder.hooks(of: "A").last == .afterFailure)
    }

    @Test func theTaskIsCancelledMidFlight() async {
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.delayed(.seconds(10), .json(Movie(id: 1))))
        let recorder = HookRecorder()
        let client = makeClient(mock, clock: clock) {
            RecordingBehavior("A", recorder: recorder, retry: { _, _ in .retryNow })
            RecordingBehavior("B", recorder: recorder)
        }
        let task = Task { try await client.send(Request<Movie>(path: "/m")) }
        await clock.waitForSleepers(1)
        task.cancel()
        let result = await failure(of: task)
        guard case .cancelled? = result else {
            Issue.record("expected .cancelled, got \(String(describing: result))")
            return
        }
        #expect(recorder.isBalanced(labels: ["A", "B"]))
        #expect(recorder.hooks(of: "A").last == .afterFailure)
        #expect(recorder.events.filter { $0.hook == .afterFailure }.map(\.label) == ["B", "A"])
    }

    @Test func cancelledBeforeTheFirstAttemptSendsNothing() async {
        let mock = MockTransport()
        mock.enqueue(.status(200))
        let recorder = HookRecorder()
        let client = makeClient(mock) { RecordingBehavior("A", recorder: recorder) }
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await client.send(Request<Void>(path: "/x"))
        }
        let result = await failure(of: task)
        guard case .cancelled? = result else {
            Issue.record("expected .cancelled, got \(String(describing: result))")
            return
        }
        #expect(mock.requests.isEmpty)
        #expect(recorder.isBalanced(labels: ["A"]))
    }

    @Test func contextCancelInterruptsAnInterruptibleRequest() async {
        struct CancelFromOutside: SendObserving {
            let handle: Locked<RequestContext?>
            func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
                context.makeInterruptible()
                handle.withLock { $0 = context }
            }
        }
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.delayed(.seconds(60), .status(200)))
        let recorder = HookRecorder()
        let handle = Locked<RequestContext?>(nil)
        let client = makeClient(mock, clock: clock) {
            RecordingBehavior("A", recorder: recorder, retry: { _, _ in .retryNow })
            CancelFromOutside(handle: handle)
        }
        let task = Task { try await client.send(Request<Void>(path: "/x")) }
        await clock.waitForSleepers(1)
        handle.withLock { $0 }?.cancel()  // e.g. a background task expired
        let result = await failure(of: task)
        guard case .cancelled? = result else {
            Issue.record("expected .cancelled, got \(String(describing: result))")
            return
        }
        #expect(recorder.isBalanced(labels: ["A"]))
        #expect(!recorder.hooks(of: "A").contains(.retryDecision))
    }
}
