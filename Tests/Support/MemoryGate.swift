/// Tests that move tens of megabytes take turns, so that no more than one of them loads the
/// machine at a time. (Tests that measure memory measure a child process of their own; measured
/// in the test process, a 64 MiB transfer in a parallel test once counted as 176 MB of "growth"
/// in a test whose bound is 100 MB.)
///
/// ```swift
/// try await MemoryGate.withTurn {
///     // measure, or transfer
/// }
/// ```
///
/// A test that has the turn starts its servers without waiting for `ServerGate`: a test that
/// holds a server and waits for the turn must never wait for the holder of the turn.
public enum MemoryGate {
    /// The one turn of the test process.
    private static let turn = Places(1)

    /// Whether the current task (or the task it belongs to) has the turn.
    @TaskLocal static var hasTurn = false

    /// Runs `body` once no other test has the turn, and gives the turn to the next waiter after.
    /// - Parameter body: The measuring or transferring code.
    /// - Returns: What `body` returns.
    public static func withTurn<T>(_ body: () async throws -> T) async rethrows -> T {
        if hasTurn { return try await body() }
        return try await turn.inside { try await $hasTurn.withValue(true) { try await body() } }
    }
}

/// A number of places that tasks wait for in the order they came.
actor Places {
    private let count: Int
    private var taken = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// - Parameter count: How many tasks may be inside at once (at least 1).
    init(_ count: Int) { self.count = max(1, count) }

    /// Runs `body` once a place is free, and frees it after.
    /// - Parameter body: The code to run in the place.
    /// - Returns: What `body` returns.
    nonisolated func inside<T>(_ body: () async throws -> T) async rethrows -> T {
        await enter()
        do {
            let value = try await body()
            await leave()
            return value
        } catch {
            await leave()
            throw error
        }
    }

    private func enter() async {
        guard taken >= count else {
            taken += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func leave() {
        if waiting.isEmpty { taken -= 1 } else { waiting.removeFirst().resume() }
    }
}
