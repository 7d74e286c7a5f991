import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Contract rule 16 on the wire: a transfer the client ended (a limit reached, a loop left) stops
/// on the connection, not only in the API. The loopback server's `/endless` writes up to ``cap`` (128 MiB)
/// and counts what the kernel took before the connection broke; `/endless/written` answers once
/// that handler has stopped (the server saw the connection closed), so nothing here sleeps.
@Suite struct StreamAndUploadWireEndTests {
    /// What the server can write after the client decided to stop: both ends' socket buffers
    /// (a few MiB on loopback), the bytes the transport holds in memory (2 MiB) and what arrived
    /// while the cancellation reached the session. Far below the hundreds of MiB a transfer that
    /// keeps running reaches.
    static let bound = 32 << 20
    /// What `/endless` writes at most here.
    static let cap = 4 * bound

    struct Written: Decodable, Sendable {
        let written: Int
        let finished: Bool
    }

    enum Ending: String, CaseIterable, Sendable {
        /// An event stream whose one line never ends: `.responseTooLarge` at 64 KiB.
        case eventLineTooLong
        /// A streamed body whose loop is left after the first chunk.
        case streamLeftEarly
        /// A streamed body read with `collect(limit:)` past its limit.
        case streamOverItsLimit
        /// A download past its `maxSize`.
        case downloadOverMaxSize
        /// A response past the client's `maxResponseSize`.
        case sendOverMaxResponseSize
    }

    /// How many bytes `/endless?key=` wrote before it stopped, once it has.
    static func written(_ server: LocalServer, key: String) async throws -> Written {
        let reader = NetworkClient(baseURL: server.baseURL, configuration: .init(timeout: .seconds(150)))
        return try await reader.send(Request<Written>(path: "/endless/written", query: ["key": key, "wait": 120]))
    }

    @Test(arguments: Ending.allCases)
    func anEndedTransferStopsOnTheWire(_ ending: Ending) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await LocalServer.withServerInMemoryTurn { server in
            let key = UUID().uuidString
            let transport = URLSessionTransport(configuration: .ephemeral)
            let client = NetworkClient(
                baseURL: server.baseURL, transport: transport,
                configuration: .init(timeout: .seconds(120), maxResponseSize: 1 << 20))
            // At most 4 × the bound: enough to tell a transfer that went on from one that
            // stopped, without a 1 GiB download loading the machine under the other suites.
            let bytes = Request<Data>(path: "/endless", query: ["key": key, "type": "bytes", "bytes": Self.cap])
            let outcome: NetworkError?
            do {
                switch ending {
                case .eventLineTooLong:
                    for try await _ in client.events(Request<Data>(path: "/endless", query: ["key": key, "bytes": Self.cap])) {}
                case .streamLeftEarly:
                    for try await _ in try await client.stream(bytes).body { break }
                    throw NetworkError.cancelled  // left on purpose
                case .streamOverItsLimit:
                    _ = try await client.stream(bytes).body.collect(limit: 1 << 20)
                case .downloadOverMaxSize:
                    _ = try await client.download(bytes, to: scratch.file("endless.bin"), maxSize: 1 << 20)
                case .sendOverMaxResponseSize:
                    _ = try await client.send(bytes)
                }
                outcome = nil
            } catch {
                outcome = error as? NetworkError ?? .transportFailed(error)
            }
            switch ending {
            case .eventLineTooLong: #expect(outcome == .responseTooLarge(limit: 64 * 1024))
            case .streamLeftEarly: #expect(outcome == .cancelled)
            default: #expect(outcome == .responseTooLarge(limit: 1 << 20))
            }
            let report = try await Self.written(server, key: key)
            #expect(report.finished, "the server was still writing 120 s after the client ended (\(report.written) bytes so far)")
            // Not fixed (issue 56, item 3): on Linux, URLSessionTask.cancel() queues the stop on the
            // session's work queue, where it waits behind libcurl reading the socket; measured over
            // loopback: 48 MiB to all of 1 GiB after the client ended, in most runs (Docs/Reliability.md).
            // An intermittent known issue, so a toolchain that fixes it does not fail the suite; the
            // check is exact on Apple's URLSession.
            #if canImport(FoundationNetworking)
                let knownIssue = true
            #else
                let knownIssue = false
            #endif
            withKnownIssue("FoundationNetworking's cancel() lands late on a fast transfer", isIntermittent: true) {
                #expect(
                    report.written < Self.bound,
                    "the server wrote \(report.written >> 20) MiB before the connection closed: the transfer went on after the client ended it")
            } when: {
                knownIssue
            }
        }
    }
}
