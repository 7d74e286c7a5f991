import ConveyorTesting
import Foundation
import Testing

@Suite struct ActivityCounterTests {
    @Test func reportsTransitionsAndNeverGoesNegative() async {
        let transitions = Locked<[Bool]>([])
        let counter = NetworkActivityCounter { active in transitions.withLock { $0.append(active) } }
        await counter.increment()
        await counter.increment()
        await counter.decrement()
        await counter.decrement()
        await counter.decrement()  // extra: ignored
        #expect(counter.count == 0)
        #expect(transitions.withLock { $0 } == [true, false])
    }

    @Test func returnsToZeroAfterRetriesFailuresAndCancellation() async {
        let transitions = Locked<[Bool]>([])
        let counter = NetworkActivityCounter { active in transitions.withLock { $0.append(active) } }
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/v1/ok", reply: .status(200))
        mock.stub(nil, "/v1/down", reply: .status(503))
        mock.stub(nil, "/v1/slow", reply: .delayed(.seconds(60), .status(200)))
        let client = makeClient(mock, clock: clock) {
            ActivityCounterBehavior(counter: counter)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
        }
        #expect(await outcome { try await client.send(Request<Void>(path: "/ok")) } == "success")
        let failing = Task { await outcome { try await client.send(Request<Void>(path: "/down")) } }
        for _ in 0..<2 {  // two backoff waits
            await clock.waitForSleepers(1)
            #expect(counter.count == 1)  // still counted while waiting to retry
            clock.advanceToNextDeadline()
        }
        #expect(await failing.value == "status 503")
        let slow = Task { await outcome { try await client.send(Request<Void>(path: "/slow")) } }
        await clock.waitForSleepers(1)
        slow.cancel()
        #expect(await slow.value == "cancelled")
        #expect(counter.count == 0)
        #expect(transitions.withLock { $0 } == [true, false, true, false, true, false])
    }

    @Test func keepsTheContract() async {
        let counter = NetworkActivityCounter()
        let violations = await BehaviorContractCheck(ActivityCounterBehavior(counter: counter)) { counter.count }.run()
        #expect(violations.isEmpty, "\(violations)")
    }
}

/// Records begun and ended tasks; can expire a task on demand.
final class FakeTaskRunner: BackgroundTaskRunner {
    struct State {
        var next = 0
        var open: [Int: @Sendable () -> Void] = [:]
        var begun: [Int] = []
        var ended: [Int] = []
    }
    let state = Locked(State())

    func beginTask(named name: String, onExpiration: @escaping @Sendable () -> Void) async -> BackgroundTaskID? {
        let id = state.withLock { state in
            state.next += 1
            state.open[state.next] = onExpiration
            state.begun.append(state.next)
            return state.next
        }
        return BackgroundTaskID(rawValue: id)
    }

    func endTask(_ id: BackgroundTaskID) async {
        state.withLock { state in
            state.open[id.rawValue] = nil
            state.ended.append(id.rawValue)
        }
    }

    /// The system runs out of time for every open task.
    func expireAll() {
        let handlers = state.withLock { Array($0.open.values) }
        handlers.forEach { $0() }
    }

    var openIDs: Set<Int> { state.withLock { Set($0.open.keys) } }
}

@Suite struct BackgroundTaskBehaviorTests {
    @Test func oneTaskSpansAllRetriesAndEndsOnce() async {
        let runner = FakeTaskRunner()
        let mock = MockTransport()
        mock.enqueue(.status(503), .status(503), .status(200))
        let client = makeClient(mock) {
            BackgroundTaskBehavior(runner: runner)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
        }
        #expect(await outcome { try await client.send(Request<Void>(path: "/x")) } == "success")
        #expect(runner.state.withLock { $0.begun } == [1])
        #expect(runner.state.withLock { $0.ended } == [1])
    }

