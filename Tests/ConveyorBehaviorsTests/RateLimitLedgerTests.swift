import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@testable import ConveyorBehaviors

/// A ledger in memory that keeps `RateLimitLedger`'s contract on a manual clock: a grant counts
/// from the moment it is made until `period + validFor` later, and only what leaves the count at
/// or under the quota is granted. It can be made unreachable, and slow (its answer takes
/// `latency` of the clock).
final class MemoryLedger: RateLimitLedger {
    struct Grant {
        var id: Int
        var at: Duration
        var count: Int
    }

    struct State {
        var grants: [Grant] = []
        var nextID = 0
        var asks: [Int] = []
        var givenBack: [Int] = []
        var reachable = true
        var latency: Duration = .zero
    }

    let clock: ManualClock
    let validFor: Duration
    let state = Locked(State())

    init(clock: ManualClock, validFor: Duration) {
        self.clock = clock
        self.validFor = validFor
    }

    var now: Duration { ImmediateClock.Instant().duration(to: clock.now) }

    func grant(_ wanted: Int, of quota: RateLimiter.Quota, for key: String) async -> RateLimitGrant {
        let latency = state.withLock { $0.latency }
        if latency > .zero { clock.advance(by: latency) }
        let now = now
        return state.withLock { state in
            state.asks.append(wanted)
            guard state.reachable else { return .unavailable(retryAfter: .seconds(1)) }
            let counted = state.grants.filter { $0.at > now - quota.period - validFor }
            let room = quota.requests - counted.reduce(0) { $0 + $1.count }
            guard room > 0 else {
                let oldest = counted.map(\.at).min() ?? now
                return .exhausted(retryAfter: oldest + quota.period + validFor - now)
            }
            state.nextID += 1
            let count = min(wanted, room)
            state.grants.append(Grant(id: state.nextID, at: now, count: count))
            return RateLimitGrant(permits: count, validFor: validFor, id: String(state.nextID))
        }
    }

    func giveBack(_ unused: Int, of grant: RateLimitGrant, for key: String) async {
        state.withLock { state in
            state.givenBack.append(unused)
            if let index = state.grants.firstIndex(where: { String($0.id) == grant.id }) {
                state.grants[index].count -= unused
            }
        }
    }
}

/// `RateLimiter(sharedQuota:ledger:)`: the instances of a fleet share one quota through a ledger.
@Suite struct RateLimitLedgerTests {
    static let origin = Origin(apiURL)!

    struct Instance {
        let client: NetworkClient
        let limiter: RateLimiter
    }

