@testable import ConveyorPipeline
import Conveyor
import ConveyorTesting
import Foundation
import Testing

/// A deadline holds even when the task that sleeps until it is not run on time (a machine busy
/// enough to starve it, as the thread sanitizer's CI pass is): a response that arrives after the
/// deadline is a timeout, before any behavior sees it, so the cache stores nothing and later
/// requests do not get it. Found by `TrickleDeadlineTests` under the sanitizer: a trickle that
/// finished while the timer was starved was stored, and the requests after it were cache hits.
@Suite struct StarvedTimerTests {
    /// A clock whose time moves only when the test says, and whose sleepers never wake by time,
    /// only when cancelled: a timer that is never run.
    struct StarvedTimerClock: Clock {
        typealias Instant = ManualClock.Instant
        let time: ManualClock
        var now: Instant { time.now }
        var minimumResolution: Duration { .nanoseconds(1) }
        func sleep(until deadline: Instant, tolerance: Duration?) async throws {
            // A stream nothing is ever yielded to: iterating it ends only when the task is cancelled.
            let (stream, _) = AsyncStream<Never>.makeStream()
            for await _ in stream {}
            try Task.checkCancellation()
        }
    }

    /// What stands between the client and the transport: nothing (the direct path), a cache (an
    /// `intercept` member), or a circuit breaker (a gate).
    enum Chain: CaseIterable { case direct, cached, gated }

    @Test(arguments: Chain.allCases, [200, 500])
    func aResponseAfterTheDeadlineIsATimeoutEvenIfTheTimerNeverRan(chain: Chain, status: Int) async throws {
        let time = ManualClock()
        let mock = MockTransport()
        let sent = Locked(0)
        mock.stub(nil, "/slow", reply: .handler { _ in
            sent.withLock { $0 += 1 }
            time.advance(by: .seconds(2))  // the response arrives 2 s in, past the 1 s deadline
            return .status(status, headers: ["Cache-Control": "max-age=600", "ETag": "\"v1\""])
        })
        // One failure in a window of one opens the circuit: a late answer must count as one.
        let breaker = CircuitBreaker(options: .init(failureRatio: 1, minimumThroughput: 1), clock: time)
        let client = NetworkClient(
            baseURL: URL(string: "https://api.test")!, transport: mock,
            configuration: .init(timeout: .seconds(1), timeoutClock: StarvedTimerClock(time: time))
        ) {
            if chain == .cached { CacheBehavior(storage: MemoryCacheStorage()) }
            if chain == .gated { CircuitBreakerBehavior(breaker) }
        }
        // A timeout whatever the status: the answer is judged only if it came in time.
        await #expect(throws: NetworkError.timedOut) { try await client.send(Request<Void>(path: "/slow")) }
        if chain == .gated {
            // The gate counted the late answer as the timeout it is, not as the origin answering.
            #expect(breaker.state(of: Origin(URL(string: "https://api.test")!)!) != .closed)
            return
        }
        await #expect(throws: NetworkError.timedOut) { try await client.send(Request<Void>(path: "/slow")) }
        // Nothing was stored: the second request went to the transport too.
        #expect(sent.withLock { $0 } == 2)
    }
}
