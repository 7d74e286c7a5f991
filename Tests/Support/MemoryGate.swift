/// Tests that measure this process's resident memory, and tests that move tens of megabytes,
/// take turns: the measurement is of the whole process, and a 64 MiB transfer in a parallel
/// test once counted as 176 MB of "growth" in a test whose bound is 100 MB.
///
/// ```swift
/// await MemoryGate.shared.acquire()
/// // measure, or transfer
/// await MemoryGate.shared.release()
/// ```
public actor MemoryGate {
    /// The one gate of the test process.
    public static let shared = MemoryGate()

    private var held = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Waits until no other holder is inside, then enters.
    public func acquire() async {
        guard held else {
            held = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Leaves; the next waiter, if any, enters.
    public func release() {
        if waiting.isEmpty {
            held = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}
