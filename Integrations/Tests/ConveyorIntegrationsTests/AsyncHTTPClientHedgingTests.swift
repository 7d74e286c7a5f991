import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorTesting
import Foundation
import IntegrationsTestSupport
import Testing

/// `HedgingLoopbackTests` over AsyncHTTPClient: the server holds the first request to
/// `/hedge/<name>` until the client hangs up; the hedge's answer is kept and the first attempt's
/// connection is closed.
@Suite struct AsyncHTTPClientHedgingTests {
    struct Answer: Decodable { var attempt: Int }
    struct Ended: Decodable {
        var hits: Int
        var hungUp: Bool?
    }

    @Test func theLoserIsCancelledOnTheWireOverAsyncHTTPClient() async throws {
        try await LocalServer.withServer { server in
            let clock = ManualClock()
            let client = NetworkClient(
                baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient),
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
            let ended: Ended = try await ahcClient(server).get("/hedge/\(name)/ended")
            #expect(ended.hits == 2)
            #expect(ended.hungUp == true, "the server answered the first attempt: the client never hung up")
        }
    }
}
