import ConveyorTesting
import Foundation

let apiURL = URL(string: "https://api.test/v1")!

func makeClient(
    _ mock: MockTransport, clock: any Clock<Duration> = ImmediateClock(),
    @RequestBehaviorBuilder behaviors: () -> [any RequestBehavior]
) -> NetworkClient {
    NetworkClient(baseURL: apiURL, transport: mock, configuration: .init(clock: clock, timeoutClock: timeoutClock(for: clock)), behaviors: behaviors)
}

/// The outcome of a request as a short name, for compact assertions.
func outcome(_ body: () async throws -> Void) async -> String {
    do {
        try await body()
        return "success"
    } catch {
        guard let error = error as? NetworkError else { return "non-NetworkError \(type(of: error))" }
        switch error {
        case .unauthorized: return "unauthorized"
        case .notFound: return "notFound"
        case .unacceptableStatus: return "status \(error.status ?? 0)"
        case .behaviorFailed: return "\(error.behavior ?? "?") failed in \(error.hook.map { "\($0)" } ?? "?")"
        case .cancelled: return "cancelled"
        case .timedOut: return "timedOut"
        case .offline: return "offline"
        case .connectionFailed: return "connectionFailed"
        default: return "\(error)"
        }
    }
}

/// Suspends callers until `open()`; used to hold a refresh until every request has hit 401.
actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
    func open() {
        isOpen = true
        waiters.forEach { $0.resume() }
        waiters = []
    }
}

/// Counts calls and opens a gate at a threshold.
actor Tally {
    private(set) var count = 0
    let threshold: Int
    let gate: Gate
    init(threshold: Int, gate: Gate) {
        self.threshold = threshold
        self.gate = gate
    }
    func add() async {
        count += 1
        if count == threshold { await gate.open() }
    }
}

/// The timeout clock for a test client whose waits run on `clock`: a manual clock drives the
/// timeouts too (the test steps through both); an immediate clock skips waits only, and the
/// timeouts stay on real time, as `NetworkClient.Configuration.timeoutClock` intends.
func timeoutClock(for clock: any Clock<Duration>) -> any Clock<Duration> {
    clock is ImmediateClock ? ContinuousClock() : clock
}
