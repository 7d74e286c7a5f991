// The child process of the AsyncHTTPClient conformance tests: runs one check against
// AsyncHTTPClientTransport, so a transport that ends the process fails one check instead of the
// test run (TransportConformance.runInChildProcess).
//
//   ahc-conformance-child --conformance-check <check>
import AsyncHTTPClient
import ConveyorAsyncHTTPClient
import ConveyorTransportConformance
import Foundation

let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())
do {
    // The process exits once the check has run; the client ends with it.
    await TransportConformance.runChildProcess(on: try AsyncHTTPClientTransport(client: client))
} catch {
    FileHandle.standardError.write(Data("ahc-conformance-child: \(error)\n".utf8))
    exit(70)
}
