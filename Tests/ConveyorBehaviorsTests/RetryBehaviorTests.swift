import ConveyorTesting
import Foundation
import Testing

/// A seeded generator for reproducible jitter.
struct SeededGenerator: RandomNumberGenerator, Sendable {
    var state: UInt64
    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state
    }
}

@Suite struct RetryBehaviorTests {
    func run(
        _ replies: [MockTransport.Reply], method: HTTPMethod = .get, policy: RetryPolicy,
        now: Date = Date(timeIntervalSince1970: 1_800_000_000), extra: [any RequestBehavior] = []
    ) async -> (outcome: String, sleeps: [Duration], attempts: Int, mock: MockTransport) {
        let clock = ImmediateClock()
        let mock = MockTransport()
        for reply in replies { mock.enqueue(reply) }
        let client = makeClient(mock, clock: clock) {
            extra
            RetryBehavior(policy, now: { now })
        }
        let result = await outcome { try await client.send(Request<Void>(method: method, path: "/x")) }
        return (result, clock.sleeps, mock.requests.count, mock)
    }

    @Test func exponentialScheduleIsExact() async {
        let result = await run(
            [.status(503), .status(503), .status(503), .status(200)],
            policy: RetryPolicy(maxAttempts: 4, baseDelay: .seconds(1), multiplier: 2, jitter: .none))
        #expect(result.outcome == "success")
        #expect(result.sleeps == [.seconds(1), .seconds(2), .seconds(4)])
    }

