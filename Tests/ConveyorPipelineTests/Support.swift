import ConveyorTesting
import Foundation

let testBaseURL = URL(string: "http://127.0.0.1:9/api")!

/// A client on a mock transport with the given behaviors and clock.
func makeClient(
    _ mock: MockTransport, clock: any Clock<Duration> = ImmediateClock(), attemptLimit: Int = 10,
    @RequestBehaviorBuilder behaviors: () -> [any RequestBehavior] = { [] }
) -> NetworkClient {
    NetworkClient(
        baseURL: testBaseURL, transport: mock,
        configuration: .init(clock: clock, timeoutClock: timeoutClock(for: clock), attemptLimit: attemptLimit), behaviors: behaviors)
}

/// Retries the first `count` failed attempts at once.
func retryFirst(_ count: Int, after delay: Duration = .zero) -> @Sendable (NetworkError, RequestContext) -> RetryDecision {
    { _, context in context.attempt <= count ? .retry(after: delay) : .doNotRetry }
}

extension HookRecorder {
    /// How many times each label got `afterSuccess` + `afterFailure`, versus `beforeSend`.
    func isBalanced(labels: [String]) -> Bool {
        labels.allSatisfy { label in
            let hooks = hooks(of: label)
            let begins = hooks.filter { $0 == .beforeSend }.count
            let ends = hooks.filter { $0 == .afterSuccess || $0 == .afterFailure }.count
            return begins == ends && begins <= 1
        }
    }
}

/// The `NetworkError` a task ended with, or `nil` if it succeeded.
func failure<T>(of task: Task<T, any Error>) async -> NetworkError? {
    do {
        _ = try await task.value
        return nil
    } catch let error as NetworkError {
        return error
    } catch {
        return .transportFailed(error)
    }
}

/// The timeout clock for a test client whose waits run on `clock`: a manual clock drives the
/// timeouts too (the test steps through both); an immediate clock skips waits only, and the
/// timeouts stay on real time, as `NetworkClient.Configuration.timeoutClock` intends.
func timeoutClock(for clock: any Clock<Duration>) -> any Clock<Duration> {
    clock is ImmediateClock ? ContinuousClock() : clock
}
