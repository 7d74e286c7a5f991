import ConveyorTesting
import IntegrationsTestSupport
import Testing

/// `AsyncHTTPClientTransport` against the transport conformance kit: every check, no known issue,
/// each in a child process of its own (`ahc-conformance-child`), so that a trap would fail one
/// check instead of the test run. One check at a time, as `runAll` does.
@Suite(.serialized) struct AsyncHTTPClientConformanceTests {
    @Test(arguments: TransportConformance.Check.allCases)
    func asyncHTTPClientTransportConforms(_ check: TransportConformance.Check) async throws {
        let child = try #require(BuiltExecutable.url("ahc-conformance-child"), "ahc-conformance-child was not built")
        // Generous: the suite also runs on a loaded 2-core machine.
        let outcome = await TransportConformance.runInChildProcess(
            check, executable: child, options: .init(promptness: .seconds(30)))
        #expect(outcome.status == .passed, "\(outcome)")
    }
}