    @Test func concurrentRequestsEachEndTheirOwnTask() async {
        let runner = FakeTaskRunner()
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.request(.get, "/v1/a"), reply: .delayed(.seconds(2), .status(200)))
        mock.enqueue(.request(.get, "/v1/b"), reply: .delayed(.seconds(1), .status(200)))
        let client = makeClient(mock, clock: clock) { BackgroundTaskBehavior(runner: runner) }
        let first = Task { await outcome { try await client.send(Request<Void>(path: "/a")) } }
        await clock.waitForSleepers(1)
        let second = Task { await outcome { try await client.send(Request<Void>(path: "/b")) } }
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(1))  // b (task 2) finishes first
        #expect(await second.value == "success")
        #expect(runner.state.withLock { $0.ended } == [2])
        clock.advance(by: .seconds(1))
        #expect(await first.value == "success")
        #expect(runner.state.withLock { $0.ended } == [2, 1])
        #expect(runner.openIDs.isEmpty)
    }

    @Test func byDefaultExpirationInterruptsTheAttemptInFlightAndEndsTheTaskOnce() async {
        let runner = FakeTaskRunner()
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.delayed(.seconds(600), .status(200)))
        let client = makeClient(mock, clock: clock) {
            BackgroundTaskBehavior(runner: runner)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
        }
        let task = Task { await outcome { try await client.send(Request<Void>(path: "/upload")) } }
        await clock.waitForSleepers(1)  // in flight
        runner.expireAll()
        #expect(await task.value == "cancelled")
        #expect(runner.state.withLock { $0.ended } == [1])
        #expect(mock.requests.count == 1)  // no retry after the expiration
    }

    @Test func withoutInFlightInterruptionExpirationStopsTheRequestAtItsNextStep() async {
        let runner = FakeTaskRunner()
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.delayed(.seconds(5), .status(503)), .status(200))
        let client = makeClient(mock, clock: clock) {
            BackgroundTaskBehavior(runner: runner, interruptsInFlightAttempt: false)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
        }
        let task = Task { await outcome { try await client.send(Request<Void>(path: "/upload")) } }
        await clock.waitForSleepers(1)  // attempt 1 in flight
        runner.expireAll()
        clock.advance(by: .seconds(5))  // the attempt finishes on its own with a 503…
        #expect(await task.value == "cancelled")  // …and no retry follows
        #expect(mock.requests.count == 1)
        #expect(runner.state.withLock { $0.ended } == [1])
    }

    /// Expiry at 0.1 s during a `Retry-After: 5` wait used to end the request at 5 s.
    @Test(arguments: [true, false])
    func expiryDuringARetryWaitEndsTheRequestAtOnce(interrupting: Bool) async {
        let runner = FakeTaskRunner()
        let clock = ManualClock()
        let mock = MockTransport()
        mock.enqueue(.status(503, headers: ["Retry-After": "5"]), .status(200))
        let client = makeClient(mock, clock: clock) {
            BackgroundTaskBehavior(runner: runner, interruptsInFlightAttempt: interrupting)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
        }
        let task = Task { await outcome { try await client.send(Request<Void>(path: "/upload")) } }
        await clock.waitForSleepers(1)  // the 5 s backoff wait has begun
        #expect(clock.sleeps == [.seconds(5)])
        runner.expireAll()
        #expect(await task.value == "cancelled")
        #expect(clock.now == ManualClock.Instant(), "the request ended without the clock moving")
        #expect(mock.requests.count == 1)
        #expect(runner.state.withLock { $0.ended } == [1])
    }

    @Test func keepsTheContract() async {
        let runner = FakeTaskRunner()
        let violations = await BehaviorContractCheck(BackgroundTaskBehavior(runner: runner)) { runner.openIDs }.run()
        #expect(violations.isEmpty, "\(violations)")
    }
}

/// A spinner on the main actor, as an app binds one.
@MainActor final class SpinnerModel {
    var isSpinning = false
    var transitions: [Bool] = []
}

@Suite struct MainActorActivityCounterTests {
    /// Waves of requests that overlap, succeed, fail, retry and are cancelled while in flight or
    /// in a backoff wait: the model sees busy and idle alternate, in order, and ends idle.
    @Test func aMainActorModelSeesBusyAndIdleInOrder() async {
        let model = await MainActor.run { SpinnerModel() }
        let counter = MainActorActivityCounter { busy in
            model.isSpinning = busy
            model.transitions.append(busy)
        }
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/v1/ok", reply: .status(200))
        mock.stub(nil, "/v1/down", reply: .status(503))
        mock.stub(nil, "/v1/slow", reply: .delayed(.seconds(60), .status(200)))
        let client = makeClient(mock, clock: clock) {
            ActivityCounterBehavior(counter: counter)
            RetryBehavior(.exponentialBackoff(maxAttempts: 2, jitter: .none))
        }
        for wave in 0..<8 {
            // Two slow requests wait in the transport, one failing request waits to retry.
            let slow = (0..<2).map { _ in Task { await outcome { try await client.send(Request<Void>(path: "/slow")) } } }
            let down = Task { await outcome { try await client.send(Request<Void>(path: "/down")) } }
            await clock.waitForSleepers(3)
            let (spinning, count) = await (model.isSpinning, counter.count)
            #expect(spinning && count == 3, "wave \(wave)")
            // Quick requests start and end while the others are in flight: no transition.
            for _ in 0..<3 { _ = await outcome { try await client.send(Request<Void>(path: "/ok")) } }
            #expect(await model.isSpinning)
            if wave.isMultiple(of: 2) {
                slow[0].cancel()
                #expect(await slow[0].value == "cancelled")
                clock.advance(by: .seconds(60))  // the other slow one answers, the retry goes out
            } else {
                down.cancel()  // cancelled in its backoff wait
                clock.advance(by: .seconds(60))
            }
            for task in slow { _ = await task.value }
            _ = await down.value
            let (spinningAfter, countAfter) = await (model.isSpinning, counter.count)
            #expect(!spinningAfter && countAfter == 0, "wave \(wave)")
        }
        #expect(await model.transitions == Array(repeating: [true, false], count: 8).flatMap { $0 })
    }

    @Test func itKeepsTheContract() async {
        let counter = MainActorActivityCounter()
        let violations = await BehaviorContractCheck(ActivityCounterBehavior(counter: counter)) {
            await counter.count
        }.run()
        #expect(violations.isEmpty, "\(violations)")
    }
}
