import Conveyor
import ConveyorAsyncHTTPClient
import Foundation
import IntegrationsTestSupport
import Testing

/// Contract rule 16 on the wire, on `AsyncHTTPClientTransport`: a transfer the client ended (a
/// limit reached, a loop left) stops on the connection, not only in the API, although the
/// transport reads a transfer's body ahead (up to `Exchange.readAhead`, 4 MiB). The loopback
/// server's `/endless` writes up to ``cap`` and counts what the kernel took before the connection
/// broke; `/endless/written` answers once that handler has stopped, so nothing here sleeps.
/// (The same cases on URLSession: the root package's `StreamAndUploadWireEndTests`.)
@Suite struct AsyncHTTPClientWireEndTests {
    /// What the server can write after the client decided to stop: both ends' socket buffers (a
    /// few MiB on loopback) and the body read ahead (4 MiB). Far below what a transfer that keeps
    /// running reaches.
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

    @Test(arguments: Ending.allCases)
    func anEndedTransferStopsOnTheWire(_ ending: Ending) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-ahc-wire-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try await LocalServer.withServerInMemoryTurn { server in
            let key = UUID().uuidString
            let client = try ahcClient(server, timeout: .seconds(120), maxResponseSize: 1 << 20)
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
                    _ = try await client.download(bytes, to: file, maxSize: 1 << 20)
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
            let reader = NetworkClient(baseURL: server.baseURL, configuration: .init(timeout: .seconds(150)))
            let report = try await reader.send(
                Request<Written>(path: "/endless/written", query: ["key": key, "wait": 120]))
            #expect(report.finished, "the server was still writing 120 s after the client ended (\(report.written) bytes so far)")
            #expect(
                report.written < Self.bound,
                "the server wrote \(report.written >> 20) MiB before the connection closed: the transfer went on after the client ended it")
        }
    }
}

extension AsyncHTTPClientWireEndTests {
    /// The read-ahead is bounded: a reader that stops taking a streamed body holds AsyncHTTPClient,
    /// and through TCP the server, back within the read-ahead and the sockets' buffers; reading on
    /// resumes the transfer, every byte of it.
    @Test func aReaderThatStopsHoldsTheServerBack() async throws {
        try await LocalServer.withServerInMemoryTurn { server in
            let key = UUID().uuidString
            let client = try ahcClient(server, timeout: .seconds(120))
            let reader = NetworkClient(baseURL: server.baseURL, configuration: .init(timeout: .seconds(30)))
            func writtenSoFar() async throws -> Int {
                try await reader.send(Request<Written>(path: "/endless/written", query: ["key": key, "wait": 0])).written
            }
            let streamed = try await client.stream(
                Request<Data>(path: "/endless", query: ["key": key, "type": "bytes", "bytes": Self.cap]))
            var parts = streamed.body.makeAsyncIterator()
            var received = try await parts.next()?.count ?? 0
            // The reader stops here. What the server wrote grows, then stops growing: read it until
            // 20 reads in a row agree (or it reaches the end, which a bounded read-ahead never lets
            // it).
            var written = try await writtenSoFar()
            var unchanged = 0
            while unchanged < 20, written < Self.cap {
                let now = try await writtenSoFar()
                unchanged = now == written ? unchanged + 1 : 0
                written = now
            }
            #expect(written < Self.bound, "the server wrote \(written >> 20) MiB to a reader that had stopped")
            // Reading on resumes the transfer.
            while let part = try await parts.next() { received += part.count }
            #expect(received == Self.cap)
        }
    }
}
