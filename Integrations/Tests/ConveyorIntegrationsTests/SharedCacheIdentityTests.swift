import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorPostgres
import Crypto
import Foundation
import IntegrationsTestSupport
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

/// Private answers per identity in the shared table (issue: "private answers replace each
/// other"), between this test process and a `cache-peer` child: each identity keeps its own, an
/// account keeps its answers across tokens, an unsafe method removes every identity's, without an
/// identity key nothing private reaches the table, and with one nothing in the table confirms a
/// guessed credential. And a table of the earlier version gains its `url_hash` column.
extension SharedCacheTests {
    static let privately = "cc=private%2C%20max-age%3D600"

    @Test func privateAnswersOfManyIdentitiesLiveSideBySideAcrossProcesses() async throws {
        try await withTwoProcesses { (one: Here, other: Child, server: Counter) async throws in
            let name = UUID().uuidString
            let path = "/cache/\(name)?\(Self.privately)"
            // A, B, A, B over two processes: two upstream calls (one entry per URL took four).
            #expect(try await one.send("GET", path, "Authorization: Bearer alice-1").outcome == "miss")
            #expect(try await other.send("GET", path, "Authorization: Bearer bob-1").outcome == "miss")
            #expect(try await other.send("GET", path, "Authorization: Bearer alice-1").outcome == "hit")
            #expect(try await one.send("GET", path, "Authorization: Bearer bob-1").outcome == "hit")
            #expect(try await server.count(name) == 2)
            // 30 more identities from both sides, then each again: every one a hit.
            for user in 0..<30 {
                let side: any Side = user.isMultiple(of: 2) ? one : other
                #expect(try await side.send("GET", path, "Authorization: Bearer user-\(user)").outcome == "miss")
            }
            for user in 0..<30 {
                let side: any Side = user.isMultiple(of: 2) ? other : one
                #expect(try await side.send("GET", path, "Authorization: Bearer user-\(user)").outcome == "hit")
            }
            #expect(try await server.count(name) == 32)
            #expect(try await one.rows() == 32)

            // A POST from the other process, without credentials, removes every identity's answer.
            #expect(try await other.send("POST", path).outcome == "bypassed")
            #expect(try await one.rows() == 0)
            #expect(try await one.send("GET", path, "Authorization: Bearer alice-1").outcome == "miss")
            #expect(try await other.send("GET", path, "Authorization: Bearer bob-1").outcome == "miss")
        }
    }

    @Test func anAccountKeepsItsPrivateAnswersAcrossTokensAndProcesses() async throws {
        try await withTwoProcesses { (one: Here, other: Child, server: Counter) async throws in
            let name = UUID().uuidString
            let path = "/cache/\(name)?\(Self.privately)"
            #expect(try await one.send("GET", path, "Authorization: Bearer t1", "X-Account: 42").outcome == "miss")
            // A refreshed token of the same account, in the other process: a hit.
            #expect(try await other.send("GET", path, "Authorization: Bearer t2", "X-Account: 42").outcome == "hit")
            #expect(try await other.send("GET", path, "Authorization: Bearer t2", "X-Account: 43").outcome == "miss")
            // The token alone is another identity than the account it belongs to.
            #expect(try await one.send("GET", path, "Authorization: Bearer t1").outcome == "miss")
            #expect(try await server.count(name) == 3)
        }
    }

    @Test func withoutAnIdentityKeyNoPrivateAnswerAndNoDigestReachesTheTable() async throws {
        try await withTwoProcesses(identityKey: nil) { (one: Here, other: Child, server: Counter) async throws in
            let name = UUID().uuidString
            let path = "/cache/\(name)?\(Self.privately)"
            #expect(try await one.send("GET", path, "Authorization: Bearer alice-1").outcome == "miss")
            #expect(try await other.send("GET", path, "Authorization: Bearer alice-1").outcome == "miss")
            #expect(try await one.rows() == 0)
            // A public answer is still shared, without who fetched it.
            let open = "/cache/\(name)-public?cc=public%2C%20max-age%3D600"
            #expect(try await one.send("GET", open, "Authorization: Bearer alice-1").outcome == "miss")
            #expect(try await other.send("GET", open, "Authorization: Bearer bob-1").outcome == "hit")
            #expect(try await one.send("GET", open, "Authorization: Bearer alice-1").outcome == "hit")
            #expect(try await server.count(name) == 2)
            #expect(try await server.count(name + "-public") == 1)
            let bytes = try await one.tableBytes()
            for guess in Self.guesses(credential: "Bearer alice-1", url: one.base.absoluteString + open) {
                #expect(bytes.range(of: guess) == nil, "the table holds a digest of a guess")
            }
        }
    }

