import Conveyor
import Foundation

/// The floor: returns one canned response, allocating nothing per call.
public struct CannedTransport: HTTPTransport {
    let body: Data
    /// Whether it says it honors cancellation (it returns at once, so it does). With `false` the
    /// client guards every call: the cost a transport pays for not saying so.
    public let honorsCancellation: Bool
    /// Whether it suspends once (`Task.yield()`) before it answers, as a transport on a network
    /// does: what runs only while an attempt waits (a deadline's timer) runs.
    let suspends: Bool
    public init(
        body: Data = Data(#"{"id":7,"title":"Heat","year":1995}"#.utf8), honorsCancellation: Bool = true,
        suspends: Bool = false
    ) {
        self.body = body
        self.honorsCancellation = honorsCancellation
        self.suspends = suspends
    }
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        if suspends { await Task.yield() }
        return HTTPResponse(status: 200, body: body, request: request)
    }
}

/// A behavior whose one hook a successful request never reaches: it declares only
/// `retryDecision`, which runs after a failed attempt.
public struct NoOpBehavior: RetryDeciding {
    public init() {}
    public func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        .doNotRetry
    }
}

/// A behavior that implements two hooks trivially: `additionalHeaders` (no header) and
/// `afterSuccess` (nothing). The unit of "an implemented hook" in the benchmarks: it can never be
/// skipped, so every request pays for both calls.
public struct TrivialHooks: HeaderAdding, SuccessObserving {
    public init() {}
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        HTTPHeaders()
    }
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {}
}

/// A behavior that implements every hook trivially (`intercept` passes the attempt on): none
/// can be skipped. Ten of them cost at least what skipping saves ten no-op behaviors.
public struct EveryHook: HeaderAdding, RequestModifying, SendObserving, AttemptIntercepting, ResponseValidating, RetryDeciding, SuccessObserving, FailureObserving {
    public init() {}
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        HTTPHeaders()
    }
    public func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {}
    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {}
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await next(request)
    }
    public func validate(_ response: HTTPResponse, context: RequestContext) async throws {}
    public func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        .doNotRetry
    }
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {}
    public func afterFailure(_ error: NetworkError, context: RequestContext) async {}
}

/// The same as ``TrivialHooks``, as a type of its own, for the one a request leaves out.
public struct LeftOut: HeaderAdding, SuccessObserving {
    public init() {}
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        HTTPHeaders()
    }
    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {}
}

/// Answers 503 to every other call, 200 to the rest: with a retry behavior, every request takes
/// exactly two attempts. (The counter's lock is the transport's cost, not the pipeline's.)
public final class EveryOtherFails: HTTPTransport, @unchecked Sendable {
    // @unchecked: `calls` is only touched with `lock` locked.
    private let lock = NSLock()
    private var calls = 0
    let body = Data(#"{"id":7,"title":"Heat","year":1995}"#.utf8)
    public init() {}
    public var honorsCancellation: Bool { true }
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let fail = lock.withLock {
            calls += 1
            return calls % 2 == 1
        }
        return HTTPResponse(status: fail ? 503 : 200, body: fail ? Data() : body, request: request)
    }
}

/// A token provider that returns a cached token.
public struct CachedToken: TokenProvider {
    public init() {}
    public func currentToken() async throws -> String? { "cached-token-0123456789" }
}

/// A background-task runner that begins and ends nothing (like UIKit when in the foreground).
public struct FakeBackgroundTasks: BackgroundTaskRunner {
    public init() {}
    public func beginTask(named name: String, onExpiration: @escaping @Sendable () -> Void) async -> BackgroundTaskID? {
        BackgroundTaskID(rawValue: 1)
    }
    public func endTask(_ id: BackgroundTaskID) async {}
}

/// A sink that is off: the logging behavior must cost next to nothing.
public struct DisabledSink: LogSink {
    public init() {}
    public var isEnabled: Bool { false }
    public func write(_ entry: LogEntry) {}
}

/// A sink that accepts the levels from `lowest` up (none when `nil`) and discards every line.
public struct LevelSink: LogSink {
    let lowest: LogEntry.Level?
    public init(lowest: LogEntry.Level?) { self.lowest = lowest }
    public var isEnabled: Bool { true }
    public func accepts(_ level: LogEntry.Level) -> Bool { lowest.map { level >= $0 } ?? false }
    public func write(_ entry: LogEntry) {}
}

/// Runs `total` operations (a task each) with `inFlight` at a time; returns operations per second.
public func measure(
    total: Int, inFlight: Int, _ operation: @escaping @Sendable () async throws -> Void
) async throws -> Double {
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        var started = 0
        for _ in 0..<min(inFlight, total) {
            group.addTask { try await operation() }
            started += 1
        }
        while try await group.next() != nil {
            if started < total {
                group.addTask { try await operation() }
                started += 1
            }
        }
    }
    let elapsed = ContinuousClock.now - start
    return Double(total) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

