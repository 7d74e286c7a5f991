import Conveyor
import Foundation

/// The floor: returns one canned response, allocating nothing per call.
public struct CannedTransport: HTTPTransport {
    let body: Data
    public init(body: Data = Data(#"{"id":7,"title":"Heat","year":1995}"#.utf8)) { self.body = body }
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
public func realisticBehaviors() -> [any RequestBehavior] {
    [
        HeadersBehavior(["User-Agent": "Bench/1.0", "Accept-Language": "en"]),
        AuthTokenBehavior(tokens: CachedToken()),
        ActivityCounterBehavior(counter: NetworkActivityCounter()),
        BackgroundTaskBehavior(runner: FakeBackgroundTasks()),
        RetryBehavior(.exponentialBackoff(maxAttempts: 3)),
        LoggingBehavior(sink: DisabledSink()),
    ]
}

/// The small body the realistic scenarios decode.
public struct Movie: Codable, Sendable {
    public var id: Int
    public var title: String
    public var year: Int
}
