// The child process of the transport conformance tests (Tests/ConveyorTestingTests): runs one
// check against the transport its first argument names, so that a transport that ends the
// process (FoundationNetworking's traps on Linux) fails one check instead of the test run.
//
//   conformance-child urlsession|urlsession-ephemeral|plain-session|trapping --conformance-check <check>
//
// `trapping` ends the process on its first request: the kit's own tests use it.
import Conveyor
import ConveyorTransportConformance
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

switch CommandLine.arguments.dropFirst().first {
case "urlsession":
    await TransportConformance.runChildProcess(on: URLSessionTransport())
case "urlsession-ephemeral":
    await TransportConformance.runChildProcess(on: URLSessionTransport(configuration: .ephemeral))
case "plain-session":
    await TransportConformance.runChildProcess(on: URLSession(configuration: .ephemeral))
case "trapping":
    await TransportConformance.runChildProcess(on: TrappingTransport())
default:
    FileHandle.standardError.write(Data("usage: conformance-child urlsession|urlsession-ephemeral|plain-session ...\n".utf8))
    exit(64)
}

/// Ends the process on its first request, as a platform trap would.
struct TrappingTransport: HTTPTransport {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        fatalError("a deliberate trap for the conformance kit's tests")
    }
}
