@testable import ConveyorBehaviors
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `DeduplicationBehavior` through `NetworkClient` and `URLSessionTransport` against the local
/// server, whose `/held/<name>` counts hits and answers only once released.
@Suite struct DeduplicationEndToEndTests {
    struct Held: Decodable, Sendable { let count: Int }
    struct Hits: Decodable, Sendable { let hits: Int }

    /// The figure in BENCHMARKS.md.
    @Test func aHundredConcurrentIdenticalGetsMakeOneServerHit() async throws {
        try await LocalServer.withServer { server in
            let dedup = DeduplicationBehavior()
            let transport = URLSessionTransport(configuration: .ephemeral)
            let client = NetworkClient(baseURL: server.baseURL, transport: transport) { dedup }
            let plain = NetworkClient(baseURL: server.baseURL, transport: transport)
            let tasks = (0..<100).map { _ in Task { () async throws -> Held in try await client.get("/held/hundred") } }
            await dedup.calls.waitUntilWaiting(100)  // every caller has joined; the server holds the one call
            let _: Hits = try await plain.get("/held/hundred/release")
            for task in tasks { #expect(try await task.value.count == 1) }
            let hits: Hits = try await plain.get("/held/hundred/hits")
            #expect(hits.hits == 1)
            print("DeduplicationBehavior: 100 concurrent identical GETs → \(hits.hits) server hit(s)")

            // Not a cache: the call is over, so the next request reaches the server.
            let again: Held = try await client.get("/held/hundred")
            #expect(again.count == 2)
            #expect(dedup.calls.count == 0)
        }
    }

    @Test func differentTokensReachTheServerSeparately() async throws {
        try await LocalServer.withServer { server in
            let dedup = DeduplicationBehavior()
            let transport = URLSessionTransport(configuration: .ephemeral)
            let client = NetworkClient(baseURL: server.baseURL, transport: transport) { dedup }
            let tasks = ["Bearer a", "Bearer b", "Bearer a"].map { token in
                Task { () async throws -> Held in
                    try await client.send(Request<Held>(path: "/held/tokens", headers: ["Authorization": token]))
                }
            }
            await dedup.calls.waitUntilWaiting(3)
            #expect(dedup.calls.count == 2)
            let _: Hits = try await NetworkClient(baseURL: server.baseURL, transport: transport).get("/held/tokens/release")
            let counts = try await [tasks[0].value.count, tasks[1].value.count, tasks[2].value.count]
            #expect(counts[0] == counts[2] && Set(counts) == [1, 2])
        }
    }
}
