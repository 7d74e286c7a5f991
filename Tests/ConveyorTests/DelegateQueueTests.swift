import ConveyorTestSupport
import Foundation
import Testing

@testable import Conveyor

/// ``DelegateQueue``: on Linux it holds back whoever adds operations while ``DelegateQueue/limit``
/// of them wait (FoundationNetworking's work queue, in real use), never longer than
/// ``DelegateQueue/longestWait`` per operation, and it never loses count of an operation.
@Suite struct DelegateQueueTests {
    /// A queue whose first operation blocks its thread until `release` is signalled, so the
    /// operations added after it wait.
    func heldQueue() -> (DelegateQueue, DispatchSemaphore) {
        let queue = DelegateQueue(label: "test")
        let release = DispatchSemaphore(value: 0)
        queue.addOperation { release.wait() }
        return (queue, release)
    }

    /// Runs `body` on a thread of its own (it may block), and suspends until it returns.
    func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    @Test(.enabled(if: isLinux, "FoundationNetworking only: Apple's URLSession has flow control of its own"))
    func aFullQueueHoldsTheCallerBackForAtMostTheLongestWait() async {
        let (queue, release) = heldQueue()
        defer { release.signal() }
        let (waits, heldWhileFilling) = await onThread { () -> ([Duration], Int) in
            let clock = ContinuousClock()
            // The held operation is the first; `limit - 1` more fill the queue without waiting.
            for _ in 1..<DelegateQueue.limit { queue.addOperation {} }
            let heldWhileFilling = queue.timesHeldBack
            // Each operation past the limit waits, and gives up at the longest wait.
            return ((0..<3).map { _ in clock.measure { queue.addOperation {} } }, heldWhileFilling)
        }
        let longest = Duration.milliseconds(Int(DelegateQueue.longestWait * 1000))
        // Counted, not timed: a busy machine can pause a thread longer than the longest wait.
        #expect(heldWhileFilling == 0, "adding up to the limit must not wait")
        #expect(queue.timesHeldBack == 3)
        for wait in waits {
            #expect(wait >= longest, "an operation past the limit went in after \(wait)")
            // It ends: a queue that never drains (a deadlock in real use) only slows the session.
            #expect(wait < .seconds(30))
        }
        #expect(queue.pending == DelegateQueue.limit + 3)
    }

    @Test(.enabled(if: isLinux, "FoundationNetworking only"))
    func aWaitingCallerGoesOnAsSoonAsAnOperationHasRun() async {
        let (queue, release) = heldQueue()
        for _ in 1..<DelegateQueue.limit { queue.addOperation {} }
        // The caller blocks; releasing the held operation lets the queue drain, and the add
        // goes in then. That it went in at all, with the queue drained, is what is checked: the
        // count went down as operations ran.
        let added = Locked(false)
        let adding = Task { await onThread { queue.addOperation { added.withLock { $0 = true } } } }
        release.signal()
        await adding.value
        await onThread { queue.waitUntilAllOperationsAreFinished() }
        #expect(added.withLock { $0 })
        #expect(queue.pending == 0)
    }

    @Test func operationsRunOnceEachInOrderAndTheCountReturnsToZero() async {
        let queue = DelegateQueue(label: "test")
        let order = Locked<[Int]>([])
        await onThread {
            for index in 0..<(DelegateQueue.limit * 4) { queue.addOperation { order.withLock { $0.append(index) } } }
            queue.waitUntilAllOperationsAreFinished()
        }
        #expect(order.withLock { $0 } == Array(0..<(DelegateQueue.limit * 4)))
        #expect(queue.pending == 0)
    }

    /// A block is handed to the dispatch queue, not wrapped in an `Operation` (which cost about
    /// 58,000 instructions a request): `cancelAllOperations()` has nothing to cancel, every block
    /// runs once, in order, and counts itself off, and `waitUntilAllOperationsAreFinished()` waits
    /// for the blocks too.
    @Test(.enabled(if: isLinux, "FoundationNetworking only"))
    func blocksAreNotOperationsAndEachCountsItselfOffWhenItHasRun() async {
        let (queue, release) = heldQueue()
        let ran = Locked<[Int]>([])
        for index in 0..<10 { queue.addOperation { ran.withLock { $0.append(index) } } }
        #expect(queue.operationCount == 0, "a block was wrapped in an Operation")
        #expect(queue.pending == 11)
        queue.cancelAllOperations()
        release.signal()
        await onThread { queue.waitUntilAllOperationsAreFinished() }
        #expect(ran.withLock { $0 } == Array(0..<10), "waitUntilAllOperationsAreFinished returned before the blocks ran")
        #expect(queue.pending == 0, "a lost count would hold the session back forever")
    }
}