    @Test func withAnIdentityKeyNothingInTheTableConfirmsAGuessedCredential() async throws {
        try await withTwoProcesses { (one: Here, other: Child, server: Counter) async throws in
            let name = UUID().uuidString
            let path = "/cache/\(name)?\(Self.privately)&vary=Authorization"
            let open = "/cache/\(name)-public?cc=public%2C%20max-age%3D600"
            for credential in ["Bearer 1234", "Bearer alice-1"] {
                #expect(try await one.send("GET", path, "Authorization: \(credential)").outcome == "miss")
                #expect(try await other.send("GET", path, "Authorization: \(credential)").outcome == "hit")
                _ = try await one.send("GET", open, "Authorization: \(credential)")
            }
            let bytes = try await one.tableBytes()
            #expect(try await one.rows() == 3)
            for credential in ["Bearer 1234", "Bearer alice-1"] {
                for url in [path, open] {
                    for guess in Self.guesses(credential: credential, url: one.base.absoluteString + url) {
                        #expect(bytes.range(of: guess) == nil, "the table holds what a guess of \(credential) computes")
                    }
                }
            }
        }
    }

    /// What a reader of the table who guessed `credential` could compute without the key: the
    /// SHA-256 digests the cache writes when unkeyed (the credential's, as hex and raw; a `Vary`
    /// value's), and the row key of the variant such a digest would make.
    static func guesses(credential: String, url: String) -> [Data] {
        func hex(_ text: String) -> String { SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined() }
        let fingerprint = hex("authorization:" + credential)
        return [
            Data(fingerprint.utf8), Data(SHA256.hash(data: Data(("authorization:" + credential).utf8))),
            Data(hex(credential).utf8), Data(SHA256.hash(data: Data((url + "\n" + fingerprint).utf8))),
            Data(credential.utf8),
        ]
    }

    @Test func aTableOfTheEarlierVersionGainsItsURLColumnAndIndexOnce() async throws {
        let postgres = try await TestPostgres.shared()
        let database = PostgresClient(configuration: Self.configuration(postgres), backgroundLogger: SharedCacheTests.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let table = Self.uniqueTable()
        // The schema 1.1's prepare() created.
        try await database.query(
            """
            CREATE UNLOGGED TABLE \(unescaped: table) (key_hash bytea PRIMARY KEY, entry bytea NOT NULL,
                bytes integer NOT NULL, expires_at timestamptz NOT NULL, last_used timestamptz NOT NULL)
            """)
        try await LocalServer.withServer { server in
            let here = try Here(base: server.baseURL, database: database, table: table, identityKey: Self.identityKey)
            try await here.storage.prepare()
            try await here.storage.prepare()
            var columns: Int64 = 0
            for try await count in try await database.query(
                "SELECT count(*)::bigint FROM pg_attribute WHERE attrelid = \(table)::regclass AND attname = 'url_hash'"
            ).decode(Int64.self) { columns = count }
            var indexes: [String] = []
            for try await index in try await database.query(
                "SELECT indexname::text FROM pg_indexes WHERE tablename = \(table)").decode(String.self)
            {
                indexes.append(index)
            }
            #expect(columns == 1 && indexes.contains(table + "_url_hash"), "\(indexes)")
            // A row of the URL written the old way (no url_hash), and a variant of it.
            let path = "/cache/\(UUID().uuidString)?\(Self.privately)"
            #expect(try await here.send("GET", path).outcome == "miss")
            try await database.query("UPDATE \(unescaped: table) SET url_hash = NULL")
            #expect(try await here.send("GET", path, "Authorization: Bearer alice-1").outcome == "miss")
            #expect(try await here.send("GET", path).outcome == "hit")
            #expect(try await here.rows() == 2)
            // An unsafe method removes both.
            _ = try await here.send("DELETE", path)
            #expect(try await here.rows() == 0)
        }
    }

    @Test func anIdentityKeyShorterThan16BytesIsRefused() async throws {
        let postgres = try await TestPostgres.shared()
        let database = PostgresClient(configuration: Self.configuration(postgres), backgroundLogger: SharedCacheTests.quiet)
        _ = database
        #expect { _ = try CacheIdentityKey("short".utf8) } throws: { error in
            (error as? CacheIdentityKey.TooShort)?.count == 5 && !"\(error)".contains("short")
        }
        #expect((try? CacheIdentityKey("sixteen-bytes-ok".utf8)) != nil)
    }
}

