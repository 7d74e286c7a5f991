import Foundation

/// A process-level time limit for tests that could deadlock the process: if it is not disarmed
/// within `seconds`, it prints why and exits the test process with status 1, so a regression
/// fails CI instead of hanging it. It runs on a thread of its own, outside Swift's cooperative
/// pool, so it fires even when every pool thread is blocked.
///
/// ```swift
/// let watchdog = Watchdog(seconds: 120, "the cancellation storm")
/// defer { watchdog.disarm() }
/// ```
public final class Watchdog: Sendable {
    private let done = DispatchSemaphore(value: 0)

    /// Arms the watchdog.
    /// - Parameters:
    ///   - seconds: How long the guarded code may take.
    ///   - label: What is guarded, for the message.
    public init(seconds: Int, _ label: String) {
        let done = self.done
        Thread.detachNewThread {
            if done.wait(timeout: .now() + .seconds(seconds)) == .timedOut {
                FileHandle.standardError.write(
                    Data("WATCHDOG: \(label) did not finish within \(seconds) s; the process is stuck. Exiting.\n".utf8))
                exit(1)
            }
        }
    }

    /// Stops the watchdog: the guarded code finished.
    public func disarm() { done.signal() }
}

/// How long a test waits before it calls a wait a hang: five minutes. Generous on purpose: the
/// bound only tells a hang from an ending, and under the thread sanitizer on a two-core machine
/// the suites that compute for minutes (the randomized contract tests) hold the cooperative pool's
/// two threads for tens of seconds, during which nothing else runs. A bound of 30 s failed 23 of
/// 40 seeds of `DeduplicationModelTests` in such a run, seeds that finish in 0.13 s alone.
public let hangBound = 300

/// Runs `body`, giving up after `seconds` of real time: for tests whose failure mode is a hang.
/// The bound proves that something ended, not how fast; it is never reached when the code works.
/// - Returns: What `body` returned, or `nil` if it was still running at the bound: it is then
///   cancelled and left behind, not awaited, so a body that ignores cancellation fails the test
///   instead of hanging it (a task group would wait for it).
public func withinTimeLimit<T: Sendable>(seconds: Int, _ body: @escaping @Sendable () async -> T) async -> T? {
    let (outcomes, continuation) = AsyncStream.makeStream(of: T?.self, bufferingPolicy: .bufferingOldest(1))
    let work = Task { continuation.yield(await body()) }
    let timer = Task {
        try? await ContinuousClock().sleep(for: .seconds(seconds))  // a bound, not a wait
        continuation.yield(Optional<T>.none)
    }
    var iterator = outcomes.makeAsyncIterator()
    let first = await iterator.next() ?? nil
    timer.cancel()
    work.cancel()
    continuation.finish()
    return first
}
