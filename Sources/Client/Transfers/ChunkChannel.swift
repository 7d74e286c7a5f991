import ConveyorPipeline
import Foundation

/// Something a ``BoundedChannel`` queues, weighed in bytes.
protocol ChannelElement: Sendable {
    /// About how many bytes it holds.
    var channelWeight: Int { get }
}

extension Data: ChannelElement {
    var channelWeight: Int { count }
}

/// A channel of body chunks.
typealias ChunkChannel = BoundedChannel<Data>

/// A bounded, single-producer single-consumer queue of body chunks (or events) between a
/// transfer and the code reading it. The producer waits while `capacity` bytes are queued
/// (backpressure); the consumer waits while none are. Either side can leave: the consumer by
/// ``close()``, the producer by ``finish(_:)``.
final class BoundedChannel<Element: ChannelElement>: Sendable {
    private struct State {
        var chunks: [Element?] = []
        var head = 0
        var buffered = 0
        /// Set when the producer ended: `nil` error for a complete body.
        var end: NetworkError??
        var closed = false
        var consumer: CheckedContinuation<Void, Never>?
        var producer: CheckedContinuation<Void, Never>?
    }

    private enum SendStep { case queued(CheckedContinuation<Void, Never>?), wait, closed }
    private enum NextStep { case chunk(Element, CheckedContinuation<Void, Never>?), end(NetworkError?), wait }

    private let state = Locked(State())
    private let capacity: Int
    /// Called once when the consumer leaves before the end (to stop the transfer).
    private let onClose: Locked<(@Sendable () -> Void)?> = Locked(nil)

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Sets what runs when the consumer leaves early; runs it at once if it already has.
    func whenClosed(_ action: @escaping @Sendable () -> Void) {
        let closed = state.withLock { $0.closed }
        if closed { return action() }
        onClose.withLock { $0 = action }
        if state.withLock({ $0.closed }), let action = onClose.withLock({ $0.take() }) { action() }
    }

    /// Queues a chunk, waiting while the queue is full.
    /// - Throws: ``NetworkError/cancelled`` when the consumer has left or the producer's task is
    ///   cancelled.
    func send(_ chunk: Element) async throws(NetworkError) {
        while true {
            if Task.isCancelled { throw .cancelled }
            let step = state.withLock { state -> SendStep in
                if state.closed { return .closed }
                if state.buffered >= capacity && state.buffered > 0 { return .wait }
                state.chunks.append(chunk)
                state.buffered += chunk.channelWeight
                defer { state.consumer = nil }
                return .queued(state.consumer)
            }
            switch step {
            case .closed: throw .cancelled
            case .queued(let consumer):
                consumer?.resume()
                return
            case .wait:
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let resumeNow = state.withLock { state -> Bool in
                            if state.closed || state.buffered < capacity || Task.isCancelled { return true }
                            state.producer = continuation
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: {
                    state.withLock { $0.producer.take() }?.resume()
                }
            }
        }
    }

    /// The producer is done: `nil` for a complete body, or the error that ended it.
    func finish(_ error: NetworkError?) {
        let consumer = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.end == nil { state.end = .some(error) }
            return state.consumer.take()
        }
        consumer?.resume()
    }

    /// The next chunk, `nil` at the end of a complete body.
    /// - Throws: The error that ended the body, or ``NetworkError/cancelled`` when the reading
    ///   task is cancelled (which also closes the channel).
    func next() async throws(NetworkError) -> Element? {
        while true {
            let step = state.withLock { state -> NextStep in
                if state.head < state.chunks.count {
                    guard let chunk = state.chunks[state.head] else { return .wait }  // never: slots ahead of `head` are full
                    state.chunks[state.head] = nil  // the reader holds it now, not the queue
                    state.head += 1
                    if state.head == state.chunks.count {
                        state.chunks.removeAll(keepingCapacity: true)
                        state.head = 0
                    }
                    state.buffered -= chunk.channelWeight
                    return .chunk(chunk, state.buffered < capacity ? state.producer.take() : nil)
                }
                if state.closed { return .end(.cancelled) }
                if let end = state.end { return .end(end) }
                return .wait
            }
            switch step {
            case .chunk(let chunk, let producer):
                producer?.resume()
                return chunk
            case .end(let error):
                if let error { throw error }
                return nil
            case .wait:
                if Task.isCancelled {
                    close()
                    throw .cancelled
                }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let resumeNow = state.withLock { state -> Bool in
                            if state.head < state.chunks.count || state.end != nil || state.closed || Task.isCancelled {
                                return true
                            }
                            state.consumer = continuation
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: {
                    close()
                }
            }
        }
    }

    /// The consumer leaves: queued chunks are dropped, a waiting producer fails with
    /// ``NetworkError/cancelled``, and the close action runs (unless the body had ended).
    func close() {
        let (producer, consumer, ended) = state.withLock { state in
            let wasClosed = state.closed
            state.closed = true
            state.chunks = []
            state.head = 0
            state.buffered = 0
            return (state.producer.take(), state.consumer.take(), state.end != nil || wasClosed)
        }
        producer?.resume()
        consumer?.resume()
        if !ended, let action = onClose.withLock({ $0.take() }) { action() }
    }
}

extension Optional {
    /// The value, leaving `nil` behind.
    mutating func take() -> Wrapped? {
        defer { self = nil }
        return self
    }
}