extension FleetLoadTests {
/// The fleet's figure for private answers (BENCHMARKS.md, "Private answers on a fleet"): 1,000
/// users, each asking three times for the same per-user URL, spread over four instances (each its
/// own `PostgresClient`, storage and client over one table), 32 requests in flight. With a
/// private answer per identity every user's first request is the only one to reach the upstream;
/// with one entry per URL (a storage that keeps no variants, as before) almost none is a hit.
@Suite(.timeLimit(.minutes(3))) struct SharedCacheFleetFigureTests {
    struct Run {
        var upstream: Int
        var hits: Int
        var requests: Int
        var hitRate: Double { Double(hits) / Double(requests) }
    }

    /// One entry per URL: the Postgres storage without its variants.
    final class OneEntryPerURL: CacheStorage {
        let base: PostgresCacheStorage
        init(_ base: PostgresCacheStorage) { self.base = base }
        func entry(for key: String) async -> CachedResponse? { await base.entry(for: key) }
        func store(_ entry: CachedResponse, for key: String) async { await base.store(entry, for: key) }
        func removeEntry(for key: String) async { await base.removeEntry(for: key) }
        func removeAll() async { await base.removeAll() }
        var credentialDigest: CacheCredentialDigest { base.credentialDigest }
    }

    func run(variants: Bool, users: Int = 1_000, asks: Int = 3, instances: Int = 4) async throws -> Run {
        let postgres = try await TestPostgres.shared()
        let table = SharedCacheTests.uniqueTable()
        let name = UUID().uuidString
        let databases = (0..<instances).map { _ in
            PostgresClient(configuration: SharedCacheTests.configuration(postgres), backgroundLogger: SharedCacheTests.quiet)
        }
        return try await withThrowingTaskGroup(of: Void.self) { runners in
            for database in databases { runners.addTask { await database.run() } }
            defer { runners.cancelAll() }
            return try await LocalServer.withServer { server in
                let hits = NIOLockedValueBox(0)
                let clients = try databases.map { database in
                    let storage = try PostgresCacheStorage(
                        client: database, table: table, timeout: .seconds(10),
                        identityKey: try CacheIdentityKey(SharedCacheTests.identityKey.utf8))
                    let cache: any CacheStorage = variants ? storage : OneEntryPerURL(storage)
                    return NetworkClient(baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)) {
                        HitCounter(hits: hits)
                        CacheBehavior(storage: cache)
                    }
                }
                // Request i: user i % users (so each user's asks are `users` requests apart),
                // on instance i % instances; 32 in flight.
                let total = users * asks
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<total {
                        if index >= 32 { try await group.next() }
                        let client = clients[index % instances]
                        let user = index % users
                        group.addTask {
                            let request = Request<Data>(
                                path: "/cache/\(name)?\(SharedCacheTests.privately)",
                                headers: ["Authorization": "Bearer user-\(user)-token"])
                            _ = try await client.send(request)
                        }
                    }
                    try await group.waitForAll()
                }
                let upstream = try await SharedCacheTests.Counter(server: server).count(name)
                return Run(upstream: upstream, hits: hits.withLockedValue { $0 }, requests: total)
            }
        }
    }

    @Test func aThousandUsersOnFourInstancesReachTheUpstreamOnceEach() async throws {
        let kept = try await run(variants: true)
        let replaced = try await run(variants: false)
        print(
            "private answers, 1,000 users × 3 asks on 4 instances: per identity \(kept.upstream) upstream calls, "
                + "hit rate \(String(format: "%.1f", kept.hitRate * 100)) %; one entry per URL \(replaced.upstream) calls, "
                + "hit rate \(String(format: "%.1f", replaced.hitRate * 100)) %")
        #expect(kept.upstream == 1_000 && kept.hits == 2_000)
        #expect(replaced.hitRate < 0.05, "one entry per URL: \(replaced)")
    }
}
}

/// Counts the requests the cache answered from storage.
struct HitCounter: SuccessObserving {
    let hits: NIOLockedValueBox<Int>
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        if context[CacheOutcome.self] == .hit { hits.withLockedValue { $0 += 1 } }
    }
}
