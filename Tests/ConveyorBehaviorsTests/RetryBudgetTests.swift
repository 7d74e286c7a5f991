@testable import ConveyorPipeline
import ConveyorTesting
import Foundation
import Testing

/// Contract rule 19: every request the caller did not send spends from one budget per origin, and
/// a refused one ends the request with the last real answer or error.
@Suite struct RetryBudgetTests {
    static let origin = Origin(URL(string: "https://api.example.com")!)!

    // MARK: The account, alone

    @Test func aFifthOfTheRequestsMayBeRetriedAboveTheFloor() {
        let clock = ManualClock()
        let budget = RetryBudget(ratio: 0.2, minimumPerSecond: 1, window: .seconds(10), clock: clock)
        let account = budget.account(for: Self.origin)
        for _ in 0..<100 { account.deposit(budget) }
        var allowed = 0
        for _ in 0..<30 where account.withdraw(budget) { allowed += 1 }
        #expect(allowed == 20)
        #expect(budget.snapshot(for: Self.origin) == .init(requests: 100, retries: 20, refused: 10, available: 0))
    }

    @Test func aQuietClientGetsTheFloor() {
        let clock = ManualClock()
        let budget = RetryBudget(ratio: 0.2, minimumPerSecond: 1, window: .seconds(10), clock: clock)
        let account = budget.account(for: Self.origin)
        account.deposit(budget)
        var allowed = 0
        for _ in 0..<15 where account.withdraw(budget) { allowed += 1 }
        #expect(allowed == 10)  // 1 a second over 10 s, though one request's fifth is 0.2
    }

