@testable import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// What a response announces about its origin's quota, in every form `AnnouncedRateLimit` reads.
@Suite struct AnnouncedRateLimitTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    func parse(_ fields: [(String, String)], status: Int = 200) -> AnnouncedRateLimit? {
        var headers = HTTPHeaders()
        for (name, value) in fields { headers.add(name: name, value: value) }
        return AnnouncedRateLimit.parse(status: status, headers: headers, now: Self.now)
    }

    @Test func theIETFDraftsForms() {
        #expect(parse([("RateLimit", #""default";r=50;t=30"#)]) == .init(remaining: 50, reset: .seconds(30)))
        // One member per policy: the one with the fewest remaining counts; its limit from the policy.
        #expect(
            parse([
                ("RateLimit", #""hour";r=400;t=3000, "minute";r=2;t=20"#),
                ("RateLimit-Policy", #""hour";q=5000;w=3600, "minute";q=100;w=60"#),
            ]) == .init(remaining: 2, reset: .seconds(20), limit: 100))
        // The earlier form: one key=value per member.
        #expect(parse([("RateLimit", "limit=100, remaining=7, reset=12")]) == .init(remaining: 7, reset: .seconds(12), limit: 100))
        // The first drafts' separate fields.
        #expect(
            parse([("RateLimit-Limit", "10"), ("RateLimit-Remaining", "0"), ("RateLimit-Reset", "5")])
                == .init(remaining: 0, reset: .seconds(5), limit: 10))
    }

    @Test func theXRateLimitForms() {
        // GitHub: the reset is a Unix time.
        #expect(
            parse([
                ("X-RateLimit-Limit", "5000"), ("X-RateLimit-Remaining", "4999"), ("X-RateLimit-Reset", "1800000600"),
            ]) == .init(remaining: 4999, reset: .seconds(600), limit: 5000))
        // Reddit: decimals, the reset in seconds.
        #expect(parse([("X-Ratelimit-Remaining", "598.0"), ("X-Ratelimit-Reset", "372")]) == .init(remaining: 598, reset: .seconds(372)))
        // Discord: a Unix time with milliseconds.
        #expect(
            parse([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "1800000001.250")])
                == .init(remaining: 0, reset: .milliseconds(1_250)))
    }

    @Test func retryAfterCountsOnA429OrA503Only() {
        #expect(parse([("Retry-After", "7")], status: 429) == .init(remaining: 0, reset: .seconds(7)))
        #expect(parse([("Retry-After", "Fri, 15 Jan 2027 08:00:10 GMT")], status: 503)?.remaining == 0)
        #expect(parse([("Retry-After", "7")], status: 200) == nil)
        #expect(parse([("Retry-After", "7")], status: 500) == nil)
        // The most restrictive of several: the Retry-After's nothing-until-then.
        #expect(
            parse([("Retry-After", "9"), ("X-RateLimit-Remaining", "3"), ("X-RateLimit-Reset", "2")], status: 429)
                == .init(remaining: 0, reset: .seconds(9)))
    }

    @Test(arguments: [
        [("X-RateLimit-Remaining", "5")],  // no reset: nothing usable
        [("X-RateLimit-Reset", "5")],
        [("X-RateLimit-Remaining", "-1"), ("X-RateLimit-Reset", "5")],
        [("X-RateLimit-Remaining", "five"), ("X-RateLimit-Reset", "5")],
        [("X-RateLimit-Remaining", "1e3"), ("X-RateLimit-Reset", "5")],
        [("X-RateLimit-Remaining", ".5"), ("X-RateLimit-Reset", "5")],
        [("X-RateLimit-Remaining", "1.2.3"), ("X-RateLimit-Reset", "5")],
        [("X-RateLimit-Remaining", "NaN"), ("X-RateLimit-Reset", "inf")],
        [("RateLimit", #""default";r=5"#)],
        [("RateLimit", "garbage;;;==,,,\"")],
        [("RateLimit", "")],
    ])
    func whatSaysNothingUsableIsIgnored(fields: [(String, String)]) {
        #expect(parse(fields) == nil)
    }

    @Test func noAnswerStopsAnOriginForLongerThanAnHour() {
        #expect(parse([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "4000000000")])?.reset == .seconds(3_600))
        #expect(parse([("RateLimit", #""d";r=0;t=99999999999999999999999"#)])?.reset == .seconds(3_600))
        #expect(parse([("Retry-After", "9223372036854775807")], status: 429)?.reset == .seconds(3_600))
        #expect(parse([("RateLimit", #""d";r=99999999999999999999;t=1"#)])?.remaining == Int(Int32.max))
    }

    /// Generated fields (names the parser reads, values from pieces that matter to it) never trap,
    /// and what they announce is always in range.
    @Test func generatedFieldsNeverTrapAndStayInRange() {
        var random = SplitMix64(state: 58)
        let names = ["RateLimit", "RateLimit-Policy", "RateLimit-Remaining", "RateLimit-Reset", "X-RateLimit-Remaining",
                     "X-RateLimit-Reset", "X-RateLimit-Limit", "Retry-After"]
        let pieces = ["r=", "t=", "q=", "remaining=", "reset=", "limit=", ";", ",", "\"", "0", "7", "99999999999999999999",
                      ".", "-", " ", "\\", "=", "d", "1800000000", "\u{00e9}", "\t"]
        for _ in 0..<3_000 {
            var fields: [(String, String)] = []
            for _ in 0..<Int(random.next() % 4 + 1) {
                let name = names[Int(random.next() % UInt64(names.count))]
                let value = (0..<Int(random.next() % 8)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
                fields.append((name, value))
            }
            let status = [200, 429, 503][Int(random.next() % 3)]
            if let found = parse(fields, status: status) {
                #expect(found.remaining >= 0 && found.remaining <= Int(Int32.max))
                #expect(found.reset >= .zero && found.reset <= .seconds(3_600))
            }
        }
    }
}

@Suite struct RateLimiterTests {
    static let origin = Origin(apiURL)!

    func client(_ mock: MockTransport, _ limiter: RateLimiter, retry: Bool = false, timeout: Duration? = nil)
        -> NetworkClient
    {
        var configuration = NetworkClient.Configuration(clock: ImmediateClock())
        configuration.timeout = timeout
        configuration.timeoutClock = ManualClock()  // the timeout is read, never waited for
        configuration.retryBudget = nil
        return NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            if retry { RetryBehavior(RetryPolicy(maxAttempts: 3, jitter: .none)) }
            RateLimitBehavior(limiter)
        }
    }

    func send(_ client: NetworkClient, _ path: String = "/x") async -> Result<Void, NetworkError> {
        do throws(NetworkError) {
            try await client.send(Request<Void>(path: path))
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    /// The sliding log, against a model that keeps every send: in any period at most `requests`
    /// sends, each at the earliest time that allows, or refused when that is past `maxWait`.
    @Test func aQuotaHoldsInEveryWindowAgainstAModel() {
        var random = SplitMix64(state: 7)
        for run in 0..<40 {
            let requests = Int(random.next() % 6) + 1
            let period = Int64(random.next() % 5_000 + 100) * 1_000_000
            let longest = Int64(random.next() % 3) == 0 ? Int64.max : period / 2
            let quota = RateLimiter.Quota(requests, per: .nanoseconds(period))
            let account = RateLimiter.Account(Self.origin)
            var modelSends: [Int64] = []
            var now: Int64 = 0
            for _ in 0..<200 {
                now += Int64(random.next() % UInt64(period / Int64(requests) * 2))
                let earliest = modelSends.count >= requests ? max(now, modelSends[modelSends.count - requests] + period) : now
                let turn = account.take(at: now, longest: { longest }, quota: quota)
                if earliest - now > longest {
                    #expect(turn == .refuse(wait: earliest - now), "run \(run)")
                } else {
                    #expect(turn == .send(at: earliest), "run \(run)")
                    modelSends.append(earliest)
                }
            }
            for (index, send) in modelSends.enumerated() where index >= requests {
                #expect(send - modelSends[index - requests] >= period, "run \(run): \(requests + 1) sends within a period")
            }
        }
    }

    @Test func aClientQuotaPacesRequestsOnTheLimitersClock() async throws {
        let clock = ManualClock()
        let limiter = RateLimiter(quota: .init(2, per: .seconds(10)), clock: clock)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = client(mock, limiter)
        #expect(await succeeded(client))
        #expect(await succeeded(client))
        let third = Task { await self.succeeded(client) }
        await clock.waitForSleepers(1)
        #expect(mock.requests.count == 2)  // the third waits for the first to leave the period
        #expect(clock.sleeps == [.seconds(10)])
        clock.advance(by: .seconds(10))
        #expect(await third.value)
        #expect(mock.requests.count == 3)
        #expect(limiter.snapshot(for: Self.origin).paced == 1)
    }

    @Test func aTurnFurtherThanMaxWaitFailsAtOnceWithoutSending() async {
        let clock = ManualClock()
        let limiter = RateLimiter(quota: .init(1, per: .seconds(60)), maxWait: .seconds(10), clock: clock)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = client(mock, limiter)
        #expect(await succeeded(client))
        clock.advance(by: .seconds(15))
        guard case .failure(let error) = await send(client) else { Issue.record("sent"); return }
        #expect(NetworkError.rateLimited ~= error)
        #expect(error.retryAfter == .seconds(45))
        #expect(error.description == "The rate limit for https://api.test:443 is reached: not sent (next send in 45.0 s)")
        #expect(mock.requests.count == 1)
        #expect(limiter.snapshot(for: Self.origin).refused == 1)
    }

    @Test func anAnnouncedQuotaIsFollowedLessWhatIsInFlight() async {
        let clock = ManualClock()
        let limiter = RateLimiter(maxWait: .seconds(60), clock: clock)
        let mock = MockTransport()
        mock.enqueue(.response(status: 200, headers: ["X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "30"], body: Data()))
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = client(mock, limiter)
        #expect(await succeeded(client))
        #expect(limiter.snapshot(for: Self.origin).announcedRemaining == 2)
        #expect(await succeeded(client))
        #expect(await succeeded(client))
        #expect(limiter.snapshot(for: Self.origin).announcedRemaining == 0)
        let fourth = Task { await self.succeeded(client) }
        await clock.waitForSleepers(1)
        #expect(mock.requests.count == 3)
        #expect(clock.sleeps == [.seconds(30)])
        clock.advance(by: .seconds(30))
        #expect(await fourth.value)
        #expect(mock.requests.count == 4)

        // Two attempts in flight when an answer says two remain: the server may not have counted
        // them yet, so none remains.
        let account = RateLimiter.Account(Self.origin)
        _ = account.take(at: 0, longest: { .max }, quota: nil)
        _ = account.take(at: 0, longest: { .max }, quota: nil)
        account.inFlight -= 1
        account.learn(AnnouncedRateLimit(remaining: 2, reset: .seconds(5)), at: 0)
        #expect(account.announced?.remaining == 1)
    }

    /// Once none remain, attempts wait for the reset, but no more of them than the next window
    /// allows when the origin said its limit: the rest are refused, since when that window ends
    /// is unknown.
    @Test func waitersForTheResetAreBoundedByTheAnnouncedLimit() {
        let account = RateLimiter.Account(Self.origin)
        account.learn(AnnouncedRateLimit(remaining: 0, reset: .seconds(10), limit: 2), at: 0)
        #expect(account.take(at: 0, longest: { .max }, quota: nil) == .send(at: 10_000_000_000))
        #expect(account.take(at: 1, longest: { .max }, quota: nil) == .send(at: 10_000_000_000))
        #expect(account.take(at: 2, longest: { .max }, quota: nil) == .refuse(wait: 9_999_999_998))
        // Refused for a wait past `longest`, an attempt takes no place among them.
        let other = RateLimiter.Account(Self.origin)
        other.learn(AnnouncedRateLimit(remaining: 0, reset: .seconds(10), limit: 1), at: 0)
        #expect(other.take(at: 0, longest: { 5 }, quota: nil) == .refuse(wait: 10_000_000_000))
        #expect(other.take(at: 0, longest: { .max }, quota: nil) == .send(at: 10_000_000_000))
        // After the reset, the announcement no longer holds.
        #expect(other.take(at: 10_000_000_000, longest: { 0 }, quota: nil) == .send(at: 10_000_000_000))
    }

    @Test func a429sRetryAfterHoldsTheWholeOrigin() async {
        let clock = ManualClock()
        let limiter = RateLimiter(maxWait: .seconds(5), clock: clock)
        let mock = MockTransport()
        mock.enqueue(.response(status: 429, headers: ["Retry-After": "20"], body: Data()))
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = client(mock, limiter)
        guard case .failure(let first) = await send(client, "/x") else { Issue.record("succeeded"); return }
        #expect(first.status == 429)
        // Another request to the origin is not sent into the server's pause: it fails at once.
        guard case .failure(let second) = await send(client, "/x") else { Issue.record("sent"); return }
        #expect(NetworkError.rateLimited ~= second && second.retryAfter == .seconds(20))
        #expect(mock.requests.count == 1)
        clock.advance(by: .seconds(20))
        #expect(await succeeded(client))
    }

    @Test func aTurnPastTheAttemptsTimeoutFailsAtOnceRatherThanTimingOut() async {
        let clock = ManualClock()
        let limiter = RateLimiter(quota: .init(1, per: .seconds(8)), maxWait: .seconds(60), clock: clock)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = client(mock, limiter, timeout: .seconds(5))
        #expect(await succeeded(client))
        guard case .failure(let error) = await send(client) else { Issue.record("sent"); return }
        #expect(NetworkError.rateLimited ~= error && error.retryAfter == .seconds(8))
        #expect(mock.requests.count == 1)
    }

    /// A retry the quota refuses is not sent, and the request ends with `rateLimited` (what the
    /// example service answers as a 503 with Retry-After).
    @Test func aRetryTheQuotaRefusesEndsTheRequestRateLimited() async {
        let clock = ManualClock()
        let limiter = RateLimiter(quota: .init(1, per: .seconds(60)), maxWait: .seconds(1), clock: clock)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503, headers: ["Retry-After": "0"]))
        let client = client(mock, limiter, retry: true)
        guard case .failure(let error) = await send(client) else { Issue.record("succeeded"); return }
        #expect(mock.requests.count == 1)
        #expect(NetworkError.rateLimited ~= error && error.retryAfter == .seconds(60))
    }

    @Test func aRequestCancelledWhileWaitingEndsCancelledAndLeavesNothingInFlight() async {
        let clock = ManualClock()
        let limiter = RateLimiter(quota: .init(1, per: .seconds(8)), clock: clock)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = client(mock, limiter)
        #expect(await succeeded(client))
        let waiting = Task { await self.send(client) }
        await clock.waitForSleepers(1)
        waiting.cancel()
        guard case .failure(let error) = await waiting.value else { Issue.record("sent"); return }
        #expect(error == .cancelled)
        #expect(mock.requests.count == 1)
        #expect(limiter.snapshot(for: Self.origin).inFlight == 0)
    }

    @Test func originsAreCountedApartAndBounded() async throws {
        let limiter = RateLimiter(quota: .init(1, per: .seconds(60)), maxWait: .zero, maxOrigins: 3, clock: ManualClock())
        for host in ["a", "b", "c", "d", "e"] {
            let origin = Origin(URL(string: "https://\(host).test")!)!
            let (wait, account, _) = try limiter.take(origin, within: { nil })
            #expect(wait == .zero)
            limiter.finish(account, status: 200, headers: [:])
            let refused = #expect(throws: NetworkError.self) { try limiter.take(origin, within: { nil }) }
            #expect(NetworkError.rateLimited ~= refused && refused?.reason == origin.description)
        }
        #expect(limiter.accounts.withLock { $0.count } == 3)
    }

    @Test func theLogLineSaysHowLongARequestWaited() async {
        let clock = ManualClock()
        let sink = CapturingLogSink()
        let limiter = RateLimiter(quota: .init(1, per: .seconds(3)), clock: clock)
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let client = NetworkClient(baseURL: apiURL, transport: mock) {
            LoggingBehavior(sink: sink)
            RateLimitBehavior(limiter)
        }
        #expect(await succeeded(client))
        let second = Task { await self.succeeded(client) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(3))
        #expect(await second.value)
        let outcomes = sink.entries.filter { $0.level == .info }
        #expect(outcomes.count == 2)
        #expect(outcomes.first?.metadata["conveyor.ratelimit.waited_ms"] == nil)
        #expect(outcomes.last?.metadata["conveyor.ratelimit.waited_ms"] == "3000.000")
    }

    /// Every scenario of the contract (failures, retries, cancellation mid-flight and in a backoff
    /// wait, 20 concurrent requests) leaves no attempt counted in flight.
    @Test func theBehaviorKeepsTheContract() async {
        let limiter = RateLimiter(quota: .init(10_000, per: .seconds(1)))
        let check = BehaviorContractCheck(RateLimitBehavior(limiter)) {
            limiter.accounts.withLock { $0.all.values.reduce(0) { $0 + $1.inFlight } }
        }
        let violations = await check.run()
        #expect(violations.isEmpty, "\(violations)")
    }

    @Test func clampedSettings() {
        #expect(RateLimiter.Quota(0, per: .zero) == .init(1, per: .milliseconds(10)))
        #expect(RateLimiter.Quota(.max, per: .seconds(1e9)) == .init(100_000, per: .seconds(86_400)))
        #expect(RateLimiter(maxWait: .seconds(-3)).maxWait == .zero)
        #expect(RateLimiter(maxOrigins: -1).maxOrigins == 1)
    }

    func succeeded(_ client: NetworkClient) async -> Bool {
        if case .success = await send(client) { return true }
        return false
    }
}
