import AsyncHTTPClient
import ConveyorAsyncHTTPClient
import ConveyorTesting
import Testing

/// `AsyncHTTPClientTransport` against the transport conformance kit: every check, no known issue.
/// One check at a time, as `runAll` does (each starts its own loopback server).
@Suite(.serialized) struct AsyncHTTPClientConformanceTests {
    static let transport: AsyncHTTPClientTransport? = try? AsyncHTTPClientTransport(client: sharedHTTPClient)

    @Test(arguments: TransportConformance.Check.allCases)
    func asyncHTTPClientTransportConforms(_ check: TransportConformance.Check) async throws {
        let transport = try #require(Self.transport)
        // Generous: the suite also runs on a loaded 2-core machine.
        let outcome = await TransportConformance.run(check, on: transport, options: .init(promptness: .seconds(30)))
        #expect(outcome.status == .passed, "\(outcome)")
    }
}
