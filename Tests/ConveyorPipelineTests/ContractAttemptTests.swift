import ConveyorTesting
import Foundation
import Testing

/// Contract point 4: per-attempt hooks vs once-per-request hooks, retries on the clock,
/// no retry after cancellation.
@Suite struct ContractAttemptTests {
    @Test func perAttemptHooksRunEachAttemptAndPerRequestHooksOnce() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(503), .failure(URLError(.networkConnectionLost)), .status(200))
        let recorder = HookRecorder()
        let clock = ImmediateClock()
        let client = makeClient(mock, clock: clock) {
            RecordingBehavior("R", recorder: recorder, retry: retryFirst(2, after: .seconds(1)))
        }
        try await client.send(Request<Void>(path: "/x"))
        let events = recorder.events
        #expect(
            events.map(\.description) == [
                "R.additionalHeaders#1", "R.modify#1", "R.beforeSend#1", "R.retryDecision#1",
                "R.additionalHeaders#2", "R.modify#2", "R.retryDecision#2",
                "R.additionalHeaders#3", "R.modify#3", "R.validate#3", "R.afterSuccess#3",
            ])
        #expect(Set(events.map(\.requestID)).count == 1)
        #expect(mock.requests.count == 3)
        #expect(clock.sleeps == [.seconds(1), .seconds(1)])
    }

    @Test func eachAttemptStartsFromTheCallersRequest() async throws {
        struct AppendQuery: RequestModifying {
            func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
                request.url = URL(string: request.url.absoluteString + "&attempt=\(context.attempt)")!
            }
        }
        let mock = MockTransport()
        mock.enqueue(.status(500), .status(200))
        let recorder = HookRecorder()
        let client = makeClient(mock) {
            AppendQuery()
            RecordingBehavior("R", recorder: recorder, retry: retryFirst(1))
        }
        try await client.send(Request<Void>(path: "/x", query: ["a": 1]))
        #expect(mock.requests.map(\.url.query) == ["a=1&attempt=1", "a=1&attempt=2"])
    }

    @Test func theAttemptLimitCapsARetryHappyBehavior() async {
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(503))
        let recorder = HookRecorder()
        let client = makeClient(mock, attemptLimit: 4) {
            RecordingBehavior("R", recorder: recorder, retry: { _, _ in .retryNow })
        }
        do {
            try await client.send(Request<Void>(path: "/x"))
            Issue.record("expected a failure")
        } catch {
            #expect(error.status == 503)
        }
        #expect(mock.requests.count == 4)
        #expect(recorder.hooks(of: "R").filter { $0 == .afterFailure }.count == 1)
    }

    @Test func cancellingDuringABackoffWaitEndsItAtOnceWithoutAnotherAttempt() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(503), .status(200))
        let recorder = HookRecorder()
        let clock = ManualClock()
        let client = makeClient(mock, clock: clock) {
            RecordingBehavior("R", recorder: recorder, retry: retryFirst(5, after: .seconds(30)))
        }
        let task = Task { try await client.send(Request<Void>(path: "/x")) }
        await clock.waitForSleepers(1)  // parked in the 30 s backoff
        task.cancel()
        let result = await failure(of: task)
        guard case .cancelled? = result else {
            Issue.record("expected .cancelled, got \(String(describing: result))")
            return
        }
        #expect(mock.requests.count == 1)
        #expect(clock.now == ManualClock.Instant())  // no time had to pass
        #expect(recorder.hooks(of: "R").filter { $0 == .afterFailure }.count == 1)
        #expect(recorder.events.last?.outcome == .failure(NetworkError.cancelled.description))
    }

    @Test func noRetryIsAskedForAfterCancellation() async throws {
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.delayed(.seconds(5), .status(200)))
        let recorder = HookRecorder()
        let client = makeClient(mock, clock: clock) {
            RecordingBehavior("R", recorder: recorder, retry: { _, _ in .retryNow })
        }
        let task = Task { try await client.send(Request<Void>(path: "/x")) }
        await clock.waitForSleepers(1)  // the transport is in flight
        task.cancel()
        let result = await failure(of: task)
        guard case .cancelled? = result else {
            Issue.record("expected .cancelled, got \(String(describing: result))")
            return
        }
        #expect(!recorder.hooks(of: "R").contains(.retryDecision))
        #expect(mock.requests.count == 1)
    }

    @Test func aTimeoutFiresOnTheInjectedClockAndGoesThroughRetryDecision() async throws {
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.hang, .status(200))
        let recorder = HookRecorder()
        let client = makeClient(mock, clock: clock) {
            RecordingBehavior("R", recorder: recorder, retry: { failure, context in
                failure == .timedOut && context.attempt == 1 ? .retryNow : .doNotRetry
            })
        }
        let task = Task {
            try await client.send(Request<Void>(path: "/slow", timeout: .milliseconds(500)))
        }
        await clock.waitForSleepers(1)  // the timeout timer
        clock.advance(by: .milliseconds(500))
        try await task.value
        #expect(mock.requests.count == 2)
        #expect(recorder.hooks(of: "R") .filter { $0 == .retryDecision }.count == 1)
    }
}

