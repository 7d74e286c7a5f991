import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// A refresher whose refresh hangs until its task is cancelled, and says that it saw it.
final class HangingRefresher: TokenRefresher {
    let started = Stuck()
    let sawCancellation = Stuck()
    func refreshToken(replacing expiredToken: String?) async throws -> String {
        Task { await started.wait() }
        let never = AsyncStream<Never> { _ in }
        for await _ in never {}
        Task { await sawCancellation.wait() }
        throw CancellationError()
    }
}

/// Contract rule 10 for the shared token refresh: a waiter leaves at once when cancelled or at
/// its deadline, the refresh has its own timeout, and a refresher that uses the same client
/// cannot deadlock it.
@Suite struct RefreshEdgeTests {
    func counted(
        _ mock: MockTransport, auth: AuthTokenBehavior, counter: NetworkActivityCounter,
        configuration: NetworkClient.Configuration = .init()
    ) -> NetworkClient {
        NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            ActivityCounterBehavior(counter: counter)
            auth
        }
    }

    @Test func cancellingWaitersOfAHungRefreshEndsThemAll() async {
        let stuck = Stuck()
        defer { stuck.release() }
        let store = InMemoryTokenStore(token: "stale") { _ in
            await stuck.wait()  // never returns, and ignores cancellation
            return "never"
        }
        let auth = AuthTokenBehavior(tokens: store, refresher: store)
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .status(401))
        let counter = NetworkActivityCounter()
        let client = counted(mock, auth: auth, counter: counter)
        let tasks = (0..<500).map { _ in
            Task { await outcome { try await client.send(Request<Void>(path: "/me")) } }
        }
        await stuck.entered(1)  // the refresh is running, and requests are waiting for it
        tasks.forEach { $0.cancel() }
        var outcomes: [String] = []
        for task in tasks { outcomes.append(await task.value) }
        #expect(outcomes.allSatisfy { $0 == "cancelled" })
        #expect(counter.count == 0)
        #expect(await auth.refreshCount == 1)
    }

    @Test func waitersOfAHungRefreshTimeOutAtTheirDeadline() async {
        let stuck = Stuck()
        defer { stuck.release() }
        let store = InMemoryTokenStore(token: "stale") { _ in
            await stuck.wait()
            return "never"
        }
        let auth = AuthTokenBehavior(tokens: store, refresher: store)
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .status(401))
        let counter = NetworkActivityCounter()
        let clock = ManualClock()
        let client = counted(
            mock, auth: auth, counter: counter, configuration: .init(timeout: .milliseconds(200), clock: clock, timeoutClock: clock))
        let tasks = (0..<500).map { _ in
            Task { await outcome { try await client.send(Request<Void>(path: "/me")) } }
        }
        await stuck.entered(1)
        await clock.waitForSleepers(500)
        clock.advance(by: .milliseconds(200))
        var outcomes: [String] = []
        for task in tasks { outcomes.append(await task.value) }
        #expect(outcomes.allSatisfy { $0 == "timedOut" }, "\(Set(outcomes))")
        #expect(counter.count == 0)
        #expect(await auth.refreshCount == 1)
    }

    @Test func aRefreshThatOutlivesItsTimeoutFailsItsWaiters() async {
        let refresher = HangingRefresher()
        let clock = ManualClock()
        let auth = AuthTokenBehavior(
            tokens: InMemoryTokenStore(token: "stale"), refresher: refresher, refreshTimeout: .seconds(5), clock: clock)
        #expect(auth.refreshTimeout == .seconds(5))
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .status(401))
        let task = Task { await outcome { try await makeClient(mock) { auth }.send(Request<Void>(path: "/me")) } }
        await refresher.started.entered(1)
        await clock.waitForSleepers(1)  // the refresh's own timer
        clock.advance(by: .seconds(5))
        #expect(await task.value == "AuthTokenBehavior failed in additionalHeaders")
        await refresher.sawCancellation.entered(1)  // the abandoned refresh was cancelled
    }

    /// A 401 that was on its way while a refresh timed out ends as that refresh's waiters did
    /// (`.behaviorFailed`), without a second refresh.
    @Test func aLate401FromBeforeATimedOutRefreshSharesItsOutcome() async {
        let refresher = HangingRefresher()
        let clock = ManualClock()
        let auth = AuthTokenBehavior(
            tokens: InMemoryTokenStore(token: "stale"), refresher: refresher, refreshTimeout: .seconds(5), clock: clock)
        let parked = Gate()
        let release = Gate()
        let mock = MockTransport()
        mock.stub(nil, "/v1/a", reply: .status(401))
        mock.stub(nil, "/v1/b", reply: .handler { _ in
            await parked.open()
            await release.wait()
            return .status(401)
        })
        let client = makeClient(mock) { auth }
        let late = Task { await outcome { try await client.send(Request<Void>(path: "/b")) } }
        await parked.wait()
        let first = Task { await outcome { try await client.send(Request<Void>(path: "/a")) } }
        await refresher.started.entered(1)
        await clock.waitForSleepers(1)  // the refresh's own timer
        clock.advance(by: .seconds(5))
        #expect(await first.value == "AuthTokenBehavior failed in additionalHeaders")
        await release.open()
        // Bounded: a second refresh would hang (the refresher never returns, the clock stands
        // still); at the bound the request is cancelled, and ends as such.
        let lateOutcome = await withinTimeLimit(seconds: hangBound) {
            await withTaskCancellationHandler { await late.value } onCancel: { late.cancel() }
        }
        #expect(lateOutcome == "AuthTokenBehavior failed in additionalHeaders")
        #expect(await auth.refreshCount == 1)
    }

    @Test func aWaiterLeavesAndTheRefreshGoesOnForTheOthers() async throws {
        let gate = Gate()
        let tokens = FakeTokens("stale", gate: gate)
        // The gated refresh lasts as long as the test holds it: on a clock that is never advanced,
        // its 30 s timeout cannot fire however busy the machine is.
        let auth = AuthTokenBehavior(tokens: tokens, refresher: tokens, clock: ManualClock())
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: authServer(valid: { "fresh-1" }))
        let counter = NetworkActivityCounter()
        let client = counted(mock, auth: auth, counter: counter)
        let tasks = (0..<10).map { _ in
            Task { await outcome { try await client.send(Request<Void>(path: "/me")) } }
        }
        var turns = 0  // bounded: a refresh that never starts fails the test instead of spinning
        while tokens.refreshes.withLock({ $0 }) == 0 {
            turns += 1
            try #require(turns < 1_000_000, "no refresh started")
            await Task.yield()
        }
        tasks.prefix(5).forEach { $0.cancel() }
        for task in tasks.prefix(5) { #expect(await task.value == "cancelled") }
        await gate.open()
        for task in tasks.suffix(5) { #expect(await task.value == "success") }
        #expect(tokens.refreshes.withLock { $0 } == 1)
        #expect(counter.count == 0)
    }

    @Test func theLastWaiterToLeaveCancelsTheRefresh() async {
        let refresher = HangingRefresher()
        let auth = AuthTokenBehavior(tokens: InMemoryTokenStore(token: "stale"), refresher: refresher)
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .status(401))
        let client = makeClient(mock) { auth }
        let tasks = (0..<3).map { _ in Task { await outcome { try await client.send(Request<Void>(path: "/me")) } } }
        await refresher.started.entered(1)
        tasks.forEach { $0.cancel() }
        for task in tasks { #expect(await task.value == "cancelled") }
        let cancelled = await withinTimeLimit(seconds: hangBound) { () -> Bool in
            await refresher.sawCancellation.entered(1)
            return true
        }
        #expect(cancelled != nil, "the refresh went on with no waiter left")
    }

    struct Token: Codable, Sendable { var token: String }

    /// The refresher posts to `/refresh` through the very client whose 401 it is handling.
    final class SameClientRefresher: TokenRefresher {
        let client = Locked<NetworkClient?>(nil)
        let store: InMemoryTokenStore
        init(store: InMemoryTokenStore) { self.store = store }
        func refreshToken(replacing expiredToken: String?) async throws -> String {
            guard let client = client.withLock({ $0 }) else { throw AuthError.noRefresher }
            let fresh = try await client.send(Request<Token>(method: .post, path: "/refresh")).token
            store.setToken(fresh)
            return fresh
        }
    }

    @Test(arguments: [nil, Duration.seconds(30)])
    func aRefresherThatSendsThroughTheSameClientWorks(timeout: Duration?) async {
        let store = InMemoryTokenStore(token: "stale")
        let refresher = SameClientRefresher(store: store)
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: authServer(valid: { "fresh" }))
        mock.stub(.post, "/v1/refresh", reply: .json(Token(token: "fresh")))
        let auth = AuthTokenBehavior(tokens: store, refresher: refresher, clock: ManualClock())
        // The timeout on a clock no one advances: the deadline is armed (what the argument is
        // for) but cannot fire on a slow run (30 s passed once in a thread-sanitizer pass).
        let client = NetworkClient(
            baseURL: apiURL, transport: mock, configuration: .init(timeout: timeout, timeoutClock: ManualClock())
        ) { auth }
        refresher.client.withLock { $0 = client }
        let result = await withinTimeLimit(seconds: hangBound) {
            await outcome { try await client.send(Request<Void>(path: "/me")) }
        }
        #expect(result == "success")
        let refresh = mock.requests.first { $0.url.path == "/v1/refresh" }
        #expect(refresh != nil && refresh?.headers["Authorization"] == nil, "the refresh call carried the stale token")
        #expect(await auth.refreshCount == 1)
    }

    @Test func aRefreshRequestThatGets401FailsTheRefreshInsteadOfWaitingOnItself() async {
        let store = InMemoryTokenStore(token: "stale")
        let refresher = SameClientRefresher(store: store)
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .status(401))
        mock.stub(.post, "/v1/refresh", reply: .status(401))
        let auth = AuthTokenBehavior(tokens: store, refresher: refresher)
        let client = makeClient(mock) { auth }
        refresher.client.withLock { $0 = client }
        let result = await withinTimeLimit(seconds: hangBound) {
            await outcome { try await client.send(Request<Void>(path: "/me")) }
        }
        // The refresh failed (its own 401): the session is over, and reads as such.
        #expect(result == "unauthorized")
        #expect(await auth.refreshCount == 1)
        if case .refreshFailed? = await auth.lastRefreshFailure {} else { Issue.record("lastRefreshFailure not kept") }
        #expect(mock.requests.filter { $0.url.path == "/v1/refresh" }.count == 1)
    }
}
