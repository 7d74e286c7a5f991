import ConveyorTesting
import ConveyorTransportConformance
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
            check, executable: child, options: .init(promptness: .seconds(30), hangLimit: .seconds(hangBound)))
        #expect(outcome.status == .passed, "\(outcome)")
        // The resume checks also pass when a download fails before anything is kept: here the
        // resume must have run (the server saw a Range), and the streamed transfers stayed small.
        if [.resumeWithChangedValidator, .resumeWithPartialContent, .resumeRangeIgnored].contains(check) {
            #expect(outcome.detail?.contains("the retry asked for the rest with Range") == true, "\(outcome)")
        }
        if check == .requestBodies {
            // AsyncHTTPClient replaces a request's own framing fields with the body's.
            #expect(outcome.detail?.contains("disagrees with its body: sent framed by the body's length") == true, "\(outcome)")
        }
        if check == .streamedTransfers {
            #expect(outcome.detail?.contains("peak resident growth") == true, "\(outcome)")
        }
    }
}
