import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@testable import ConveyorPipeline

/// ``DeadlineTimer``: one dispatch timer for every step deadline on the system clocks. It calls
/// each target when its deadline comes, earliest first whatever the order they were scheduled in,
/// never calls a target that is done, and holds about twice the pending deadlines at most however
/// many steps ended before theirs (contract rule 13).
@Suite struct DeadlineTimerTests {
    /// A target that records its call and can be marked done.
    final class Target: DeadlineTimerTarget {
        private let state = Locked((fired: false, done: false, waiter: CheckedContinuation<Void, Never>?.none))
        func deadlineTimerFired() {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.fired = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
        var deadlineTimerIsDone: Bool { state.withLock { $0.done } }
        var fired: Bool { state.withLock { $0.fired } }
        func markDone() { state.withLock { $0.done = true } }
        /// Returns once the target was called.
        func waitUntilFired() async {
            await withCheckedContinuation { continuation in
                let already = state.withLock { state -> Bool in
                    if state.fired { return true }
                    state.waiter = continuation
                    return false
                }
                if already { continuation.resume() }
            }
        }
    }

    @Test func anEarlierDeadlineScheduledLaterComesFirst() async {
        let timer = DeadlineTimer()
        let late = Target()
        let early = Target()
        timer.schedule(late, after: .seconds(600))
        timer.schedule(early, after: .milliseconds(5))
        let fired = await withinTimeLimit(seconds: hangBound) {
            await early.waitUntilFired()
            return true
        }
        #expect(fired != nil, "the earlier deadline never came")
        #expect(!late.fired && timer.firedCount == 1 && timer.entryCount == 1)
    }

    @Test func aTargetThatIsDoneIsNotCalled() async {
        let timer = DeadlineTimer()
        let done = Target()
        let live = Target()
        timer.schedule(done, after: .milliseconds(1))
        timer.schedule(live, after: .milliseconds(20))
        done.markDone()
        timer.cancel()
        let fired = await withinTimeLimit(seconds: hangBound) {
            await live.waitUntilFired()
            return true
        }
        #expect(fired != nil)
        #expect(!done.fired && timer.firedCount == 1 && timer.entryCount == 0)
    }

    /// 10,000 steps that end long before their 600 s deadline leave at most 128 entries, and a
    /// deadline scheduled among them still comes.
    @Test func stepsThatEndedEarlyLeaveNoEntriesBehind() async {
        let timer = DeadlineTimer()
        let live = Target()
        var most = 0
        for index in 0..<10_000 {
            let target = Target()
            timer.schedule(target, after: .seconds(600))
            if index == 5_000 { timer.schedule(live, after: .milliseconds(20)) }
            target.markDone()
            timer.cancel()
            most = max(most, timer.entryCount)
        }
        #expect(most <= 2 * 1 + 128, "\(most) entries at most")
        let fired = await withinTimeLimit(seconds: hangBound) {
            await live.waitUntilFired()
            return true
        }
        #expect(fired != nil, "a live deadline was lost in a compaction")
    }

    /// A request's timeout on the system clock comes through the shared timer (no task sleeps on
    /// it), and ends an attempt whose transport hangs with `.timedOut`.
    @Test func aTimeoutOnTheSystemClockComesThroughTheSharedTimer() async throws {
        let mock = MockTransport()
        mock.stub(
            nil, "/hang",
            reply: .handler { _ in
                try? await hangUntilCancelled()
                return .status(200)
            })
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/")!, transport: mock,
            configuration: .init(timeout: .milliseconds(50), timeoutClock: ContinuousClock()))
        let before = DeadlineTimer.shared.firedCount
        let error = await withinTimeLimit(seconds: hangBound) {
            do throws(NetworkError) {
                try await client.send(Request<Void>(path: "/hang"))
                return NetworkError?.none
            } catch {
                return error
            }
        }
        #expect(error == .some(.timedOut))
        #expect(DeadlineTimer.shared.firedCount > before)
    }

    /// A step that ended holds its entry in the timer until the entry is dropped, but not its
    /// result: a response's body is freed when the caller is done with it, not at the deadline.
    @Test func aFinishedStepDoesNotHoldItsResultUntilItsDeadline() async {
        final class Body: Sendable {}
        weak var body: Body?
        do {
            let (outcome, _, _) = await GuardedStep<Body>.run(
                deadline: Deadline(after: .seconds(600), on: ContinuousClock()), cancelledBy: nil
            ) { _ in
                await Task.yield()  // the step waits, so its deadline is scheduled
                return Body()
            }
            guard case .finished(let value) = outcome else { return #expect(Bool(false), "\(outcome)") }
            body = value
        }
        // The worker task lets go of its value when it ends, which may be just after the step.
        for _ in 0..<10_000 where body != nil { await Task.yield() }
        #expect(body == nil, "the step's result outlived its run")
    }

    /// Requests with a timeout that answer before it leave no timers behind: 2,000 of them
    /// (a transport that suspends, so every deadline is scheduled) leave the shared heap far below
    /// one entry per request. (Before, each left a sleeping task's timer until its deadline.)
    @Test func answeredRequestsLeaveNoTimersBehind() async throws {
        let mock = MockTransport()
        mock.stub(
            nil, "/x",
            reply: .handler { _ in
                await Task.yield()
                return .status(200)
            })
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/")!, transport: mock,
            configuration: .init(timeout: .seconds(600), timeoutClock: ContinuousClock()))
        for _ in 0..<2_000 { try await client.send(Request<Void>(path: "/x")) }
        // Other suites' steps share the heap; without the bound it would hold 2,000 or more.
        #expect(DeadlineTimer.shared.entryCount < 600)
    }
}
