/// Tests that measure this process's resident memory, and tests that move tens of megabytes,
/// take turns: the measurement is of the whole process, and a 64 MiB transfer in a parallel
/// test once counted as 176 MB of "growth" in a test whose bound is 100 MB.
///
/// ```swift
/// try await MemoryGate.withTurn {
///     // measure, or transfer
/// }
/// ```
///
/// A test that has the turn starts its servers without waiting for `ServerGate`: a test that
/// holds a server and waits for the turn must never wait for the holder of the turn.
public actor MemoryGate {
    /// The one gate of the test process.
    static let shared = MemoryGate()

    /// Whether the current task (or the task it belongs to) has the turn.
    @TaskLocal static var hasTurn = false

    private var held = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Runs `body` once no other test has the turn, and gives the turn to the next waiter after.
    /// - Parameter body: The measuring or transferring code.
    /// - Returns: What `body` returns.
    public static func withTurn<T>(_ body: () async throws -> T) async rethrows -> T {
        if hasTurn { return try await body() }
        await shared.acquire()
        do {
            let value = try await $hasTurn.withValue(true) { try await body() }
            await shared.release()
            return value
        } catch {
            await shared.release()
            throw error
        }
    }

    private func acquire() async {
        guard held else {
            held = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty {
            held = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}
