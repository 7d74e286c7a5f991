import ConveyorPipeline
import ConveyorTesting
import Foundation

/// A settable "now" for `CacheBehavior(now:)`: tests step time instead of sleeping.
final class FakeNow: Sendable {
    private let value = Locked(Date(timeIntervalSince1970: 1_750_000_000))
    var date: Date { value.withLock { $0 } }
    func advance(_ seconds: Double) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var function: @Sendable () -> Date { { [self] in self.date } }
}

/// Records the cache's outcome of every request (registered before the cache, so its
/// `afterSuccess`/`afterFailure` run after the cache's `intercept`).
final class OutcomeLog: SuccessObserving, FailureObserving {
    private let list = Locked<[CacheOutcome?]>([])
    var all: [CacheOutcome?] { list.withLock { $0 } }
    var last: CacheOutcome? { list.withLock { $0.last ?? nil } }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        let outcome = context[CacheOutcome.self]
        list.withLock { $0.append(outcome) }
    }
    func afterFailure(_ error: NetworkError, context: RequestContext) async {
        let outcome = context[CacheOutcome.self]
        list.withLock { $0.append(outcome) }
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` for a date.
func httpDate(_ date: Date) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: date)
}

/// A cache client on `apiURL` over `mock`, with an outcome log outermost.
func cacheClient(
    _ mock: MockTransport, now: FakeNow, storage: any CacheStorage = MemoryCacheStorage(), log: OutcomeLog = OutcomeLog()
) -> NetworkClient {
    NetworkClient(baseURL: apiURL, transport: mock) {
        log
        CacheBehavior(storage: storage, now: now.function)
    }
}

/// A fresh empty directory under the temporary directory.
func temporaryDirectory() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-cache-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
