import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorTesting
import Foundation
import InMemoryLogging
import IntegrationsTestSupport
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@testable import ConveyorPostgres

/// `PostgresCacheStorage`'s bounds that need a table of their own shape: the names PostgreSQL
/// truncates, one deadline for a call and its follow-up statements.
extension SharedCacheTests {
    // MARK: - Table names

    /// PostgreSQL cuts identifiers at 63 bytes: the indexes of a table with a long name must
    /// still get names of their own, or `CREATE INDEX IF NOT EXISTS` skips them.
    @Test(arguments: [1, 55, 62, 63]) func everyAcceptedTableNameGetsEveryIndex(_ length: Int) async throws {
        let server = try await TestPostgres.shared()
        let database = PostgresClient(configuration: Self.configuration(server), backgroundLogger: Self.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let unique = Self.uniqueTable()
        let table = length == 1 ? "q" : String((unique + String(repeating: "x", count: 64)).prefix(length))
        #expect(table.utf8.count == length)
        if length == 1 { try await database.query("DROP TABLE IF EXISTS q CASCADE") }
        let logs = InMemoryLogHandler()
        let storage = try PostgresCacheStorage(
            client: database, table: table, timeout: .seconds(10), logger: Logger(label: "cache") { _ in logs })
        try await storage.prepare()
        try await storage.prepare()  // twice: nothing is created again, nothing collides
        var columns: [String] = []
        let rows = try await database.query(
            """
            SELECT a.attname FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0]
            WHERE t.relname = \(table) ORDER BY a.attname
            """)
        for try await column in rows.decode(String.self) { columns.append(column) }
        #expect(columns == ["expires_at", "key_hash", "last_used", "url_hash"], "\(table)")
        // And the storage works on it: stored, found, the trim runs.
        let entry = try await Self.sampleEntry()
        await storage.store(entry, for: "https://api.test/\(length)")
        #expect(
            await storage.entry(for: "https://api.test/\(length)") != nil, "\(logs.entries.map { "\($0.metadata)" })")
        try await storage.trim()
        if length == 1 { try await database.query("DROP TABLE q CASCADE") }
    }

