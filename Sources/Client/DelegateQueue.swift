#if canImport(FoundationNetworking)
    import Foundation
    import FoundationNetworking
#else
    import Foundation
#endif

/// The delegate queue of ``URLSessionTransport``'s session: serial, on a dispatch queue of its
/// own, and on Linux it holds FoundationNetworking back while it is behind.
///
/// FoundationNetworking hands every received chunk (16 KiB) to the delegate queue as an
/// operation of its own, from the session's work queue, the thread that drives libcurl, and never
/// waits for it. When the network is faster than the delegate queue, those operations and their
/// bytes pile up in memory: a 1 GiB download over loopback held up to 1,100 of them (18 MB), and
/// its peak memory grew by 41–71 MB (up to 364 MB on a busy machine).
///
/// So `addOperation` waits while ``limit`` operations are already queued. It is called on the
/// work queue, so libcurl stops reading the socket, and TCP's own flow control slows the sender.
/// The wait is bounded by ``longestWait`` per operation, and there is none while a `cancel()` of
/// one of the session's tasks is in progress: that `cancel()` holds a lock that a completion on
/// the delegate queue needs, and waits for the work queue, so a work queue held back by a stalled
/// delegate queue would only let it through 50 ms per chunk. Under load (eight 2 MiB responses
/// over their size limit at once, the chaos soak) that stalled requests for more than 30 s; now
/// the work queue runs freely until the cancel is through.
///
/// Apple's URLSession has flow control of its own and does not need this; there the queue never
/// waits.
final class DelegateQueue: OperationQueue, @unchecked Sendable {
    // @unchecked: `queued`, `cancelling` and `heldBack` are only touched with `condition` locked; the rest is immutable.

    /// Operations that may wait before `addOperation` holds its caller back (about 1 MiB of
    /// received chunks).
    static let limit = 64
    /// The longest one `addOperation` waits.
    static let longestWait: TimeInterval = 0.05

    private let condition = NSCondition()
    private var queued = 0
    /// Cancels of the session's tasks in progress now.
    private var cancelling = 0
    /// How many times `addOperation` held its caller back (for tests).
    private var heldBack = 0
    /// The dispatch queue the operations run on, which `underlyingQueue` does not retain.
    private let dispatchQueue: DispatchQueue
    /// The serial queue the session's task cancels run on (see `TaskCanceller`): one per
    /// session, so that a `cancel()` FoundationNetworking holds back delays no other session's.
    let cancelQueue: DispatchQueue

    /// A serial queue running on a dispatch queue of its own. The session's default queue runs its
    /// operations on the global queue that Swift's cooperative pool also uses (as many threads as
    /// cores); while tasks keep those threads busy, received chunks wait there in memory.
    init(label: String) {
        dispatchQueue = DispatchQueue(label: label)
        cancelQueue = DispatchQueue(label: label + ".cancel")
        super.init()
        maxConcurrentOperationCount = 1
        underlyingQueue = dispatchQueue
    }

    /// Operations queued and not finished yet (for tests).
    var pending: Int {
        condition.lock()
        defer { condition.unlock() }
        return queued
    }

    /// How many times ``addOperation(_:)`` has held its caller back (for tests: whether a caller
    /// waited, independent of how busy the machine is).
    var timesHeldBack: Int {
        condition.lock()
        defer { condition.unlock() }
        return heldBack
    }

    #if canImport(FoundationNetworking)
        override func addOperation(_ block: @escaping @Sendable () -> Void) {
            condition.lock()
            if queued >= Self.limit, cancelling == 0 {
                heldBack += 1
                let deadline = Date(timeIntervalSinceNow: Self.longestWait)
                while queued >= Self.limit, cancelling == 0, condition.wait(until: deadline) {}
            }
            queued += 1
            condition.unlock()
            // Straight onto the serial dispatch queue, in the order it came: an `Operation` around
            // each block (its object, state changes, KVO and locks) cost about 58,000 instructions
            // and 59 mallocs per request. A block always runs (nothing can cancel it), so it
            // counts itself off when it has: a lost count would hold the session back forever.
            dispatchQueue.async { [self] in
                block()
                finished()
            }
        }

        /// Waits for the operations and for the blocks ``addOperation(_:)`` handed to the
        /// dispatch queue.
        override func waitUntilAllOperationsAreFinished() {
            super.waitUntilAllOperationsAreFinished()
            dispatchQueue.sync {}
        }

        /// A `cancel()` of one of the session's tasks starts: nothing waits until it ends.
        func cancelStarted() {
            condition.lock()
            cancelling += 1
            condition.broadcast()
            condition.unlock()
        }

        /// The `cancel()` that ``cancelStarted()`` announced has returned.
        func cancelEnded() {
            condition.lock()
            cancelling -= 1
            condition.unlock()
        }

        private func finished() {
            condition.lock()
            queued -= 1
            condition.signal()
            condition.unlock()
        }
    #endif
}