/// The realistic chain of the benchmarks: headers, auth, activity, background task, retry, logging.
/// - Parameter interrupting: Whether the background task interrupts an attempt in flight on
///   expiry (its default; every attempt then runs in a guarded step).
public func realisticBehaviors(interrupting: Bool = true) -> [any RequestBehavior] {
    [
        HeadersBehavior(["User-Agent": "Bench/1.0", "Accept-Language": "en"]),
        AuthTokenBehavior(tokens: CachedToken()),
        ActivityCounterBehavior(counter: NetworkActivityCounter()),
        BackgroundTaskBehavior(runner: FakeBackgroundTasks(), interruptsInFlightAttempt: interrupting),
        RetryBehavior(.exponentialBackoff(maxAttempts: 3)),
        LoggingBehavior(sink: DisabledSink()),
    ]
}

/// Passes every attempt on to the transport unchanged.
public struct PassThroughInterceptor: AttemptIntercepting {
    public init() {}
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await next(request)
    }
}

/// The small body the realistic scenarios decode.
public struct Movie: Codable, Sendable {
    public var id: Int
    public var title: String
    public var year: Int
}

/// 1,000 distinct paths: cycling through them, a client's URL cache (256 entries) never hits.
public let uniquePaths = (0..<1_000).map { "/movies/\($0)" }

/// The in-memory scenarios, shared by the instruction counter (and mirrored by the wall-clock
/// benchmarks), so both measure the same work.
public enum Scenario: String, CaseIterable, Sendable {
    case floor, noop0, noop1, noop10, noop50, split, uniquePath = "unique-path", plainJSON = "plain-json", realistic
    /// The realistic chain with the background task's in-flight interruption off.
    case realisticUninterrupted = "realistic-uninterrupted"
    /// The same with a 30 s timeout, against a transport that suspends once (as one on a network
    /// does, so the deadline is scheduled): an app's usual chain, whose first attempt runs its
    /// `beforeSend` hooks (the activity counter, the background task) in its guarded step.
    case realisticTimeout = "realistic-timeout"
    /// 0 behaviors, a request timeout: every attempt is a guarded step, and its deadline an entry
    /// of the shared timer, scheduled and dropped though the transport answers at once.
    case timeout
    /// 0 behaviors, a transport that suspends once before it answers (`suspended`), and the same
    /// with a request timeout (`timeout-suspended`): the deadline's timer is armed and removed.
    case suspended, timeoutSuspended = "timeout-suspended"
    /// 0 behaviors, a transport that does not say it honors cancellation: a guarded step per attempt.
    case guarded
    /// 1 behavior whose `intercept` passes every attempt on to the transport: the cost of the nesting.
    case intercept1
    /// 1, 5 or 10 ``TrivialHooks`` on the client: the cost of implemented hooks (2 per behavior).
    case hooks1, hooks5, hooks10
    /// 1 or 5 ``TrivialHooks`` carried by the request, none on the client: compare with
    /// `hooks1`/`hooks5`, the same behaviors registered on the client.
    case request1 = "request1", request5 = "request5"
    /// 10 behaviors with hooks on the client (9 ``TrivialHooks`` and one ``LeftOut``); the
    /// request leaves out the ``LeftOut`` by type.
    case optOut = "opt-out"
    /// The realistic chain against a transport that answers 503 then 200: two attempts per
    /// request, the retry's backoff zero.
    case retried
    /// Chains of 50, 100 and 200 ``TrivialHooks`` on the client: the slope per behavior.
    case chain50, chain100, chain200
    /// 10 ``PassThroughInterceptor``s: the same work as the peer's 10 pass-through middlewares.
    case intercept10
    /// 10 ``EveryHook``s: every hook of every member called.
    case everyHook10 = "every-hook10"
    /// A JSON POST with a bearer token through `LoggingBehavior` (512-byte previews): its sink
    /// off, a sink that accepts no level, one that accepts `.info` and `.error` (no per-attempt
    /// line), and one that accepts every level. `log-dropped` must cost what `log-off` costs.
    case logOff = "log-off", logDropped = "log-dropped", logInfo = "log-info", logAll = "log-all"
    /// `noop0` with the client's retry budget off. A chain that cannot retry pays nothing for the
    /// budget: `noop0` costs what this costs.
    case noop0Unbudgeted = "noop0-unbudgeted"
    /// One `RetryBehavior`, every request answered at once, with the default retry budget and
    /// without one: the difference is what the budget costs a request that could be retried.
    case retryOnly = "retry-only", retryOnlyUnbudgeted = "retry-only-unbudgeted"
    /// One `CircuitBreakerBehavior`, its circuit closed: compare with `noop0` for what the gate
    /// adds to a request (admitted at the transport's door, its answer counted).
    case breaker
    /// One `CircuitBreakerBehavior` whose circuit an operator isolated: every request fails at
    /// once with `circuitOpen`, sending nothing (the failing-fast path).
    case breakerOpen = "breaker-open"
    /// One `RateLimitBehavior` following only what the origin announces (the canned answers
    /// announce nothing): compare with `noop0` for what the gate adds to a request.
    case ratelimit
    /// One `RateLimitBehavior` with a client quota (100,000 a second, never reached): the sliding
    /// log's cost per send.
    case ratelimitQuota = "ratelimit-quota"
    /// One `RateLimitBehavior` with a fleet's quota (100,000 a day, never reached) through a ledger
    /// in memory that grants what is asked: a send of a grant held, and the asks amortized.
    case ratelimitLedger = "ratelimit-ledger"
    /// One `ConcurrencyLimitBehavior` (one request in flight at a time, far below its limit): the
    /// cost of taking and giving back a place and moving the limit.
    case concurrency
    /// One `HedgingBehavior` (a fixed 60 s delay) and every attempt answered at once: the race a
    /// hedged request runs when no hedge is sent (a task for the attempt, the delay an entry of the
    /// shared deadline timer).
    case hedged

