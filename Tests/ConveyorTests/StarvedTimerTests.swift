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

    @Test(arguments: [false, true])
    func aResponseAfterTheDeadlineIsATimeoutEvenIfTheTimerNeverRan(cached: Bool) async throws {
        let time = ManualClock()
        let mock = MockTransport()
        let sent = Locked(0)
        mock.stub(nil, "/slow", reply: .handler { _ in
            sent.withLock { $0 += 1 }
            time.advance(by: .seconds(2))  // the response arrives 2 s in, past the 1 s deadline
            return .status(200, headers: ["Cache-Control": "max-age=600", "ETag": "\"v1\""])
        })
        let client = NetworkClient(
            baseURL: URL(string: "https://api.test")!, transport: mock,
            configuration: .init(timeout: .seconds(1), timeoutClock: StarvedTimerClock(time: time))
        ) {
            if cached { CacheBehavior(storage: MemoryCacheStorage()) }
        }
        for _ in 0..<2 {
            await #expect(throws: NetworkError.timedOut) { try await client.send(Request<Void>(path: "/slow")) }
        }
        // Nothing was stored: the second request went to the transport too.
        #expect(sent.withLock { $0 } == 2)
    }
}
