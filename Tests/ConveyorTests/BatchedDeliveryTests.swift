import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@testable import Conveyor

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// On `URLSessionTransport`, a download's bytes are handed to its file in batches while full
/// chunks arrive back to back (the caller is woken when 256 KiB wait, or when a shorter chunk says
/// the socket had no more for now); every other taker of a body (a caller's stream, an event
/// stream) gets each chunk as it arrives. The server writes `first` bytes (one full 16 KiB chunk
/// of FoundationNetworking's), then holds the rest until the test releases it.
@Suite struct BatchedDeliveryTests {
    static let full = 16 << 10

    func client(_ server: LocalServer) -> NetworkClient {
        NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral))
    }

    func release(_ hold: String, on server: LocalServer) async throws {
        _ = try await NetworkClient(baseURL: server.baseURL).send(Request<Data>(path: "/held/\(hold)/release"))
    }

    /// Only a download to a file takes its bytes in batches.
    @Test func onlyADownloadTakesItsBytesInBatches() {
        let download = DownloadWriter(
            destination: URL(fileURLWithPath: "/nonexistent/file.bin"), acceptable: [200], maxSize: nil)
        #expect(TransferHandler(taker: download, observers: []).takesBytesInBatches)
        let stream = StreamTaker(channel: ChunkChannel(capacity: 4), acceptable: [200])
        #expect(!TransferHandler(taker: stream, observers: []).takesBytesInBatches)
        let events = EventsTaker(
            channel: BoundedChannel<EventStreamItem>(capacity: 4), options: EventStreamOptions(), acceptable: [200])
        #expect(!TransferHandler(taker: events, observers: []).takesBytesInBatches)
        #expect(!TransferHandler(taker: nil, observers: []).takesBytesInBatches)
    }

    /// The rule: a batch, or a chunk shorter than a full one, wakes the caller of a download;
    /// every chunk wakes any other.
    @Test func aDownloadIsWokenByABatchOrAShortChunk() {
        let full = StreamingExchange.fullChunk
        let batch = StreamingExchange.batch
        for (size, queued) in [(full, full), (full, batch - 1), (1, 1), (full - 1, full - 1), (full, batch)] {
            #expect(StreamingExchange.wakes(afterChunkOf: size, queued: queued, perBatch: false))
        }
        #expect(!StreamingExchange.wakes(afterChunkOf: full, queued: full, perBatch: true))
        #expect(!StreamingExchange.wakes(afterChunkOf: full, queued: batch - 1, perBatch: true))
        #expect(StreamingExchange.wakes(afterChunkOf: full, queued: batch, perBatch: true))
        #expect(StreamingExchange.wakes(afterChunkOf: full - 1, queued: full - 1, perBatch: true))
        #expect(StreamingExchange.wakes(afterChunkOf: 1, queued: batch + 1, perBatch: true))
    }

    /// A stream's reader gets the first full chunk while the server still holds the rest: a
    /// stream is never batched.
    @Test func aStreamGetsAFullChunkWhileTheServerHoldsTheRest() async throws {
        try await LocalServer.withServer { server in
            let hold = "batched-stream-\(UUID().uuidString)"
            let total = 4 * Self.full
            let streamed = try await client(server).stream(
                Request<Data>(path: "/stream", query: ["bytes": total, "first": Self.full, "hold": hold]))
            let (firstBytes, signal) = AsyncStream<Int>.makeStream()
            let reader = Task { () throws -> Int in
                var count = 0
                for try await chunk in streamed.body {
                    count += chunk.count
                    if count >= Self.full { signal.yield(count) }
                }
                return count
            }
            // The server holds the rest for 30 s at most: the first chunk must come well before.
            let early = await withinTimeLimit(seconds: 20) { await firstBytes.first { _ in true } }
            try await release(hold, on: server)
            #expect(early == .some(.some(Self.full)), "the stream's first full chunk waited for more")
            let count = try await reader.value
            #expect(count == total)
        }
    }

    /// A download whose server stops after full chunks still ends whole once the rest comes, and
    /// its progress reaches every byte.
    @Test(arguments: [1, 3, 16])
    func aDownloadThatPausesAfterFullChunksEndsWhole(fullChunksFirst: Int) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await LocalServer.withServer { server in
            let hold = "batched-download-\(UUID().uuidString)"
            let total = (fullChunksFirst + 20) * Self.full + 123
            let destination = scratch.file("paused.bin")
            let progress = ProgressLog()
            let request = Request<Data>(
                path: "/stream", query: ["bytes": total, "first": fullChunksFirst * Self.full, "hold": hold]
            ).onProgress(progress.record)
            let download = Task { try await client(server).download(request, to: destination) }
            try await release(hold, on: server)
            let outcome = await withinTimeLimit(seconds: hangBound) { await download.result }
            guard case .success? = outcome else {
                Issue.record("the download did not end: \(String(describing: outcome))")
                return
            }
            let size = try FileManager.default.attributesOfItem(atPath: destination.path)[.size] as? Int
            #expect(size == total)
            #expect(progress.downloads(attempt: 1).last == Int64(total))
        }
    }
}