    /// Sends `count` requests.
    public func run(_ count: Int) async throws {
        try await prepared()(count)
    }

    /// The scenario's client (or transport) and request, built once; the closure sends `count`
    /// requests in a loop of its own (one closure call per batch, not per request).
    public func prepared() -> @Sendable (_ count: Int) async throws -> Void {
        let base = URL(string: "http://127.0.0.1:8080/api")!
        func client(_ behaviors: [any RequestBehavior], transport: any HTTPTransport = CannedTransport()) -> NetworkClient {
            NetworkClient(baseURL: base, transport: transport) { behaviors }
        }
        func sending<Output: Sendable>(_ client: NetworkClient, _ request: Request<Output>) -> @Sendable (Int) async throws -> Void {
            { count in for _ in 0..<count { _ = try await client.send(request) } }
        }
        let movies = Request<Data>(path: "/movies")
        let movie = Request<Movie>(path: "/movies/7")
        switch self {
        case .floor:
            let transport: any HTTPTransport = CannedTransport()
            let request = HTTPRequest(method: .get, url: base.appendingPathComponent("movies"))
            return { count in for _ in 0..<count { _ = try await transport.send(request) } }
        case .noop0, .noop1, .noop10, .noop50:
            let n = [.noop0: 0, .noop1: 1, .noop10: 10, .noop50: 50][self] ?? 0
            return sending(client(Array(repeating: NoOpBehavior(), count: n)), movies)
        case .split:
            let request = Request<Data>(path: "/movies", behaviors: Array(repeating: NoOpBehavior(), count: 5))
            return sending(client(Array(repeating: NoOpBehavior(), count: 5)), request)
        case .uniquePath:
            // A path the client has not seen lately on every request: its URL cache never hits.
            let client = client(Array(repeating: NoOpBehavior(), count: 10))
            let paths = uniquePaths
            return { count in
                for index in 0..<count { _ = try await client.send(Request<Data>(path: paths[index % paths.count])) }
            }
        case .intercept1:
            return sending(client([PassThroughInterceptor()]), movies)
        case .intercept10:
            return sending(client(Array(repeating: PassThroughInterceptor(), count: 10)), movies)
        case .everyHook10:
            return sending(client(Array(repeating: EveryHook(), count: 10)), movies)
        case .suspended, .timeoutSuspended:
            let client = NetworkClient(
                baseURL: base, transport: CannedTransport(suspends: true),
                configuration: .init(timeout: self == .timeoutSuspended ? .seconds(30) : nil))
            return sending(client, movies)
        case .timeout, .guarded:
            let client = NetworkClient(
                baseURL: base, transport: CannedTransport(honorsCancellation: self != .guarded),
                configuration: .init(timeout: self == .timeout ? .seconds(30) : nil))
            return sending(client, movies)
        case .hooks1, .hooks5, .hooks10, .chain50, .chain100, .chain200:
            let n = [.hooks1: 1, .hooks5: 5, .hooks10: 10, .chain50: 50, .chain100: 100, .chain200: 200][self] ?? 0
            return sending(client(Array(repeating: TrivialHooks(), count: n)), movies)
        case .request1, .request5:
            let request = Request<Data>(
                path: "/movies", behaviors: Array(repeating: TrivialHooks(), count: self == .request1 ? 1 : 5))
            return sending(client([]), request)
        case .optOut:
            let behaviors: [any RequestBehavior] = Array(repeating: TrivialHooks(), count: 9) + [LeftOut()]
            return sending(client(behaviors), movies.excluding(.type(LeftOut.self)))
        case .retried:
            let behaviors = realisticBehaviors().map { behavior -> any RequestBehavior in
                behavior is RetryBehavior
                    ? RetryBehavior(RetryPolicy(maxAttempts: 2, baseDelay: .zero, jitter: .none)) : behavior
            }
            // Every request is retried once: a budget of a fifth would refuse most retries. This one
            // allows them all and still runs (its cost is in the figure).
            var configuration = NetworkClient.Configuration()
            configuration.retryBudget = RetryBudget(ratio: 1)
            return sending(
                NetworkClient(baseURL: base, transport: EveryOtherFails(), configuration: configuration) { behaviors },
                movie)
        case .plainJSON:
            return sending(client([]), movie)
        case .noop0Unbudgeted:
            var configuration = NetworkClient.Configuration()
            configuration.retryBudget = nil
            return sending(NetworkClient(baseURL: base, transport: CannedTransport(), configuration: configuration), movies)
        case .retryOnly:
            return sending(client([RetryBehavior()]), movies)
        case .retryOnlyUnbudgeted:
            var configuration = NetworkClient.Configuration()
            configuration.retryBudget = nil
            return sending(
                NetworkClient(baseURL: base, transport: CannedTransport(), configuration: configuration) { RetryBehavior() },
                movies)
        case .breaker:
            return sending(client([CircuitBreakerBehavior()]), movies)
        case .ratelimit:
            return sending(client([RateLimitBehavior()]), movies)
        case .ratelimitQuota:
            return sending(client([RateLimitBehavior(Conveyor.RateLimiter(quota: Conveyor.RateLimiter.Quota(100_000, per: Duration.seconds(1))))]), movies)
        case .ratelimitLedger:
            let limiter = Conveyor.RateLimiter(
                sharedQuota: Conveyor.RateLimiter.Quota(100_000, per: Duration.seconds(86_400)), ledger: GrantingLedger())
            return sending(client([RateLimitBehavior(limiter)]), movies)
        case .concurrency:
            return sending(client([ConcurrencyLimitBehavior()]), movies)
        case .hedged:
            return sending(client([HedgingBehavior(delay: .fixed(.seconds(60)))]), movies)
        case .breakerOpen:
            let breaker = CircuitBreaker()
            if let origin = Origin(base) { breaker.isolate(origin) }
            let client = client([CircuitBreakerBehavior(breaker)])
            return { count in
                for _ in 0..<count {
                    // Each fails at once with `circuitOpen` (the calls the budget line names prove it).
                    _ = try? await client.send(movies)
                }
            }
        case .realistic:
            return sending(client(realisticBehaviors()), movie)
        case .realisticUninterrupted:
            return sending(client(realisticBehaviors(interrupting: false)), movie)
        case .realisticTimeout:
            let behaviors = realisticBehaviors(interrupting: false)
            let client = NetworkClient(
                baseURL: base, transport: CannedTransport(suspends: true), configuration: .init(timeout: .seconds(30))
            ) { behaviors }
            return sending(client, movie)
        case .logOff, .logDropped, .logInfo, .logAll:
            let sink: any LogSink =
                switch self {
                case .logOff: DisabledSink()
                case .logDropped: LevelSink(lowest: nil)
                case .logInfo: LevelSink(lowest: .info)
                default: LevelSink(lowest: .debug)
                }
            let behaviors: [any RequestBehavior] = [
                HeadersBehavior(["Authorization": "Bearer bench-token-0123456789"]),
                LoggingBehavior(sink: sink, bodyPreviewLimit: 512),
            ]
            let body = Data(("{\"title\":\"" + String(repeating: "a", count: 1000) + "\",\"password\":\"p\"}").utf8)
            let request = Request<Data>(method: .post, path: "/movies", body: .data(body, contentType: "application/json"))
            return sending(client(behaviors), request)
        }
    }
}

/// A ledger that grants every send asked for, valid for an hour: what a fleet's quota costs a
/// request when the database is not on its path.
struct GrantingLedger: RateLimitLedger {
    func grant(_ wanted: Int, of quota: Conveyor.RateLimiter.Quota, for key: String) async -> RateLimitGrant {
        RateLimitGrant(permits: wanted, validFor: .seconds(3_600), id: "")
    }

    func giveBack(_ unused: Int, of grant: RateLimitGrant, for key: String) async {}
}