    func instance(
        _ mock: MockTransport, _ ledger: MemoryLedger, quota: RateLimiter.Quota, maxWait: Duration = .zero,
        fallback: RateLimiter.Quota? = nil
    ) -> Instance {
        let limiter = RateLimiter(
            sharedQuota: quota, ledger: ledger, fallbackQuota: fallback, maxWait: maxWait, clock: ledger.clock)
        var configuration = NetworkClient.Configuration(clock: ImmediateClock())
        configuration.timeoutClock = ManualClock()
        configuration.retryBudget = nil
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            RateLimitBehavior(limiter)
        }
        return Instance(client: client, limiter: limiter)
    }

    func send(_ client: NetworkClient) async -> Result<Void, NetworkError> {
        do throws(NetworkError) {
            try await client.send(Request<Void>(path: "/x"))
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    func mock() -> MockTransport {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        return mock
    }

    /// Generated fleets (2–5 instances, quotas of 1–20 per 1–10 s) send at random times: in any
    /// period, the fleet together sends at most the quota.
    @Test func aFleetNeverExceedsTheSharedQuotaAgainstTheSlidingWindow() async {
        var random = SplitMix64(state: 11)
        for run in 0..<24 {
            let clock = ManualClock()
            let requests = Int(random.next() % 20) + 1
            let period = Duration.milliseconds(Int64(random.next() % 9_000) + 1_000)
            let ledger = MemoryLedger(clock: clock, validFor: period / 20)
            let quota = RateLimiter.Quota(requests, per: period)
            let mock = mock()
            let fleet = (0..<(Int(random.next() % 4) + 2)).map { _ in instance(mock, ledger, quota: quota) }
            var sends: [Duration] = []
            let step = period.nanoseconds / Int64(requests) / Int64(fleet.count)
            for _ in 0..<300 {
                clock.advance(by: .nanoseconds(Int64(random.next() % UInt64(step * 2 + 1))))
                let member = fleet[Int(random.next() % UInt64(fleet.count))]
                if case .success = await send(member.client) { sends.append(ledger.now) }
            }
            #expect(sends.count > requests, "run \(run): the fleet sent")
            for index in sends.indices where index >= requests {
                #expect(
                    sends[index] - sends[index - requests] >= period,
                    "run \(run): \(requests + 1) sends within \(period)")
            }
        }
    }

    /// Four instances that each want far more than the quota: the fleet never exceeds it and uses
    /// at least 90 % of it (the margin a grant's validity costs: a grant counts for
    /// `period + validFor`).
    @Test func aBusyFleetUsesNinetyPercentOfTheQuota() async {
        let clock = ManualClock()
        let ledger = MemoryLedger(clock: clock, validFor: .milliseconds(500))
        let quota = RateLimiter.Quota(100, per: .seconds(10))
        let mock = mock()
        let fleet = (0..<4).map { _ in instance(mock, ledger, quota: quota) }
        var sends: [Duration] = []
        for _ in 0..<10_000 {  // 100 s in steps of 10 ms
            clock.advance(by: .milliseconds(10))
            for member in fleet {
                if case .success = await send(member.client) { sends.append(ledger.now) }
            }
        }
        for index in sends.indices where index >= 100 {
            #expect(sends[index] - sends[index - 100] >= .seconds(10))
        }
        // 100 s allow 1,000 sends at most.
        #expect(sends.count >= 900, "used \(sends.count) of 1,000")
        #expect(mock.requests.count == sends.count)
        // Not on every request's path, even when the instances take turns at the room a grant
        // leaves as it ages out of the period: one ask for three sends or more.
        let asks = ledger.state.withLock { $0.asks.count }
        #expect(asks * 3 <= sends.count, "\(asks) asks for \(sends.count) sends")
    }

    /// Concurrent attempts that find no send left share one ask of the ledger, and the limiter asks
    /// for more while it spends all it is given (at most an eighth of the quota at a time).
    @Test func waitingAttemptsShareOneAskAndGrantsGrowWithUse() async {
        let clock = ManualClock()
        let ledger = MemoryLedger(clock: clock, validFor: .seconds(1))
        let mock = mock()
        let member = instance(mock, ledger, quota: .init(800, per: .seconds(60)), maxWait: .seconds(1))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<32 { group.addTask { _ = await self.send(member.client) } }
        }
        #expect(mock.requests.count == 32)
        let asks = ledger.state.withLock { $0.asks }
        #expect(asks.count <= 4, "\(asks)")
        for _ in 0..<400 { _ = await send(member.client) }
        let later = ledger.state.withLock { $0.asks }
        #expect(later.max() == 100, "\(later)")  // an eighth of 800
    }

    /// A grant's sends are made within its validity, counted from before the ledger was asked (a
    /// slow answer shortens it, never lengthens it); the unused sends of an expired grant go back.
    @Test func aGrantIsSpentOnlyWithinItsValidityAndTheRestIsGivenBack() async {
        let clock = ManualClock()
        let ledger = MemoryLedger(clock: clock, validFor: .seconds(1))
        ledger.state.withLock { $0.latency = .milliseconds(300) }
        let mock = mock()
        let member = instance(mock, ledger, quota: .init(80, per: .seconds(60)))
        for _ in 0..<4 { _ = await send(member.client) }  // grants of 1, 2 and 4 (two sends of it left)
        #expect(ledger.state.withLock { $0.asks } == [1, 2, 4])
        #expect(member.limiter.snapshot(for: Self.origin).heldPermits == 3)
        clock.advance(by: .milliseconds(699))  // 999 ms after the ask began
        #expect(await send(member.client).isSuccess)
        #expect(ledger.state.withLock { $0.asks.count } == 3)
        clock.advance(by: .milliseconds(1))  // exactly 1 s: expired
        #expect(member.limiter.snapshot(for: Self.origin).heldPermits == 0)
        #expect(await send(member.client).isSuccess)
        #expect(ledger.state.withLock { ($0.asks.count, $0.givenBack) } == (4, [2]))
    }

    /// A full quota: an attempt waits for room within what it may wait, then asks again; further
    /// away, it fails at once with `rateLimited`, says when, and is not sent.
    @Test func aFullQuotaWaitsForRoomOrRefusesAtOnce() async {
        let clock = ManualClock()
        let ledger = MemoryLedger(clock: clock, validFor: .seconds(1))
        let mock = mock()
        let patient = instance(mock, ledger, quota: .init(1, per: .seconds(5)), maxWait: .seconds(10))
        let hasty = instance(mock, ledger, quota: .init(1, per: .seconds(5)), maxWait: .seconds(1))
        #expect(await send(patient.client).isSuccess)
        guard case .failure(let error) = await send(hasty.client) else {
            Issue.record("sent")
            return
        }
        #expect(NetworkError.rateLimited ~= error && error.retryAfter == .seconds(6))
        let waiting = Task { await self.send(patient.client) }
        await clock.waitForSleepers(1)
        #expect(clock.sleeps == [.seconds(6)])
        clock.advance(by: .seconds(6))
        #expect(await waiting.value.isSuccess)
        #expect(mock.requests.count == 2)
        #expect(patient.limiter.snapshot(for: Self.origin).paced == 1)
        #expect(hasty.limiter.snapshot(for: Self.origin).refused == 1)
        #expect(hasty.limiter.snapshot(for: Self.origin).inFlight == 0)
    }

    /// A ledger that cannot be reached: without a fallback quota nothing that needs a grant is
    /// sent (asked again after its `retryAfter`, not per attempt); with one, the instance holds
    /// itself to it alone.
    @Test func anUnreachableLedgerRefusesOrFallsBackToTheInstancesShare() async {
        let clock = ManualClock()
        let ledger = MemoryLedger(clock: clock, validFor: .seconds(1))
        ledger.state.withLock { $0.reachable = false }
        let mock = mock()
        let strict = instance(mock, ledger, quota: .init(100, per: .seconds(60)))
        for _ in 0..<3 {
            guard case .failure(let error) = await send(strict.client) else {
                Issue.record("sent")
                return
            }
            #expect(NetworkError.rateLimited ~= error && error.retryAfter == .seconds(1))
        }
        #expect(mock.requests.isEmpty)
        #expect(ledger.state.withLock { $0.asks.count } == 1)
        let lenient = instance(
            mock, ledger, quota: .init(100, per: .seconds(60)), fallback: .init(2, per: .seconds(60)))
        #expect(await send(lenient.client).isSuccess)
        #expect(await send(lenient.client).isSuccess)
        #expect(!(await send(lenient.client).isSuccess))
        #expect(mock.requests.count == 2)
        // Reachable again, after its retryAfter: grants as before.
        ledger.state.withLock { $0.reachable = true }
        clock.advance(by: .seconds(1))
        #expect(await send(strict.client).isSuccess)
        #expect(strict.limiter.snapshot(for: Self.origin).inFlight == 0)
    }

    /// Concurrent attempts on the fallback quota never share a turn: 16 at once, 2 sent.
    @Test func concurrentAttemptsOnTheFallbackQuotaKeepIt() async {
        let clock = ManualClock()
        let ledger = MemoryLedger(clock: clock, validFor: .seconds(1))
        ledger.state.withLock { $0.reachable = false }
        let mock = mock()
        let member = instance(mock, ledger, quota: .init(100, per: .seconds(60)), fallback: .init(2, per: .seconds(60)))
        let sent = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 { group.addTask { await self.send(member.client).isSuccess } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(sent == 2 && mock.requests.count == 2)
        #expect(member.limiter.snapshot(for: Self.origin).inFlight == 0)
    }

    /// Cancelled while waiting for room: it ends cancelled, is not sent, and is no longer in flight.
    @Test func anAttemptCancelledWhileWaitingForRoomLeavesNothingInFlight() async {
        let clock = ManualClock()
        let ledger = MemoryLedger(clock: clock, validFor: .seconds(1))
        let mock = mock()
        let member = instance(mock, ledger, quota: .init(1, per: .seconds(5)), maxWait: .seconds(10))
        #expect(await send(member.client).isSuccess)
        let waiting = Task { await self.send(member.client) }
        await clock.waitForSleepers(1)
        waiting.cancel()
        guard case .failure(let error) = await waiting.value else {
            Issue.record("sent")
            return
        }
        #expect(error == .cancelled)
        #expect(mock.requests.count == 1)
        #expect(member.limiter.snapshot(for: Self.origin).inFlight == 0)
    }

    /// The contract's scenarios (failures, retries, cancellation, 20 concurrent requests) with a
    /// ledger leave no attempt counted in flight.
    @Test func theBehaviorWithALedgerKeepsTheContract() async {
        let ledger = MemoryLedger(clock: ManualClock(), validFor: .seconds(3_600))
        let limiter = RateLimiter(sharedQuota: .init(10_000, per: .seconds(1)), ledger: ledger)
        let check = BehaviorContractCheck(RateLimitBehavior(limiter)) {
            limiter.accounts.withLock { $0.all.values.reduce(0) { $0 + $1.inFlight } }
        }
        let violations = await check.run()
        #expect(violations.isEmpty, "\(violations)")
    }
}
