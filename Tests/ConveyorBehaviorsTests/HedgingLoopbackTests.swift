import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@testable import Conveyor

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A hedged request over real HTTP (URLSession; `AsyncHTTPClientHedgingTests` runs the same over
/// AsyncHTTPClient): the local server holds the first request to `/hedge/<name>` until the client
/// hangs up and answers every later one at once. The hedge delay is on a manual clock, so the
/// hedge goes when the test says: the answer kept is the hedge's, and the server sees the client
/// hang up on the first attempt (the loser is cancelled on the wire, not left to time out).
@Suite struct HedgingLoopbackTests {
    struct Answer: Decodable { var attempt: Int }
    struct Ended: Decodable {
        var hits: Int
        var hungUp: Bool?
    }

    @Test func theLoserIsCancelledOnTheWireAndTheHedgesAnswerKept() async throws {
        try await Self.hedgedRequestEndsItsLoserOnTheWire()
    }

    /// `URLSessionTransport` cancels each session's tasks on a serial queue of that session's own
    /// (`TaskCanceller`, `CancelQueueTests`): FoundationNetworking can hold a `cancel()` until a
    /// fast transfer has ended, and with one queue for the process every other session's cancels
    /// waited behind it. Here another transport's cancel queue is held for the whole test, and
    /// the loser, on a transport of its own, is still cancelled on the wire at once (with one
    /// queue for the process, the server waits its 30 s and answers it).
    @Test func aCancelHeldOnAnotherTransportDoesNotHoldBackTheLosers() async throws {
        let other = URLSessionTransport(configuration: .ephemeral)
        let release = DispatchSemaphore(value: 0)
        TaskCanceller.queue(for: other.session).async { release.wait() }
        defer { release.signal() }
        try await Self.hedgedRequestEndsItsLoserOnTheWire()
    }

    /// A hedged GET of `/hedge/<name>` over a transport of its own: the hedge's answer is kept and
    /// the server saw the client hang up on the first attempt.
    static func hedgedRequestEndsItsLoserOnTheWire() async throws {
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
            #expect(ended.hungUp == true, "the server answered the first attempt: the client never hung up")
        }
    }
}
