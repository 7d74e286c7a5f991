import Foundation
import Testing

@testable import Conveyor

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``URLSessionTransport`` cancels its tasks on a serial queue of its session's own
/// (`TaskCanceller`): FoundationNetworking can hold a `cancel()` until a fast transfer has ended,
/// and with one queue for the process every other session's cancels waited behind it.
/// `HedgingLoopbackTests.aCancelHeldOnAnotherTransportDoesNotHoldBackTheLosers` shows it on the
/// wire: a hedge's loser is cancelled at once while another transport's cancel queue is held.
@Suite struct CancelQueueTests {
    @Test func eachTransportCancelsOnAQueueOfItsOwn() {
        let first = URLSessionTransport(configuration: .ephemeral)
        let second = URLSessionTransport(configuration: .ephemeral)
        #expect(TaskCanceller.queue(for: first.session) !== TaskCanceller.queue(for: second.session))
        #expect(TaskCanceller.queue(for: first.session) === TaskCanceller.queue(for: first.session))
    }

    /// A plain `URLSession` used as the transport has no ``DelegateQueue``: such sessions share
    /// one cancel queue, which is no transport's.
    @Test func plainSessionsShareAQueueThatIsNoTransports() {
        let transport = URLSessionTransport(configuration: .ephemeral)
        let plain = URLSession(configuration: .ephemeral)
        let other = URLSession(configuration: .ephemeral)
        #expect(TaskCanceller.queue(for: plain) !== TaskCanceller.queue(for: transport.session))
        #expect(TaskCanceller.queue(for: plain) === TaskCanceller.queue(for: other))
    }
}
