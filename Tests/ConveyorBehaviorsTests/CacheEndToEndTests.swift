import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `CacheBehavior` over real HTTP: URLSessionTransport against the local server, whose
/// `/cache/<name>` routes count the requests they get (`/cache/<name>/count` reads the count).
@Suite struct CacheEndToEndTests {
    struct Reply: Decodable, Equatable {
        var count: Int
        var method: String
        var varied: String?
    }

    struct Count: Decodable { var count: Int }

    let now = FakeNow()
    let log = OutcomeLog()

    func client(_ server: LocalServer, storage: any CacheStorage = MemoryCacheStorage()) -> NetworkClient {
        NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral)) {
            log
            CacheBehavior(storage: storage, now: now.function)
        }
    }

    /// What the server counted, read with a client that has no cache.
    func serverCount(_ server: LocalServer, _ name: String) async throws -> Int {
        let plain = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral))
        let count: Count = try await plain.get("/cache/\(name)/count")
        return count.count
    }

    @Test func aFreshResponseIsServedWithoutAskingTheServer() async throws {
        try await LocalServer.withServer { server in
            let client = client(server)
            let name = UUID().uuidString
            let first: Reply = try await client.get("/cache/\(name)", query: ["cc": "max-age=60"])
            now.advance(30)
            let second: Reply = try await client.get("/cache/\(name)", query: ["cc": "max-age=60"])
            #expect(first == second && second.count == 1)
            #expect(try await serverCount(server, name) == 1)
            now.advance(30)
            let third: Reply = try await client.get("/cache/\(name)", query: ["cc": "max-age=60"])
            #expect(third.count == 2 && log.all == [.miss, .hit, .miss])
        }
    }

    @Test func aRealETag304BecomesTheStored200() async throws {
        try await LocalServer.withServer { server in
            let client = client(server)
            let name = UUID().uuidString
            let query: QueryParameters = ["cc": "no-cache", "etag": "\"e1\""]
            let first: Reply = try await client.get("/cache/\(name)", query: query)
            let second = try await client.response(for: Request<Reply>(path: "/cache/\(name)", query: query))
            // The server counted two requests and answered the second with 304; the caller got
            // the stored body (count 1) with status 200.
            #expect(try await serverCount(server, name) == 2)
            #expect(second.value == first && second.response.status == 200)
            #expect(log.all == [.miss, .revalidated])
        }
    }

    @Test func aRealLastModified304BecomesTheStored200() async throws {
        try await LocalServer.withServer { server in
            let client = client(server)
            let name = UUID().uuidString
            let query: QueryParameters = ["cc": "max-age=1", "lm": "Tue, 15 Nov 1994 12:45:26 GMT"]
            let first: Reply = try await client.get("/cache/\(name)", query: query)
            now.advance(2)
            let second: Reply = try await client.get("/cache/\(name)", query: query)
            #expect(second == first && log.last == .revalidated)
            #expect(try await serverCount(server, name) == 2)
        }
    }

    @Test func varyKeepsLanguagesApart() async throws {
        try await LocalServer.withServer { server in
            let client = client(server)
            let name = UUID().uuidString
            let query: QueryParameters = ["cc": "max-age=60", "vary": "Accept-Language"]
            let german: Reply = try await client.send(Request(path: "/cache/\(name)", query: query, headers: ["Accept-Language": "de"]))
            let french: Reply = try await client.send(Request(path: "/cache/\(name)", query: query, headers: ["Accept-Language": "fr"]))
            let germanAgain: Reply = try await client.send(Request(path: "/cache/\(name)", query: query, headers: ["Accept-Language": "de"]))
            #expect(german.varied == "de" && french.varied == "fr" && germanAgain.varied == "de")
            #expect(log.all == [.miss, .miss, .miss])  // one entry per URL: fr replaced de
            let frenchAgain: Reply = try await client.send(Request(path: "/cache/\(name)", query: query, headers: ["Accept-Language": "de"]))
            #expect(frenchAgain.count == 3 && log.last == .hit)
        }
    }

    @Test func aPostInvalidatesTheStoredGet() async throws {
        try await LocalServer.withServer { server in
            let client = client(server)
            let name = UUID().uuidString
            let _: Reply = try await client.get("/cache/\(name)", query: ["cc": "max-age=600"])
            let _: Reply = try await client.get("/cache/\(name)", query: ["cc": "max-age=600"])
            #expect(try await serverCount(server, name) == 1)
            let posted: Reply = try await client.send(Request(method: .post, path: "/cache/\(name)", query: ["cc": "max-age=600"]))
            #expect(posted.method == "POST")
            let after: Reply = try await client.get("/cache/\(name)", query: ["cc": "max-age=600"])
            #expect(after.count == 3 && after.method == "GET")
        }
    }

    @Test func theDiskStorageAnswersANewClientAfterARealExchange() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await LocalServer.withServer { server in
            let name = UUID().uuidString
            let first: Reply = try await client(server, storage: DiskCacheStorage(directory: directory))
                .get("/cache/\(name)", query: ["cc": "max-age=60", "etag": "\"d\""])
            let second: Reply = try await client(server, storage: DiskCacheStorage(directory: directory))
                .get("/cache/\(name)", query: ["cc": "max-age=60", "etag": "\"d\""])
            #expect(first == second)
            #expect(try await serverCount(server, name) == 1)
        }
    }
}
