import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@testable import Conveyor

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``URLSessionTransport`` cancels its tasks on a serial queue of its session's own
/// (`TaskCanceller`): FoundationNetworking can hold a `cancel()` until a fast transfer has ended,
/// and with one queue for the process every other session's cancels waited behind it. A hedge's
/// loser is the cancel that shows it: the local server holds the first `/hedge/<name>` request
/// until the client hangs up (30 s at most) and reports whether it did.
@Suite struct CancelQueueTests {
    struct Answer: Decodable { var attempt: Int }
    struct Ended: Decodable {
        var hits: Int
        var hungUp: Bool?
    }

    @Test func eachTransportCancelsOnAQueueOfItsOwn() {
        let first = URLSessionTransport(configuration: .ephemeral)
        let second = URLSessionTransport(configuration: .ephemeral)
        #expect(TaskCanceller.queue(for: first.session) !== TaskCanceller.queue(for: second.session))
        #expect(TaskCanceller.queue(for: first.session) === TaskCanceller.queue(for: first.session))
    }

    /// Another transport's cancel queue is held (as FoundationNetworking holds a `cancel()` of a
    /// fast transfer) for the whole test; the hedged request's loser, on a transport of its own,
    /// is still cancelled on the wire at once.
    @Test func aCancelHeldOnOneTransportDoesNotHoldBackAnothers() async throws {
        let other = URLSessionTransport(configuration: .ephemeral)
        let release = DispatchSemaphore(value: 0)
        TaskCanceller.queue(for: other.session).async { release.wait() }
        defer { release.signal() }
        try await LocalServer.withServer { server in
            let clock = ManualClock()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral),
                configuration: .init(clock: clock)
            ) {
                HedgingBehavior(delay: .fixed(.seconds(1)))
            }
            let name = UUID().uuidString
            let task = Task { () async throws -> Answer in try await client.get("/hedge/\(name)") }
            await clock.waitForSleepers(1)  // the hedge timer
            clock.advance(by: .seconds(1))
            let answer = try await task.value
            #expect(answer.attempt == 2)
            let plain = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral))
            let ended: Ended = try await plain.get("/hedge/\(name)/ended")
            #expect(ended.hits == 2)
            #expect(ended.hungUp == true, "the loser's cancel waited behind the other transport's: the server answered it")
        }
    }
}
