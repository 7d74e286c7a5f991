import Conveyor
import Foundation

/// The floor: returns one canned response, allocating nothing per call.
public struct CannedTransport: HTTPTransport {
    let body: Data
    /// Whether it says it honors cancellation (it returns at once, so it does). With `false` the
    /// client guards every call: the cost a transport pays for not saying so.
    public let honorsCancellation: Bool
    public init(body: Data = Data(#"{"id":7,"title":"Heat","year":1995}"#.utf8), honorsCancellation: Bool = true) {
        self.body = body
        self.honorsCancellation = honorsCancellation
    }
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        HTTPResponse(status: 200, body: body, request: request)
    }
}

/// A behavior that implements no hook.
public struct NoOpBehavior: RequestBehavior {
    public init() {}
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
public struct PassThroughInterceptor: RequestBehavior {
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
    /// 0 behaviors, a request timeout: every attempt is a guarded step with a timer.
    case timeout
    /// 0 behaviors, a transport that does not say it honors cancellation: a guarded step per attempt.
    case guarded
    /// 1 behavior whose `intercept` passes every attempt on to the transport: the cost of the nesting.
    case intercept1

    /// Sends `count` requests.
    public func run(_ count: Int) async throws {
        let base = URL(string: "http://127.0.0.1:8080/api")!
        func client(_ n: Int) -> NetworkClient {
            NetworkClient(baseURL: base, transport: CannedTransport()) { Array(repeating: NoOpBehavior(), count: n) }
        }
        switch self {
        case .floor:
            let transport: any HTTPTransport = CannedTransport()
            let request = HTTPRequest(method: .get, url: base.appendingPathComponent("movies"))
            for _ in 0..<count { _ = try await transport.send(request) }
        case .noop0, .noop1, .noop10, .noop50:
            let n = [.noop0: 0, .noop1: 1, .noop10: 10, .noop50: 50][self] ?? 0
            let client = client(n)
            let request = Request<Data>(path: "/movies")
            for _ in 0..<count { _ = try await client.send(request) }
        case .split:
            let client = client(5)
            let request = Request<Data>(path: "/movies", behaviors: Array(repeating: NoOpBehavior(), count: 5))
            for _ in 0..<count { _ = try await client.send(request) }
        case .uniquePath:
            // A path the client has not seen lately on every request: its URL cache never hits.
            let client = client(10)
            let paths = uniquePaths
            for index in 0..<count { _ = try await client.send(Request<Data>(path: paths[index % paths.count])) }
        case .intercept1:
            let client = NetworkClient(baseURL: base, transport: CannedTransport()) { PassThroughInterceptor() }
            let request = Request<Data>(path: "/movies")
            for _ in 0..<count { _ = try await client.send(request) }
        case .timeout, .guarded:
            let client = NetworkClient(
                baseURL: base, transport: CannedTransport(honorsCancellation: self != .guarded),
                configuration: .init(timeout: self == .timeout ? .seconds(30) : nil))
            let request = Request<Data>(path: "/movies")
            for _ in 0..<count { _ = try await client.send(request) }
        case .plainJSON, .realistic, .realisticUninterrupted:
            let client = NetworkClient(baseURL: base, transport: CannedTransport()) {
                switch self {
                case .realistic: realisticBehaviors()
                case .realisticUninterrupted: realisticBehaviors(interrupting: false)
                default: []
                }
            }
            let request = Request<Movie>(path: "/movies/7")
            for _ in 0..<count { _ = try await client.send(request) }
        }
    }
}