    @Test func delaysAreCappedAndAttemptsLimited() async {
        let result = await run(
            Array(repeating: .status(500), count: 6),
            policy: RetryPolicy(maxAttempts: 5, baseDelay: .seconds(1), multiplier: 3, maxDelay: .seconds(5), jitter: .none))
        #expect(result.outcome == "status 500")
        #expect(result.attempts == 5)
        #expect(result.sleeps == [.seconds(1), .seconds(3), .seconds(5), .seconds(5)])
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504])
    func retryableStatusesAreRetried(status: Int) async {
        let result = await run([.status(status), .status(200)], policy: .exponentialBackoff(jitter: .none))
        #expect(result.outcome == "success")
    }

    @Test(arguments: [400, 401, 403, 404, 409, 422, 501])
    func otherStatusesAreNot(status: Int) async {
        let result = await run([.status(status), .status(200)], policy: .exponentialBackoff(jitter: .none))
        #expect(result.attempts == 1)
    }

    @Test(arguments: [URLError.Code.timedOut, .networkConnectionLost, .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed])
    func transientTransportErrorsAreRetried(code: URLError.Code) async {
        let result = await run([.failure(URLError(code)), .status(200)], policy: .exponentialBackoff(jitter: .none))
        #expect(result.outcome == "success")
    }

    @Test func offlineAndCancelledAreNotRetried() async {
        #expect(await run([.failure(URLError(.notConnectedToInternet)), .status(200)], policy: .exponentialBackoff()).attempts == 1)
        #expect(await run([.failure(URLError(.badServerResponse)), .status(200)], policy: .exponentialBackoff()).attempts == 1)
    }

    @Test func nonIdempotentMethodsAreNotRetriedWithoutAKey() async {
        for method in [HTTPMethod.post, .patch] {
            let result = await run([.status(503), .status(200)], method: method, policy: .exponentialBackoff(jitter: .none))
            #expect(result.outcome == "status 503")
        }
        for method in [HTTPMethod.put, .delete, .head, .options] {
            let result = await run([.status(503), .status(200)], method: method, policy: .exponentialBackoff(jitter: .none))
            #expect(result.outcome == "success")
        }
    }

    @Test func aPostWithAnIdempotencyKeyIsRetriedWithTheSameKey() async {
        let keys = Locked(0)
        let result = await run(
            [.status(503), .status(502), .status(200)], method: .post, policy: .exponentialBackoff(jitter: .none),
            extra: [IdempotencyKeyBehavior(makeKey: { "key-\(keys.withLock { $0 += 1; return $0 })" })])
        #expect(result.outcome == "success")
        #expect(result.mock.requests.map { $0.headers["Idempotency-Key"] } == ["key-1", "key-1", "key-1"])
    }

    @Test func retryAfterInSecondsIsHonoured() async {
        let result = await run(
            [.status(429, headers: ["Retry-After": "7"]), .status(200)], policy: .exponentialBackoff(jitter: .none))
        #expect(result.sleeps == [.seconds(7)])
    }

    /// Issue 56 (one jitter rule): a server's `Retry-After` was waited exactly, so every client
    /// it sent away came back at the same instant. Now it is a floor spread upward by the policy's
    /// jitter: never sooner, at most a fifth later, and spread (full jitter, the default).
    @Test func aRetryAfterIsAFloorSpreadUpward() async {
        let policy = RetryPolicy.exponentialBackoff(maxAttempts: 2, jitter: .full(using: SeededGenerator(state: 56)))
        var waits: [Duration] = []
        for _ in 0..<100 {
            let result = await run([.status(503, headers: ["Retry-After": "7"]), .status(200)], policy: policy)
            #expect(result.outcome == "success")
            waits += result.sleeps
        }
        #expect(waits.count == 100)
        #expect(waits.allSatisfy { $0 >= .seconds(7) && $0 <= .milliseconds(8400) })
        #expect(Set(waits).count == 100, "the clients came back together")
        #expect(waits.min()! < .milliseconds(7200) && waits.max()! > .milliseconds(8200))

        // Equal jitter takes off at most half: up to a tenth later. None: exactly the wait.
        let equal = RetryPolicy(jitter: .equal(using: SeededGenerator(state: 1)))
        #expect((0..<200).map { _ in equal.delay(retryAfter: .seconds(10)) }.allSatisfy { $0 >= .seconds(10) && $0 <= .seconds(11) })
        #expect(RetryPolicy(jitter: .none).delay(retryAfter: .seconds(7)) == .seconds(7))
        // A jitter that lengthens the delay or returns garbage never shortens a server's wait.
        #expect(RetryPolicy(jitter: Jitter { $0 * 5 }).delay(retryAfter: .seconds(7)) == .seconds(7))
        #expect(RetryPolicy(jitter: Jitter { _ in .seconds(-3) }).delay(retryAfter: .seconds(7)) == .milliseconds(8400))
        #expect(RetryPolicy().delay(retryAfter: .zero) == .zero)
    }

    /// `maxRetryAfter` judges the server's value; a value within it is spread above it like any
    /// other (the longest wait is a fifth over `maxRetryAfter`), a longer one ends the retries.
    @Test func maxRetryAfterJudgesTheServersValueBeforeTheSpread() async {
        let policy = RetryPolicy(maxAttempts: 2, jitter: .full(using: SeededGenerator(state: 9)), maxRetryAfter: .seconds(60))
        let atMost = await run([.status(503, headers: ["Retry-After": "60"]), .status(200)], policy: policy)
        #expect(atMost.outcome == "success")
        #expect(atMost.sleeps.count == 1 && atMost.sleeps[0] >= .seconds(60) && atMost.sleeps[0] <= .seconds(72))
        let over = await run([.status(503, headers: ["Retry-After": "61"]), .status(200)], policy: policy)
        #expect(over.outcome == "status 503" && over.sleeps.isEmpty)
    }

    @Test func retryAfterAsAnHTTPDateIsHonoured() async {
        let now = Date(timeIntervalSince1970: 1_800_000_000)  // Fri, 15 Jan 2027 08:00:00 GMT
        let result = await run(
            [.status(503, headers: ["Retry-After": "Fri, 15 Jan 2027 08:00:30 GMT"]), .status(200)],
            policy: .exponentialBackoff(jitter: .none), now: now)
        #expect(result.sleeps == [.seconds(30)])
    }

    @Test func aRetryAfterBeyondTheCapEndsTheRetries() async {
        let year = "31536000"
        let result = await run([.status(503, headers: ["Retry-After": year]), .status(200)], policy: .exponentialBackoff())
        #expect(result.outcome == "status 503")
        #expect(result.sleeps.isEmpty)
        let huge = await run([.status(503, headers: ["Retry-After": "99999999999999999999999"]), .status(200)], policy: .exponentialBackoff())
        #expect(huge.outcome == "status 503")
    }

    @Test(arguments: ["-5", "soon", "", "Mon, 99 Foo 2027 99:99:99 GMT"])
    func aNegativeOrInvalidRetryAfterIsIgnored(value: String) async {
        let result = await run(
            [.status(503, headers: ["Retry-After": value]), .status(200)], policy: .exponentialBackoff(jitter: .none))
        #expect(result.outcome == "success")
        #expect(result.sleeps == [.seconds(1)])
    }

    @Test func aRetryAfterDateInThePastMeansNow() async {
        let result = await run(
            [.status(503, headers: ["Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT"]), .status(200)],
            policy: .exponentialBackoff(jitter: .none))
        #expect(result.sleeps == [])  // .retry(after: .zero) does not sleep
        #expect(result.outcome == "success")
    }

    @Test func seededJitterIsReproducibleAndWithinBounds() {
        let policy = { RetryPolicy(maxAttempts: 6, baseDelay: .seconds(1), jitter: .full(using: SeededGenerator(state: 42))) }
        let a = policy()
        let b = policy()
        let first = (1...5).map { a.delay(beforeRetry: $0) }
        let second = (1...5).map { b.delay(beforeRetry: $0) }
        #expect(first == second)
        for (index, delay) in first.enumerated() {
            #expect(delay >= .zero && delay <= .seconds(1) * Int(pow(2.0, Double(index))))
        }
        #expect(Set(first).count > 1)
        let equal = RetryPolicy(baseDelay: .seconds(4), jitter: .equal(using: SeededGenerator(state: 1))).delay(beforeRetry: 1)
        #expect(equal >= .seconds(2) && equal <= .seconds(4))
    }

    @Test func cancellationDuringBackoffStopsRetrying() async {
        let clock = ManualClock()
        let mock = MockTransport()
        mock.enqueue(.status(503), .status(200))
        let client = makeClient(mock, clock: clock) { RetryBehavior(.exponentialBackoff(jitter: .none)) }
        let task = Task { await outcome { try await client.send(Request<Void>(path: "/x")) } }
        await clock.waitForSleepers(1)
        task.cancel()
        #expect(await task.value == "cancelled")
        #expect(mock.requests.count == 1)
    }
}

@Suite struct RetryAfterParsingTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func parsesAllThreeHTTPDateForms() {
        #expect(RetryAfter.delay(from: "Fri, 15 Jan 2027 08:01:00 GMT", now: now) == .seconds(60))
        #expect(RetryAfter.delay(from: "Friday, 15-Jan-27 08:01:00 GMT", now: now) == .seconds(60))
        #expect(RetryAfter.delay(from: "Fri Jan 15 08:01:00 2027", now: now) == .seconds(60))
        #expect(RetryAfter.delay(from: " 120 ", now: now) == .seconds(120))
        #expect(RetryAfter.delay(from: "1.5", now: now) == nil)
    }
}
