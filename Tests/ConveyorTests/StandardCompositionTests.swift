import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// The standard behaviors compose: every ordered pair, and random chains, run concurrent
/// requests with retries (a 503 first), a token refresh (a 401 first), cache hits, shared
/// in-flight calls, cookies and cancellations against one in-memory server. Every request ends
/// exactly once; a request that is not cancelled succeeds with its own answer (or ends with the
/// server's 503: without `RetryBehavior` in the chain, or when the retry budget refused its
/// retry); counters and background tasks balance.
@Suite struct StandardCompositionTests {
    /// What one chain's behaviors report to.
    final class Environment: Sendable {
        let activity = NetworkActivityCounter()
        let tasks = BalancedTasks()
        let tokens = InMemoryTokenStore(token: "stale") { _ in "fresh" }
        let lines = Locked(0)
        let metrics = Locked(0)
    }

    final class BalancedTasks: BackgroundTaskRunner {
        let state = Locked<(next: Int, open: Set<Int>, doubleEnds: Int)>((0, [], 0))
        func beginTask(named name: String, onExpiration: @escaping @Sendable () -> Void) async -> BackgroundTaskID? {
            state.withLock { state in
                state.next += 1
                state.open.insert(state.next)
                return BackgroundTaskID(rawValue: state.next)
            }
        }
        func endTask(_ id: BackgroundTaskID) async {
            state.withLock { state in if state.open.remove(id.rawValue) == nil { state.doubleEnds += 1 } }
        }
    }

    struct Lines: LogSink {
        let count: Locked<Int>
        var isEnabled: Bool { true }
        func write(_ entry: LogEntry) { count.withLock { $0 += 1 } }
    }

    struct Metrics: MetricsSink {
        let count: Locked<Int>
        func record(_ metrics: AttemptMetrics) { count.withLock { $0 += 1 } }
    }

