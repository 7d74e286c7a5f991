import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Deadlines are absolute (contract rule 10): a response that arrives a byte at a time never
/// outlives the per-attempt timeout, under any chain of the standard behaviors, with requests
/// that retry and that join a shared call. Every trickle lasts at least twice the timeout, so a
/// success would mean an attempt outlived its deadline; the server's pace is the only real time
/// involved, and the outcome, not a clock, is what is checked.
///
/// The requests run in a child process (`test-child trickle`, Tests/TestChild): half the trickles
/// send the status line and headers a byte at a time, and a request whose cancel FoundationNetworking
/// had not applied yet when the test stopped its server met the connection closed in the middle of
/// its headers, which ends the process on Linux (swift-corelibs-foundation#5285, Docs/Reliability.md)
/// — here the child's, which exits before the server stops, never the test run's.
@Suite struct TrickleDeadlineTests {
    @Test(arguments: 0..<5)
    func aTrickledResponseNeverOutlivesTheTimeout(chainIndex: Int) async throws {
        try await LocalServer.withServer { server in
            let found = try #require(await TestChild.run(["trickle", server.baseURL.absoluteString, "\(chainIndex)"]))
            for round in 0..<4 {
                let line = try #require(found["round\(round)"], "round \(round) reported nothing")
                // "<size>b/<interval>s/head:<bool>/<in flight>:<outcome>,<outcome>,…"
                let parts = line.split(separator: ":").last.map { $0.split(separator: ",").map(String.init) } ?? []
                #expect(!parts.isEmpty && parts.allSatisfy { $0 == "timedOut" }, "chain \(chainIndex), round \(round): \(line)")
            }
        }
    }
}