    @Test func aTableNameOfMoreThan63BytesIsRefused() throws {
        let client = PostgresClient(
            configuration: .init(host: "127.0.0.1", username: "x", password: nil, database: nil, tls: .disable),
            backgroundLogger: Self.quiet)
        for bad in [String(repeating: "a", count: 64), "cach\u{E9}", String(repeating: "\u{E9}", count: 20)] {
            #expect(throws: PostgresCacheStorage.ConfigurationError.invalidTableName(bad)) {
                try PostgresCacheStorage(client: client, table: bad)
            }
        }
        #expect((try? PostgresCacheStorage(client: client, table: String(repeating: "a", count: 63))) != nil)
    }

    // MARK: - One deadline per call

    /// A store whose `INSERT` waited most of the timeout, then a trim that waits on a row another
    /// session holds: the call (insert and trim together) ends at its one deadline, not a
    /// timeout after the trim began.
    @Test func aStoreAndItsTrimEndAtOneDeadline() async throws {
        let clock = ManualClock()
        let logs = InMemoryLogHandler()
        let now = NIOLockedValueBox(Date())
        let timeout = Duration.seconds(60)
        let server = try await TestPostgres.shared()
        let database = PostgresClient(configuration: Self.configuration(server), backgroundLogger: Self.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let small = try await Self.sampleEntry(pad: 10)
        let big = try await Self.sampleEntry(pad: 2_000)
        let size = { (entry: CachedResponse) in entry.encoded().count }
        let storage = try PostgresCacheStorage(
            client: database, table: Self.uniqueTable(), maxBytes: size(big) + 2 * size(small) + 100, timeout: timeout,
            logger: Logger(label: "cache") { _ in logs }, clock: clock, now: { now.withLockedValue { $0 } })
        try await storage.prepare()
        for (key, entry) in [("a", big), ("b", small), ("c", small)] {
            now.withLockedValue { $0 += 1 }
            await storage.store(entry, for: key)
        }
        #expect(try await Self.count(database, storage.table) == 3)
        // `a` is the oldest row (the trim's first victim), `c` the row the store replaces.
        let oldest = try await RowLock.take(PostgresCacheStorage.hash("a"), in: storage.table, database)
        let replaced = try await RowLock.take(PostgresCacheStorage.hash("c"), in: storage.table, database)
        now.withLockedValue { $0 += 1 }
        let finished = NIOLockedValueBox(false)
        let store = Task {
            await storage.store(big, for: "c")  // over the bound: the store trims
            finished.withLockedValue { $0 = true }
        }
        try await Self.waitForLockWait(database, startingWith: "INSERT", or: finished)
        await clock.waitForSleepers(1)
        clock.advance(by: timeout * 0.8)
        try await replaced.release()
        // The insert went through; the trim waits on `a` (unless the database's own timeout for
        // the trim ended it first, which ends the call too).
        try await Self.waitForLockWait(database, startingWith: "WITH turn", or: finished)
        if !finished.withLockedValue({ $0 }) { await clock.waitForSleepers(1) }
        clock.advance(by: timeout * 0.2)
        #expect(clock.sleeperCount == 0, "a timer of the call outlives its deadline")
        try await oldest.release()
        await store.value
        // The insert was done before the trim began (the storage itself cools down now).
        var bytes: [Int] = []
        let stored = try await database.query(
            "SELECT bytes FROM \(unescaped: storage.table) WHERE key_hash = \(PostgresCacheStorage.hash("c"))")
        for try await value in stored.decode(Int.self) { bytes.append(value) }
        #expect(bytes == [size(big)])
    }

    // MARK: - Helpers

    /// An entry as the cache stores it: the test server's answer, fresh for ten minutes, with a
    /// padding of `pad` bytes (through a `MemoryCacheStorage`, then taken out of it).
    static func sampleEntry(pad: Int = 100) async throws -> CachedResponse {
        let memory = MemoryCacheStorage()
        return try await LocalServer.withServer { server in
            let client = NetworkClient(
                baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)
            ) {
                CacheBehavior(storage: memory)
            }
            let answered = try await client.response(
                for: Request<Data>(path: "/cache/\(UUID().uuidString)", query: ["cc": "max-age=600", "pad": "\(pad)"]))
            return try #require(await memory.entry(for: answered.response.request.url.absoluteString))
        }
    }

    /// Waits (polling the server, not the clock) until a statement that starts with `prefix`
    /// waits on a lock, or `done` is set.
    static func waitForLockWait(
        _ database: PostgresClient, startingWith prefix: String, or done: NIOLockedValueBox<Bool>
    )
        async throws
    {
        var turns = 0
        while !done.withLockedValue({ $0 }) {
            let rows = try await database.query(
                """
                SELECT count(*)::bigint FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND starts_with(ltrim(query), \(prefix))
                """)
            for try await count in rows.decode(Int64.self) where count > 0 { return }
            turns += 1
            try #require(turns < 100_000, "no statement starting with \(prefix) waited on a lock")
            await Task.yield()
        }
    }

    /// Another session's `FOR UPDATE` lock on one row, held until `release()`.
    struct RowLock {
        let holder: Task<Void, any Error>
        let letGo: AsyncStream<Void>.Continuation

        static func take(_ hash: Data, in table: String, _ database: PostgresClient) async throws -> RowLock {
            let locked = AsyncStream<Void>.makeStream()
            let release = AsyncStream<Void>.makeStream()
            let holder = Task {
                try await database.withTransaction(logger: SharedCacheTests.quiet) { connection in
                    try await connection.query(
                        "SELECT 1 FROM \(unescaped: table) WHERE key_hash = \(hash) FOR UPDATE",
                        logger: SharedCacheTests.quiet)
                    locked.continuation.yield()
                    for await _ in release.stream { break }
                }
            }
            for await _ in locked.stream { break }
            return RowLock(holder: holder, letGo: release.continuation)
        }

        func release() async throws {
            letGo.yield()
            try await holder.value
        }
    }
}