    /// Counts each request's outcome hooks: exactly one per request whose `beforeSend` ran
    /// (contract rule 5; a task cancelled before its first attempt began ends with no hook).
    struct Outcomes: SendObserving, SuccessObserving, FailureObserving {
        let ended: Locked<[UInt64: Int]>
        let began: Locked<Set<UInt64>>
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
            _ = began.withLock { $0.insert(context.requestID.rawValue) }
        }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { end(context) }
        func afterFailure(_ error: NetworkError, context: RequestContext) async { end(context) }
        private func end(_ context: RequestContext) {
            ended.withLock { $0[context.requestID.rawValue, default: 0] += 1 }
        }
    }

    static let standard: [(name: String, make: @Sendable (Environment) -> any RequestBehavior)] = [
        ("headers", { _ in HeadersBehavior(["X-App": "composition"]) }),
        ("auth", { env in AuthTokenBehavior(tokens: env.tokens, refresher: env.tokens) }),
        ("activity", { env in ActivityCounterBehavior(counter: env.activity) }),
        ("background", { env in BackgroundTaskBehavior(runner: env.tasks) }),
        ("retry", { _ in RetryBehavior(RetryPolicy(maxAttempts: 3, baseDelay: .zero, jitter: .none)) }),
        ("idempotency", { _ in IdempotencyKeyBehavior(methods: [.post, .get]) }),
        ("logging", { env in LoggingBehavior(sink: Lines(count: env.lines), bodyPreviewLimit: 64) }),
        ("metrics", { env in MetricsBehavior(sink: Metrics(count: env.metrics)) }),
        ("verification", { _ in ResponseVerificationBehavior() }),
        ("cache", { _ in CacheBehavior() }),
        ("dedup", { _ in DeduplicationBehavior() }),
        ("cookies", { _ in CookieBehavior() }),
    ]

    /// The server: a 503 for the first request of each `flaky` path, a 401 for the stale token,
    /// otherwise 200 naming the path and the token, echoing the nonce, cacheable, with a cookie.
    static func server(hits: Locked<Int> = Locked(0)) -> MockTransport {
        let mock = MockTransport()
        let seen = Locked<Set<String>>([])
        mock.stub(
            nil, "/v1/item",
            reply: .handler { request in
                hits.withLock { $0 += 1 }
                for _ in 0..<Int.random(in: 0...8) { await Task.yield() }
                let path = request.url.query ?? ""
                if request.headers["Authorization"] == "Bearer stale" { return .status(401) }
                if path.contains("flaky"), seen.withLock({ $0.insert(path).inserted }) {
                    return .status(503, headers: ["Retry-After": "0"])
                }
                var headers: HTTPHeaders = ["Cache-Control": "private, max-age=60", "Set-Cookie": "visit=1; Path=/"]
                if let nonce = request.headers["X-Request-Nonce"] { headers["X-Request-Nonce"] = nonce }
                return .text("\(path) for \(request.headers["Authorization"] ?? "nobody")", headers: headers)
            })
        return mock
    }

    /// Runs `chain` (indices into ``standard``) through 40 concurrent requests, some cancelled.
    func run(_ chain: [Int], seed: UInt64, hits: Locked<Int> = Locked(0)) async -> [String] {
        let env = Environment()
        let ended = Locked<[UInt64: Int]>([:])
        let began = Locked<Set<UInt64>>([])
        let names = chain.map { Self.standard[$0].name }
        let behaviors: [any RequestBehavior] =
            [Outcomes(ended: ended, began: began)] + chain.map { Self.standard[$0].make(env) }
        let client = NetworkClient(
            baseURL: URL(string: "https://api.example.com/v1")!, transport: Self.server(hits: hits)
        ) {
            behaviors
        }
        let hasRetry = names.contains("retry")
        let hasAuth = names.contains("auth")
        var random = SplitMix64(state: seed)
        let plan: [(query: String, cancelAfter: Int?)] = (0..<40).map { index in
            let query = ["a", "b", "flaky-\(index % 3)"].randomElement(using: &random)!
            return (query, Int.random(in: 0..<6, using: &random) == 0 ? Int.random(in: 0...5, using: &random) : nil)
        }
        let problems = Locked<[String]>([])
        let endedOn503 = Locked(0)
        // Two waves of 20: within a wave calls overlap (shared calls); the second finds the
        // first's answers stored (cache hits).
        for wave in [plan[..<20], plan[20...]] {
            await withTaskGroup(of: Void.self) { group in
                for (query, cancelAfter) in wave {
                    let task = Task {
                        do throws(NetworkError) {
                            let text = try await client.send(Request<String>(path: "/item", query: ["q": query]))
                            let who = hasAuth ? "Bearer fresh" : "nobody"
                            if text != "q=\(query) for \(who)" {
                                problems.withLock { $0.append("\(query) got \(text)") }
                            }
                        } catch .cancelled where cancelAfter != nil {
                        } catch .status(503) where !hasRetry {
                        } catch .status(503) {
                            // Allowed only as a retry the budget refused (checked below).
                            endedOn503.withLock { $0 += 1 }
                        } catch {
                            problems.withLock { $0.append("\(query): \(error)") }
                        }
                    }
                    group.addTask {
                        if let cancelAfter {
                            for _ in 0..<cancelAfter { await Task.yield() }
                            task.cancel()
                        }
                        await task.value
                    }
                }
            }
        }
        let outcomes = ended.withLock { $0 }
        let started = began.withLock { $0 }
        var found = problems.withLock { $0 }
        // With a retry in the chain, a request ends on the server's 503 only when the retry
        // budget refused its retry (which then ends it with the 503 it retried). The budget
        // counts each caller's retry: callers that shared one call (dedup) and got its 503 each
        // ask for one, and 40 requests allow 10 in the window (the floor), so a wave whose
        // callers mostly joined the flaky calls can spend it.
        let ended503 = endedOn503.withLock { $0 }
        if ended503 > 0 {
            let refused = client.configuration.retryBudget
                .flatMap { budget in Origin(URL(string: "https://api.example.com/v1")!).map { budget.snapshot(for: $0) } }
            if (refused?.refused ?? 0) < ended503 {
                found.append(
                    "\(ended503) request(s) ended on a 503 with a retry in the chain; the budget: "
                        + "\(refused.map { "\($0)" } ?? "none"), server hits: \(hits.withLock { $0 })")
            }
        }
        if Set(outcomes.keys) != started { found.append("\(outcomes.count) requests ended, \(started.count) began") }
        let uncancelled = plan.filter { $0.cancelAfter == nil }.count
        if started.count < uncancelled {
            found.append("only \(started.count) requests began, \(uncancelled) were not cancelled")
        }
        if outcomes.values.contains(where: { $0 != 1 }) { found.append("a request ended more than once") }
        if env.activity.count != 0 { found.append("activity counter at \(env.activity.count)") }
        let tasks = env.tasks.state.withLock { $0 }
        if !tasks.open.isEmpty || tasks.doubleEnds > 0 { found.append("background tasks unbalanced: \(tasks)") }
        if names.contains("logging") && env.lines.withLock({ $0 }) < plan.count {
            found.append("logging wrote too little")
        }
        if names.contains("metrics") && env.metrics.withLock({ $0 }) == 0 { found.append("metrics recorded nothing") }
        return found.map { "[\(names.joined(separator: ", "))] \($0)" }
    }

    @Test func everyOrderedPairComposes() async {
        var failures: [String] = []
        var pairs = 0
        for first in Self.standard.indices {
            for second in Self.standard.indices where second != first {
                failures += await run([first, second], seed: UInt64(first * 100 + second))
                pairs += 1
            }
        }
        #expect(pairs == 132)
        #expect(failures.isEmpty, "\(failures.prefix(8).joined(separator: "\n"))")
    }

    @Test func randomChainsCompose() async {
        var random = SplitMix64(state: 2026)
        var failures: [String] = []
        for round in 0..<60 {
            let count = Int.random(in: 3...Self.standard.count, using: &random)
            let chain = Array(Self.standard.indices.shuffled(using: &random).prefix(count))
            failures += await run(chain, seed: UInt64(round))
        }
        #expect(failures.isEmpty, "\(failures.prefix(8).joined(separator: "\n"))")
    }

    /// Verification with the cache and with shared calls, in both orders: hits and joined
    /// callers are not checked against a nonce they never sent, and still arrive.
    @Test(arguments: [
        ["verification", "cache"], ["cache", "verification"], ["verification", "dedup"], ["dedup", "verification"],
    ])
    func verificationWorksWithTheAnsweringBehaviors(_ names: [String]) async {
        let chain = names.compactMap { name in Self.standard.firstIndex { $0.name == name } }
        let hits = Locked(0)
        let failures = await run(chain, seed: 7, hits: hits)
        #expect(failures.isEmpty, "\(failures.prefix(5).joined(separator: "\n"))")
        // The answering behavior answered: fewer server hits than requests.
        #expect(hits.withLock { $0 } < 30, "\(hits.withLock { $0 }) server hits for 40 requests")
    }

    /// A captive portal's cacheable 200 (no nonce echoed) fails verification, also when the
    /// cache serves it again.
    @Test(arguments: [true, false])
    func aPortalPageFailsVerificationFromTheCacheToo(_ verificationFirst: Bool) async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/portal", reply: .text("<html>log in</html>", headers: ["Cache-Control": "max-age=600"]))
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com/v1")!, transport: mock) {
            if verificationFirst {
                ResponseVerificationBehavior()
                CacheBehavior()
            } else {
                CacheBehavior()
                ResponseVerificationBehavior()
            }
        }
        for round in 0..<3 {
            do {
                _ = try await client.send(Request<String>(path: "/portal"))
                Issue.record("round \(round): the portal page was accepted")
            } catch {
                guard case .behaviorFailed = error, error.hook == .validate, let underlying = error.underlying,
                    underlying as? ResponseVerificationError == .nonceMismatch
                else {
                    Issue.record("round \(round): \(error)")
                    continue
                }
            }
        }
    }
}