    @Test func theWindowSlides() {
        let clock = ManualClock()
        let budget = RetryBudget(ratio: 0, minimumPerSecond: 1, window: .seconds(10), clock: clock)
        let account = budget.account(for: Self.origin)
        for _ in 0..<10 { #expect(account.withdraw(budget)) }
        #expect(!account.withdraw(budget))
        clock.advance(by: .seconds(5))
        #expect(!account.withdraw(budget))  // the ten are still in the window
        clock.advance(by: .seconds(5))
        #expect(account.withdraw(budget))  // they have left it
        #expect(budget.snapshot(for: Self.origin).retries == 1)
    }

    /// Generated schedules against a model that keeps every event with its time: the account's
    /// decision is the model's, retry for retry.
    @Test(arguments: 0..<40 as Range<UInt64>)
    func decisionsMatchAModelOfEveryEvent(seed: UInt64) {
        var random = SeededGenerator(state: seed &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        let clock = ManualClock()
        let ratio = [0.0, 0.1, 0.2, 0.5, 1][Int(random.next() % 5)]
        let perSecond = [0.0, 0.5, 1, 3][Int(random.next() % 4)]
        let budget = RetryBudget(ratio: ratio, minimumPerSecond: perSecond, window: .seconds(10), clock: clock)
        let account = budget.account(for: Self.origin)
        var now = 0  // in slots of 1 s
        var events: [(slot: Int, request: Bool)] = []
        for step in 0..<400 {
            switch random.next() % 10 {
            case 0...4:
                account.deposit(budget)
                events.append((now, true))
            case 5...8:
                let inWindow = events.filter { now - $0.slot < 10 }
                let requests = inWindow.filter(\.request).count
                let retries = inWindow.count - requests
                let expected = Double(retries + 1) <= max(ratio * Double(requests), perSecond * 10)
                #expect(account.withdraw(budget) == expected, "seed \(seed) step \(step)")
                if expected { events.append((now, false)) }
            default:
                let seconds = Int(random.next() % 4)
                clock.advance(by: .seconds(seconds))
                now += seconds
            }
        }
    }

    @Test func theBudgetKeepsAtMostItsOrigins() {
        let budget = RetryBudget(maxOrigins: 8, clock: ManualClock())
        let pinned = budget.account(for: Self.origin, pinned: true)
        for port in 1...100 {
            let origin = Origin(URL(string: "http://127.0.0.1:\(port)")!)!
            budget.account(for: origin).deposit(budget)
        }
        #expect(budget.accounts.withLock { $0.count } <= 8)
        #expect(budget.accounts.withLock { $0[Self.origin] } === pinned)
    }

    @Test func outOfRangeSettingsAreClamped() {
        let budget = RetryBudget(ratio: .nan, minimumPerSecond: -.infinity, window: .zero, maxOrigins: -1, clock: ManualClock())
        #expect(budget.ratio == 0 && budget.minimumPerSecond == 0 && budget.window == .milliseconds(10) && budget.maxOrigins == 1)
        #expect(!budget.account(for: Self.origin).withdraw(budget))
    }

    // MARK: Through a client

    /// An upstream that fails every request: with the budget, about 1.2 attempts per request; the
    /// same client without one sends its policy's three.
    @Test(arguments: [true, false])
    func anOutageIsNotMultiplied(budgeted: Bool) async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503))
        let clock = ManualClock()
        let configuration = configured(budgeted ? RetryBudget(clock: clock) : nil)
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
        }
        var outcomes: [String: Int] = [:]
        for _ in 0..<500 {
            outcomes[await outcome { try await client.send(Request<Void>(path: "/x")) }, default: 0] += 1
        }
        // Every request ends with the server's answer, a refused retry included.
        #expect(outcomes == ["status 503": 500])
        let attempts = Double(mock.requests.count) / 500
        if budgeted {
            #expect(attempts <= 1.2 + 10.0 / 500)  // a fifth, and the floor's ten
            #expect(attempts >= 1.2)
        } else {
            #expect(attempts == 3)
        }
    }

    @Test func aRefusedRetryEndsWithTheTransportsError() async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .failure(URLError(.cannotConnectToHost)))
        let budget = RetryBudget(ratio: 0, minimumPerSecond: 0, clock: ManualClock())
        let client = NetworkClient(
            baseURL: apiURL, transport: mock, configuration: configured(budget)
        ) {
            RetryBehavior(.exponentialBackoff(jitter: .none))
        }
        #expect(await outcome { try await client.send(Request<Void>(path: "/x")) } == "connectionFailed")
        #expect(mock.requests.count == 1)
        #expect(budget.snapshot(for: Origin(apiURL)!).refused == 1)
    }

    @Test func theLogLineSaysWhyTheRequestWasNotRetried() async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(502))
        let sink = CapturingLogSink()
        let client = NetworkClient(
            baseURL: apiURL, transport: mock,
            configuration: configured(RetryBudget(ratio: 0, minimumPerSecond: 0, clock: ManualClock()))
        ) {
            LoggingBehavior(sink: sink)
            RetryBehavior(.exponentialBackoff(jitter: .none))
        }
        _ = await outcome { try await client.send(Request<Void>(path: "/x")) }
        let failure = sink.entries.last { $0.level == .error }
        #expect(failure?.message.contains("not retried: the retry budget for api.test is spent") == true)
        #expect(failure?.metadata["conveyor.retry.refused"] == "budget")
        #expect(failure?.metadata["http.response.status_code"] == "502")
    }

    @Test func aRetryTheBudgetAllowsIsNotMarkedRefused() async {
        let mock = MockTransport()
        mock.enqueue(.status(503), .status(503), .status(503))
        let sink = CapturingLogSink()
        let client = makeClient(mock) {
            LoggingBehavior(sink: sink)
            RetryBehavior(.exponentialBackoff(jitter: .none))
        }
        _ = await outcome { try await client.send(Request<Void>(path: "/x")) }
        #expect(mock.requests.count == 3)
        let failure = sink.entries.last { $0.level == .error }
        #expect(failure?.metadata["conveyor.retry.refused"] == nil)
        #expect(failure?.message.contains("retry budget") == false)
    }

    /// The retry with a refreshed credential is counted but never refused: at most one per
    /// request, and refusing it would fail every request in flight when a token expires.
    @Test func theRetryAfterARefreshIsCountedNotRefused() async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .handler { request in
            request.headers["Authorization"] == "Bearer t2" ? .status(200) : .status(401)
        })
        let budget = RetryBudget(ratio: 0, minimumPerSecond: 0, clock: ManualClock())
        let store = InMemoryTokenStore(token: "t1") { _ in "t2" }
        let client = NetworkClient(
            baseURL: apiURL, transport: mock, configuration: configured(budget)
        ) {
            AuthTokenBehavior(tokens: store, refresher: store)
        }
        let outcomes = await withTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { await outcome { try await client.send(Request<Void>(path: "/x")) } } }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(outcomes == Array(repeating: "success", count: 20))
        let snapshot = budget.snapshot(for: Origin(apiURL)!)
        #expect(snapshot.refused == 0 && snapshot.retries == 0)
        #expect(snapshot.exempt == mock.requests.count - 20)
    }

    /// Clients given one budget share it per origin; clients of two configurations do not.
    @Test func clientsShareABudgetOnlyWhenGivenOne() async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(503))
        let shared = RetryBudget(ratio: 0, minimumPerSecond: 0.5, clock: ManualClock())  // 5 retries
        func client(_ budget: RetryBudget) -> NetworkClient {
            NetworkClient(baseURL: apiURL, transport: mock, configuration: configured(budget)) {
                RetryBehavior(.exponentialBackoff(maxAttempts: 2, jitter: .none))
            }
        }
        let (a, b) = (client(shared), client(shared))
        for _ in 0..<4 {
            _ = await outcome { try await a.send(Request<Void>(path: "/x")) }
            _ = await outcome { try await b.send(Request<Void>(path: "/x")) }
        }
        #expect(mock.requests.count == 8 + 5)
        mock.reset()
        mock.stub(nil, "/v1/x", reply: .status(503))
        let (c, d) = (
            client(RetryBudget(ratio: 0, minimumPerSecond: 0.5, clock: ManualClock())),
            client(RetryBudget(ratio: 0, minimumPerSecond: 0.5, clock: ManualClock()))
        )
        for _ in 0..<4 {
            _ = await outcome { try await c.send(Request<Void>(path: "/x")) }
            _ = await outcome { try await d.send(Request<Void>(path: "/x")) }
        }
        #expect(mock.requests.count == 8 + 8)
    }
}

/// A configuration whose retry waits end at once, with `budget`.
private func configured(_ budget: RetryBudget?) -> NetworkClient.Configuration {
    var configuration = NetworkClient.Configuration(clock: ImmediateClock())
    configuration.retryBudget = budget
    return configuration
}
