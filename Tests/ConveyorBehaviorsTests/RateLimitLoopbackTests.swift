import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `RateLimitBehavior` against a real server that counts a quota (`/quota` in the local server:
/// `limit` requests per window of an hour, so no stall of a loaded machine ends it mid-test,
/// announced in the form asked for, 429 past it). Once the first answer has announced the quota, a
/// burst of concurrent requests never makes the server refuse one: the limiter sends what remains
/// and fails the rest at once.
@Suite struct RateLimitLoopbackTests {
    struct Count: Decodable { var served: Int; var refused: Int }

    @Test(arguments: ["x", "ietf"])
    func aBurstAfterTheFirstAnswerNeverExceedsTheAnnouncedQuota(form: String) async throws {
        try await LocalServer.withServer { server in
            let limiter = RateLimiter(maxWait: .zero)
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral)) {
                RateLimitBehavior(limiter)
            }
            let key = UUID().uuidString
            let query: QueryParameters = ["key": key, "limit": "6", "window": "3600", "form": form]
            try await client.send(Request<Void>(path: "/quota", query: query))
            let outcomes = await withTaskGroup(of: String.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        do throws(NetworkError) {
                            try await client.send(Request<Void>(path: "/quota", query: query))
                            return "sent"
                        } catch {
                            return error.name
                        }
                    }
                }
                return await group.reduce(into: [String: Int]()) { $0[$1, default: 0] += 1 }
            }
            // At most the 5 the first answer left, fewer when an answer counted a request the
            // limiter still had in flight (it subtracts those: it errs on the side of sending
            // less); never one the server refuses.
            let sent = outcomes["sent", default: 0]
            #expect(sent >= 1 && sent <= 5 && sent + outcomes["rateLimited", default: 0] == 20, "\(outcomes)")
            let plain = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral))
            let count: Count = try await plain.get("/quota/count", query: ["key": key])
            #expect(count.served == 1 + sent && count.refused == 0)
        }
    }

    /// A 429's `Retry-After` holds every request to the origin, not only the one it answered.
    @Test func a429HoldsTheOriginForItsRetryAfter() async throws {
        try await LocalServer.withServer { server in
            let limiter = RateLimiter(maxWait: .zero)
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral)) {
                RateLimitBehavior(limiter)
            }
            let key = UUID().uuidString
            let query: QueryParameters = ["key": key, "limit": "1", "window": "3600", "form": "retry"]
            try await client.send(Request<Void>(path: "/quota", query: query))
            await #expect(throws: NetworkError.tooManyRequests) { try await client.send(Request<Void>(path: "/quota", query: query)) }
            for _ in 0..<5 {
                let refused = await #expect(throws: NetworkError.self) {
                    try await client.send(Request<Void>(path: "/quota", query: query))
                }
                #expect(NetworkError.rateLimited ~= refused)
            }
            let plain = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral))
            let count: Count = try await plain.get("/quota/count", query: ["key": key])
            #expect(count.served == 1 && count.refused == 1)
            let origin = try #require(Origin(server.baseURL))
            let snapshot = limiter.snapshot(for: origin)
            #expect(snapshot.announcedRemaining == 0 && snapshot.refused == 5)
            // The server's hour, less however long this machine took since (never a wall-time bound).
            let reset = try #require(snapshot.announcedReset)
            #expect(reset > .zero && reset <= .seconds(3_600))
        }
    }
}
