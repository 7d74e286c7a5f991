import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorPostgres
import ConveyorTesting
import Foundation
import InMemoryLogging
import IntegrationsTestSupport
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

/// `PostgresCacheStorage` against a real PostgreSQL server (`TestPostgres`): the cache's rules
/// between two processes sharing one table (this test process and a `cache-peer` child, each
/// with its own NetworkClient, CacheBehavior and PostgresClient), concurrent writers, expiry and
/// the size bound, and a database that is slow, down or killed mid-request.
@Suite(.timeLimit(.minutes(2))) struct SharedCacheTests {
    // MARK: - The cache's rules across two processes

    @Test func aFreshAnswerOfOneProcessAnswersTheOtherUntilItIsStale() async throws {
        try await withTwoProcesses { one, other, server in
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=max-age%3D60"
            // Both clocks start 61 s behind the server's: after they move 61 s on, an answer's
            // `Date` does not make it look older than it is (its age is counted from `Date`).
            try await both(one, other) { try await $0.advance(-61) }
            let first = try await one.send("GET", path)
            let second = try await other.send("GET", path)
            #expect(first.outcome == "miss" && second.outcome == "hit" && second.body == first.body)
            #expect(try await server.count(name) == 1)
            try await both(one, other) { try await $0.advance(61) }
            let stale = try await other.send("GET", path)
            let refreshed = try await one.send("GET", path)
            #expect(stale.outcome == "miss" && refreshed.outcome == "hit" && refreshed.body == stale.body, "\(stale) \(refreshed)")
            #expect(try await server.count(name) == 2)
        }
    }

    @Test func anUnsafeMethodInOneProcessRemovesWhatTheOtherStored() async throws {
        try await withTwoProcesses { one, other, server in
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=max-age%3D600"
            #expect(try await one.send("GET", path).outcome == "miss")
            #expect(try await one.send("GET", path).outcome == "hit")
            let posted = try await other.send("POST", path)
            #expect(posted.status == 200 && posted.outcome == "bypassed")
            let after = try await one.send("GET", path)
            #expect(after.outcome == "miss" && after.body.contains("\"count\": 3"))
            #expect(try await server.count(name) == 3)
            // A DELETE from this process is seen by the other just the same.
            #expect(try await other.send("GET", path).outcome == "hit")
            #expect(try await one.send("DELETE", path).outcome == "bypassed")
            #expect(try await other.send("GET", path).outcome == "miss")
        }
    }

    @Test func anETagStoredByOneProcessIsRevalidatedByTheOther() async throws {
        try await withTwoProcesses { one, other, server in
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=no-cache&etag=%22e1%22"
            let first = try await one.send("GET", path)
            let second = try await other.send("GET", path)
            // The server answered the second with 304 (it counted it); the caller got the first body.
            #expect(first.outcome == "miss" && second.outcome == "revalidated")
            #expect(second.status == 200 && second.body == first.body && first.body.contains("\"count\": 1"))
            #expect(try await server.count(name) == 2)
            let third = try await one.send("GET", path)
            #expect(third.outcome == "revalidated" && third.body == first.body)
        }
    }

    @Test func varyIsMatchedAcrossProcesses() async throws {
        try await withTwoProcesses { one, other, server in
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=max-age%3D600&vary=Accept-Language"
            let english = try await one.send("GET", path, "Accept-Language: en")
            #expect(try await other.send("GET", path, "Accept-Language: en").outcome == "hit")
            let french = try await other.send("GET", path, "Accept-Language: fr")
            #expect(english.outcome == "miss" && french.outcome == "miss" && french.body.contains("\"varied\": \"fr\""))
            // One entry per URL: the French answer replaced the English one for both processes.
            let again = try await one.send("GET", path, "Accept-Language: fr")
            #expect(again.outcome == "hit" && again.body == french.body)
            #expect(try await one.send("GET", path).outcome == "miss")
            #expect(try await server.count(name) == 3)
        }
    }

    @Test func noStoreIsNeverShared() async throws {
        try await withTwoProcesses { (one: Here, other: Child, server: Counter) async throws in
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=no-store%2C%20max-age%3D600"
            #expect(try await one.send("GET", path).outcome == "miss")
            #expect(try await other.send("GET", path).outcome == "miss")
            #expect(try await one.send("GET", path).outcome == "miss")
            #expect(try await server.count(name) == 3)
            #expect(try await one.rows() == 0)
            // And a request's own no-store bypasses a stored answer.
            let stored = "/cache/\(name)-2?cc=max-age%3D600"
            #expect(try await one.send("GET", stored).outcome == "miss")
            #expect(try await other.send("GET", stored, "Cache-Control: no-store").outcome == "bypassed")
        }
    }

    @Test func aPrivateAnswerGoesOnlyToTheSameCredentialsAPublicOneToAnyoneAndNoCredentialReachesTheTable()
        async throws
    {
        let alice = "Bearer tok-3f9a-SECRET-alice"
        let bob = "Bearer tok-3f9a-SECRET-bob"
        try await withTwoProcesses { one, other, server in
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=private%2C%20max-age%3D600&vary=Cookie"
            let cookie = "Cookie: session=cookie-77-SECRET"
            let first = try await one.send("GET", path, "Authorization: \(alice)", cookie)
            #expect(first.outcome == "miss")
            #expect(try await other.send("GET", path, "Authorization: \(alice)", cookie).outcome == "hit")
            #expect(try await other.send("GET", path, "Authorization: \(bob)", cookie).outcome == "miss")
            #expect(try await one.send("GET", path, "Authorization: \(bob)", cookie).outcome == "hit")
            #expect(try await one.send("GET", path, cookie).outcome == "miss")
            #expect(try await server.count(name) == 3)
            // Without any credential header an answer without public/private is stored as usual;
            // one to a request with a credential is not (the server did not allow it).
            let plain = "/cache/\(name)-plain?cc=max-age%3D600"
            #expect(try await one.send("GET", plain, "Authorization: \(alice)").outcome == "miss")
            #expect(try await other.send("GET", plain, "Authorization: \(alice)").outcome == "miss")
            // A `public` answer is anyone's: what one credential fetched answers another.
            let open = "/cache/\(name)-public?cc=public%2C%20max-age%3D600"
            #expect(try await one.send("GET", open, "Authorization: \(alice)").outcome == "miss")
            #expect(try await other.send("GET", open, "Authorization: \(bob)").outcome == "hit")
            #expect(try await other.send("GET", open).outcome == "hit")

            // What the table holds: no credential (in any spelling a leak could take), no URL.
            let bytes = try await one.tableBytes()
            #expect(!bytes.isEmpty)
            for secret in ["tok-3f9a-SECRET-alice", "tok-3f9a-SECRET-bob", "cookie-77-SECRET", name] {
                for form in encodings(of: secret) {
                    #expect(bytes.range(of: Data(form.utf8)) == nil, "\(form) is in the table")
                }
            }
        }
    }

    @Test func concurrentWritersOfOneKeyLeaveOneWholeEntry() async throws {
        try await withTwoProcesses { one, other, server in
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=max-age%3D600&pad=200000"
            // 20 stores of 200 KB each from both processes at once, plus 4 more from this one.
            async let mine: Void = one.burst(path, 20)
            async let theirs: Void = other.burst(path, 20)
            async let more: Void = withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 { group.addTask { try await one.burst(path, 1) } }
                try await group.waitForAll()
            }
            _ = try await (mine, theirs, more)
            #expect(try await one.rows() == 1)
            let stored = try #require(try await one.storedEntry(path))
            let reply = try JSONSerialization.jsonObject(with: stored.body) as? [String: Any]
            let count = try #require(reply?["count"] as? Int)
            #expect((1...44).contains(count))
            #expect((reply?["pad"] as? String)?.utf8.count == 200_000)
            #expect(stored.headers["Content-Length"] == String(stored.body.count))
            #expect(try await server.count(name) == 44)
        }
    }

    // MARK: - Bounds

    @Test func rowsPastTheirUseAreDeletedAndTheTableStaysUnderItsBound() async throws {
        let now = NIOLockedValueBox(Date())
        try await withStorage(maxBytes: 60_000, now: { now.withLockedValue { $0 } }) { storage, database in
            try await LocalServer.withServer { server in
                let client = try cachingClient(server, storage: storage, now: { now.withLockedValue { $0 } })
                let name = UUID().uuidString
                // Fresh for 60 s, no validator: of no use once stale.
                _ = try await client.send(Request<Data>(path: "/cache/\(name)-a", query: ["cc": "max-age=60"]))
                // Fresh for 60 s with a validator: kept for keepStale (1 h here) after.
                _ = try await client.send(Request<Data>(path: "/cache/\(name)-b", query: ["cc": "max-age=60", "etag": "\"b\""]))
                #expect(try await Self.count(database, storage.table) == 2)
                now.withLockedValue { $0 += 61 }
                try await storage.trim()
                #expect(try await Self.count(database, storage.table) == 1)
                now.withLockedValue { $0 += 3_600 }
                try await storage.trim()
                #expect(try await Self.count(database, storage.table) == 0)

                // Ten 10 KB answers in a 60,000-byte table: the least recently used go. (The clock
                // goes back to the server's: an answer whose `Date` is an hour behind ours would be
                // as old as that, and stale on arrival.)
                now.withLockedValue { $0 = Date() }
                for index in 0..<10 {
                    now.withLockedValue { $0 += 1 }
                    _ = try await client.send(
                        Request<Data>(path: "/cache/\(name)-\(index)", query: ["cc": "max-age=600", "pad": "10000"]))
                }
                try await storage.trim()
                let sizes = try await database.query("SELECT sum(bytes)::bigint, count(*)::bigint FROM \(unescaped: storage.table)")
                for try await (total, rows) in sizes.decode((Int64?, Int64).self) {
                    #expect((total ?? 0) <= 60_000 && rows >= 4 && rows < 10)
                }
                // The newest answer is still a hit; the oldest is gone.
                let newest = try await client.response(for: Request<Data>(path: "/cache/\(name)-9", query: ["cc": "max-age=600", "pad": "10000"]))
                #expect(newest.response.headers["Age"] != nil)
                let oldest = try await client.response(for: Request<Data>(path: "/cache/\(name)-0", query: ["cc": "max-age=600", "pad": "10000"]))
                #expect(oldest.response.headers["Age"] == nil)
            }
        }
    }

    @Test func anEntryLargerThanTheBoundIsNotStoredAndHostileKeysAreData() async throws {
        try await withStorage(maxBytes: 20_000) { storage, database in
            try await LocalServer.withServer { server in
                let client = try cachingClient(server, storage: storage)
                let name = UUID().uuidString
                _ = try await client.send(Request<Data>(path: "/cache/\(name)", query: ["cc": "max-age=600", "pad": "30000"]))
                #expect(try await Self.count(database, storage.table) == 0)
                // A key is a bind parameter's value, whatever it holds.
                let hostile = "/cache/\(name)-x'); DROP TABLE \(storage.table); --"
                _ = try await client.send(Request<Data>(path: hostile, query: ["cc": "max-age=600"]))
                let again = try await client.response(for: Request<Data>(path: hostile, query: ["cc": "max-age=600"]))
                #expect(again.response.headers["Age"] != nil)
                #expect(try await Self.count(database, storage.table) == 1)
                // A row that does not decode (damaged, or another format version) is a miss, and gone.
                let key = again.response.request.url.absoluteString
                #expect(await storage.entry(for: key) != nil)
                for damaged in [Data(), Data("CNVC".utf8), Data(repeating: 0xFF, count: 300)] {
                    try await database.query("UPDATE \(unescaped: storage.table) SET entry = \(damaged)")
                    #expect(await storage.entry(for: key) == nil)
                    #expect(try await Self.count(database, storage.table) == 0)
                    let fetched = try await client.response(for: Request<Data>(path: hostile, query: ["cc": "max-age=600"]))
                    #expect(fetched.response.status == 200 && fetched.response.headers["Age"] == nil)
                    // The miss stored the answer again: one row, whole.
                    #expect(try await Self.count(database, storage.table) == 1)
                }
            }
        }
        for bad in ["", "Cache", "1cache", "cache;drop", "cache\"x", "a.b", String(repeating: "a", count: 64), "caché"] {
            #expect(throws: PostgresCacheStorage.ConfigurationError.invalidTableName(bad)) {
                try PostgresCacheStorage(client: PostgresClient(configuration: .init(
                    host: "127.0.0.1", username: "x", password: nil, database: nil, tls: .disable),
                    backgroundLogger: Logger(label: "unused")), table: bad)
            }
        }
    }

    // MARK: - A database that is slow, down or killed

    /// A table locked by another session: the lookup waits until the storage's timeout (on a
    /// manual clock) and the request is answered by the server; during the cool-down nothing
    /// waits on the database; once it answers again, the cache works again.
    @Test func aSlowDatabaseIsAMissWithinTheTimeoutAndTheRequestSucceeds() async throws {
        let clock = ManualClock()
        let logs = InMemoryLogHandler()
        try await withStorage(clock: clock, logs: logs) { storage, database in
            try await LocalServer.withServer { server in
                let client = try cachingClient(server, storage: storage)
                let name = UUID().uuidString
                try await storage.prepare()
                // Another session holds the table until the test lets go.
                let lock = try await TableLock.take(storage.table, in: database)
                let request = Task {
                    try await client.response(for: Request<Data>(path: "/cache/\(name)", query: ["cc": "max-age=600"]))
                }
                await clock.waitForSleepers(1)
                clock.advance(by: storage.timeout)
                let answered = try await request.value
                #expect(answered.response.status == 200 && answered.response.headers["Age"] == nil)
                #expect(try await server.count(name) == 1)
                let warnings = logs.entries.filter { $0.level == .warning }
                #expect(warnings.count == 1)
                #expect(warnings.first?.metadata["cache.operation"] == "lookup")
                // During the cool-down: a miss at once (no sleeper on the clock), the store dropped.
                let quick = try await client.response(for: Request<Data>(path: "/cache/\(name)", query: ["cc": "max-age=600"]))
                #expect(quick.response.headers["Age"] == nil && clock.sleeperCount == 0)
                try await lock.release()
                clock.advance(by: .seconds(60))
                // The database answers again: stored, then a hit, and one notice says so.
                _ = try await client.send(Request<Data>(path: "/cache/\(name)", query: ["cc": "max-age=600"]))
                let hit = try await client.response(for: Request<Data>(path: "/cache/\(name)", query: ["cc": "max-age=600"]))
                #expect(hit.response.headers["Age"] != nil)
                #expect(try await server.count(name) == 3)
                #expect(logs.entries.filter { $0.level == .notice }.count == 1)
                #expect(logs.entries.count == 2)
            }
        }
    }

    /// Calls that wait on a database that does not answer are capped: with 64 waiting, more
    /// lookups are misses at once, before any timeout.
    @Test func atMost64CallsWaitOnTheDatabase() async throws {
        let clock = ManualClock()
        try await withStorage(clock: clock) { storage, database in
            try await storage.prepare()
            let lock = try await TableLock.take(storage.table, in: database)
            let finished = NIOLockedValueBox(0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<70 {
                    group.addTask {
                        #expect(await storage.entry(for: "https://api.test/\(index)") == nil)
                        finished.withLockedValue { $0 += 1 }
                    }
                }
                // 64 wait (each with its timer parked on the clock); the other 6 are done already.
                await clock.waitForSleepers(64)
                var turns = 0
                while finished.withLockedValue({ $0 }) < 6 {
                    turns += 1
                    try #require(turns < 1_000_000, "the calls past 64 waited")
                    await Task.yield()
                }
                #expect(finished.withLockedValue { $0 } == 6 && clock.sleeperCount == 64)
                clock.advance(by: storage.timeout)
                try await group.waitForAll()
            }
            #expect(finished.withLockedValue { $0 } == 70)
            try await lock.release()
        }
    }

    /// Nothing listens where the database should be: every request still succeeds, the first
    /// after the timeout, the others at once during the cool-down.
    @Test func aDatabaseThatIsDownIsAMissWithinTheTimeout() async throws {
        let clock = ManualClock()
        let logs = InMemoryLogHandler()
        let closed = try closedPort()
        let configuration = PostgresClient.Configuration(
            host: "127.0.0.1", port: closed, username: "conveyor", password: "pg-SECRET-7c1d", database: "conveyor",
            tls: .disable)
        let database = PostgresClient(configuration: configuration, backgroundLogger: Self.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let storage = try PostgresCacheStorage(
            client: database, logger: Logger(label: "cache") { _ in logs }, clock: clock)
        try await LocalServer.withServer { server in
            let client = try cachingClient(server, storage: storage)
            let name = UUID().uuidString
            let request = Task { try await client.send(Request<Data>(path: "/cache/\(name)", query: ["cc": "max-age=600"])) }
            await clock.waitForSleepers(1)
            clock.advance(by: storage.timeout)
            _ = try await request.value
            for _ in 0..<5 { _ = try await client.send(Request<Data>(path: "/cache/\(name)", query: ["cc": "max-age=600"])) }
            #expect(try await server.count(name) == 6 && clock.sleeperCount == 0)
            #expect(logs.entries.filter { $0.level == .warning }.count == 1)
            for entry in logs.entries { #expect(!"\(entry.message) \(entry.metadata)".contains("SECRET")) }
        }
    }

    /// The database is killed (SIGKILL, as a crash or an out-of-memory kill would) between the
    /// cache's lookup and its store: the request is answered by the server, the store is a
    /// logged failure, and the next request is a miss that does not wait on the dead database.
    @Test func aDatabaseKilledMidRequestCostsAMissAndALogLine() async throws {
        let own = try await TestPostgres.start()
        let logs = InMemoryLogHandler()
        do {
            let database = PostgresClient(configuration: Self.configuration(own), backgroundLogger: Self.quiet)
            let runner = Task { await database.run() }
            defer { runner.cancel() }
            // The store after the kill waits on a pool that reconnects in vain (or fails at once):
            // its timeout fires as soon as the database is dead (`clock` opens then), and before
            // that no call can time out, however slow the machine.
            let clock = GateClock()
            let storage = try PostgresCacheStorage(client: database, logger: Logger(label: "cache") { _ in logs }, clock: clock)
            try await LocalServer.withServer { server in
                let killer = KillOnce(own, then: clock.open)
                let client = NetworkClient(baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)) {
                    CacheBehavior(storage: storage)
                    killer  // after the cache: runs between its lookup and its store
                }
                let name = UUID().uuidString
                let answered = try await client.response(for: Request<Data>(path: "/cache/\(name)", query: ["cc": "max-age=600"]))
                #expect(answered.response.status == 200 && killer.killed.withLockedValue { $0 })
                let again = try await client.response(for: Request<Data>(path: "/cache/\(name)", query: ["cc": "max-age=600"]))
                #expect(again.response.status == 200 && again.response.headers["Age"] == nil)
                #expect(try await server.count(name) == 2)
                let warnings = logs.entries.filter { $0.level == .warning }
                #expect(warnings.count == 1)
                #expect(warnings.first?.metadata["cache.operation"] == "store")
                for entry in logs.entries {
                    let text = "\(entry.message) \(entry.metadata)"
                    #expect(!text.contains("SECRET") && !text.contains(name))
                }
            }
        }
        await own.stop()
    }

    // MARK: - Helpers

    /// Kills the test's own database once, on the first attempt that passes it.
    struct KillOnce: AttemptIntercepting {
        let server: TestPostgres
        let then: @Sendable () -> Void
        let killed = NIOLockedValueBox(false)
        init(_ server: TestPostgres, then: @escaping @Sendable () -> Void) {
            self.server = server
            self.then = then
        }
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            if !killed.withLockedValue({ $0 }) {
                try await server.kill()
                killed.withLockedValue { $0 = true }
                then()
            }
            return try await next(request)
        }
    }

    /// A clock that stands still (so a cool-down never ends) and whose sleepers wait until it is
    /// opened; once open, every sleep returns at once: a timeout that can fire only after a
    /// point the test chooses.
    final class GateClock: Clock, Sendable {
        typealias Instant = ContinuousClock.Instant
        let now = ContinuousClock.now
        var minimumResolution: Duration { .nanoseconds(1) }
        private let state = NIOLockedValueBox((open: false, parked: [UUID: CheckedContinuation<Void, any Error>]()))

        func open() {
            let parked = state.withLockedValue { state in
                state.open = true
                defer { state.parked = [:] }
                return Array(state.parked.values)
            }
            for sleeper in parked { sleeper.resume() }
        }

        func sleep(until deadline: Instant, tolerance: Duration?) async throws {
            let id = UUID()
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (sleeper: CheckedContinuation<Void, any Error>) in
                    let now: Bool = state.withLockedValue { state in
                        if state.open || Task.isCancelled { return true }
                        state.parked[id] = sleeper
                        return false
                    }
                    if now { sleeper.resume() }
                }
            } onCancel: {
                state.withLockedValue { $0.parked.removeValue(forKey: id) }?.resume(throwing: CancellationError())
            }
        }
    }

    /// Another session's `ACCESS EXCLUSIVE` lock on a table, held in an open transaction until
    /// `release()`: every query of the table waits, as on a database that does not answer.
    struct TableLock {
        let holder: Task<Void, any Error>
        let letGo: AsyncStream<Void>.Continuation

        static func take(_ table: String, in database: PostgresClient) async throws -> TableLock {
            let locked = AsyncStream<Void>.makeStream()
            let release = AsyncStream<Void>.makeStream()
            let holder = Task {
                try await database.withTransaction(logger: SharedCacheTests.quiet) { connection in
                    try await connection.query(
                        "LOCK TABLE \(unescaped: table) IN ACCESS EXCLUSIVE MODE", logger: SharedCacheTests.quiet)
                    locked.continuation.yield()
                    for await _ in release.stream { break }
                }
            }
            for await _ in locked.stream { break }
            return TableLock(holder: holder, letGo: release.continuation)
        }

        func release() async throws {
            letGo.yield()
            try await holder.value
        }
    }

    /// PostgresClient's own background lines (a refused connection, on purpose here) kept out of
    /// the test output.
    static let quiet = Logger(label: "postgres") { _ in SwiftLogNoOpLogHandler() }

    /// The client's configuration for `server`, reached on `port` (a proxy's) or its own.
    static func configuration(_ server: TestPostgres, port: Int? = nil) -> PostgresClient.Configuration {
        PostgresClient.Configuration(
            host: server.host, port: port ?? server.port, username: server.username, password: server.password,
            database: server.database, tls: .disable)
    }

    func withStorage<T>(
        maxBytes: Int = 1 << 20, clock: any Clock<Duration> = ContinuousClock(),
        logs: InMemoryLogHandler = InMemoryLogHandler(), now: @escaping @Sendable () -> Date = { Date() },
        _ body: (PostgresCacheStorage, PostgresClient) async throws -> T
    ) async throws -> T {
        let server = try await TestPostgres.shared()
        let database = PostgresClient(configuration: Self.configuration(server), backgroundLogger: Self.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let storage = try PostgresCacheStorage(
            client: database, table: Self.uniqueTable(), maxBytes: maxBytes, keepStale: .seconds(3_600),
            timeout: .seconds(5), logger: Logger(label: "cache") { _ in logs }, clock: clock, now: now)
        return try await body(storage, database)
    }

    static func uniqueTable() -> String { "cache_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "") }

    func cachingClient(
        _ server: LocalServer, storage: PostgresCacheStorage, now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> NetworkClient {
        NetworkClient(baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)) {
            CacheBehavior(storage: storage, now: now)
        }
    }

    static func count(_ database: PostgresClient, _ table: String) async throws -> Int64 {
        var total: Int64 = 0
        for try await (count) in try await database.query("SELECT count(*)::bigint FROM \(unescaped: table)").decode(Int64.self) {
            total = count
        }
        return total
    }

    func closedPort() throws -> Int {
        // Bind a port and close it at once: nothing listens there for the test's short life.
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0
                && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw TestPostgres.Unavailable(description: "no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A secret as a leak could spell it: as is, percent-encoded, base64, hex, lowercased.
    func encodings(of secret: String) -> [String] {
        let data = Data(secret.utf8)
        return [
            secret, secret.lowercased(), secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? secret,
            data.base64EncodedString(), data.map { String(format: "%02x", $0) }.joined(),
        ]
    }
}

// MARK: - Two processes

extension SharedCacheTests {
    /// One side of a two-process test: `send` sends a request and reports the cache's outcome.
    protocol Side: Sendable {
        func send(_ method: String, _ path: String, _ headers: String...) async throws -> Answer
        func advance(_ seconds: Int) async throws
        func burst(_ path: String, _ count: Int) async throws
    }

    struct Answer: Decodable {
        var status: Int
        var outcome: String
        var body: String
    }

    /// The test process's own client, with everything the child has.
    final class Here: Side {
        let client: NetworkClient
        let storage: PostgresCacheStorage
        let database: PostgresClient
        let base: URL
        let offset = NIOLockedValueBox<TimeInterval>(0)
        let outcome = NIOLockedValueBox("none")

        init(base: URL, database: PostgresClient, table: String, identityKey: String?) throws {
            self.base = base
            self.database = database
            let offset = offset
            let now: @Sendable () -> Date = { Date().addingTimeInterval(offset.withLockedValue { $0 }) }
            let storage = try PostgresCacheStorage(
                client: database, table: table, timeout: .seconds(10), now: now, identityKey: identityKey.map { try CacheIdentityKey($0.utf8) })
            self.storage = storage
            let recorder = Recorder(last: outcome)
            client = NetworkClient(baseURL: base, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)) {
                recorder
                // The `X-Account` header names the account (as the cache-peer process does).
                CacheBehavior(storage: storage, now: now, account: { request, _ in request.headers["X-Account"] })
            }
        }

        func send(_ method: String, _ path: String, _ headers: String...) async throws -> Answer {
            var request = Request<Data>(method: HTTPMethod(rawValue: method), path: base.absoluteString + path)
            for header in headers {
                let parts = header.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                request.headers.add(name: parts[0], value: parts[1])
            }
            outcome.withLockedValue { $0 = "none" }
            let response = try await client.response(for: request)
            return Answer(
                status: response.response.status, outcome: outcome.withLockedValue { $0 },
                body: String(decoding: response.value, as: UTF8.self))
        }

        func advance(_ seconds: Int) async throws { offset.withLockedValue { $0 += TimeInterval(seconds) } }

        func burst(_ path: String, _ count: Int) async throws {
            for _ in 0..<count {
                _ = try await client.send(Request<Data>(path: base.absoluteString + path, headers: ["Cache-Control": "max-age=0"]))
            }
        }

        func rows() async throws -> Int64 { try await SharedCacheTests.count(database, storage.table) }

        func storedEntry(_ path: String) async throws -> CachedResponse? {
            await storage.entry(for: base.absoluteString + path)
        }

        /// Every byte the table holds, every column of every row, but for the stored bodies:
        /// a body is the server's representation, kept as sent (the test server echoes the
        /// request's cookie in it); everything the cache adds around it must be clean.
        func tableBytes() async throws -> Data {
            var all = Data()
            let rows = try await database.query(
                """
                SELECT key_hash, entry, bytes::text, expires_at::text, last_used::text, coalesce(url_hash, ''::bytea)
                FROM \(unescaped: storage.table)
                """)
            for try await (hash, entry, bytes, expires, used, url) in rows.decode((Data, Data, String, String, String, Data).self) {
                var rest = entry
                if let body = CachedResponse(encoded: entry)?.body, !body.isEmpty, let range = rest.range(of: body) {
                    rest.removeSubrange(range)
                }
                all += hash + url + rest + Data((bytes + expires + used).utf8)
            }
            return all
        }
    }

    struct Recorder: SuccessObserving {
        let last: NIOLockedValueBox<String>
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            last.withLockedValue { $0 = context[CacheOutcome.self].map { "\($0)" } ?? "none" }
        }
    }

    /// The child process `cache-peer`, one command line and one answer line at a time.
    final class Child: Side, @unchecked Sendable {
        // @unchecked: the pipes and the buffer are only used on `queue`.
        private let process = Process()
        private let input: FileHandle
        private let output: FileHandle
        private var buffer = Data()
        private let queue = DispatchQueue(label: "cache-peer")

        init(base: URL, database: URL, table: String, identityKey: String?, fillLease: Duration? = nil) throws {
            let executable = try #require(BuiltExecutable.url("cache-peer"), "cache-peer was not built")
            process.executableURL = executable
            process.arguments = [base.absoluteString, database.absoluteString, table]
            var environment = ProcessInfo.processInfo.environment
            environment["CACHE_PEER_IDENTITY_KEY"] = identityKey
            if let fillLease {
                environment["CACHE_PEER_FILL_LEASE_MS"] = String(fillLease.components.seconds * 1_000 + fillLease.components.attoseconds / 1_000_000_000_000_000)
            }
            process.environment = environment
            let stdin = Pipe()
            let stdout = Pipe()
            process.standardInput = stdin
            process.standardOutput = stdout
            try process.run()
            input = stdin.fileHandleForWriting
            output = stdout.fileHandleForReading
        }

        func finish() {
            try? input.close()
            process.waitUntilExit()
        }

        /// Writes a command without waiting for its answer (a request left in flight).
        func start(_ method: String, _ path: String) {
            queue.sync { input.write(Data("\(method)\t\(path)\n".utf8)) }
        }

        /// Ends the process at once, as a crash would (SIGKILL): nothing it holds is released.
        func kill() {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }

        /// The longest an answer may take: a cache-peer that never answers is killed, and the
        /// test fails instead of hanging the run (the suite's time limit cannot end a thread
        /// blocked reading a pipe).
        static let answerBound: TimeInterval = 60

        private func ask(_ line: String) async throws -> Data {
            let answered = NIOLockedValueBox(false)
            let process = process
            DispatchQueue.global().asyncAfter(deadline: .now() + Self.answerBound) {
                if !answered.withLockedValue({ $0 }), process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
            }
            defer { answered.withLockedValue { $0 = true } }
            let result: Data? = await withCheckedContinuation { continuation in
                queue.async {
                    self.input.write(Data((line + "\n").utf8))
                    while true {
                        if let newline = self.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                            let reply = self.buffer[..<newline]
                            self.buffer = Data(self.buffer[(newline + 1)...])
                            continuation.resume(returning: Data(reply))
                            return
                        }
                        let chunk = self.output.availableData
                        if chunk.isEmpty {
                            continuation.resume(returning: nil)
                            return
                        }
                        self.buffer += chunk
                    }
                }
            }
            return try #require(result, "cache-peer exited or did not answer within \(Self.answerBound) s")
        }

        func send(_ method: String, _ path: String, _ headers: String...) async throws -> Answer {
            let reply = try await ask(([method, path] + headers).joined(separator: "\t"))
            return try JSONDecoder().decode(Answer.self, from: reply)
        }

        func advance(_ seconds: Int) async throws { _ = try await ask("advance\t\(seconds)") }

        func burst(_ path: String, _ count: Int) async throws { _ = try await ask("burst\t\(path)\t\(count)") }
    }

    struct Counter {
        let server: LocalServer
        struct Count: Decodable { var count: Int }
        func count(_ name: String) async throws -> Int {
            let plain = NetworkClient(baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient))
            let count: Count = try await plain.get("/cache/\(name)/count")
            return count.count
        }
    }

    /// This process and a child, both caching in one new table of the shared database, against one server.
    /// The identity key both processes share (as every instance of a fleet must).
    static let identityKey = "test-fleet-identity-key-7c1e"

    func withTwoProcesses(
        identityKey: String? = SharedCacheTests.identityKey, _ body: (Here, Child, Counter) async throws -> Void
    ) async throws {
        let postgres = try await TestPostgres.shared()
        let database = PostgresClient(configuration: Self.configuration(postgres), backgroundLogger: SharedCacheTests.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let table = Self.uniqueTable()
        try await LocalServer.withServer { server in
            let here = try Here(base: server.baseURL, database: database, table: table, identityKey: identityKey)
            let child = try Child(base: server.baseURL, database: postgres.url, table: table, identityKey: identityKey)
            defer { child.finish() }
            try await body(here, child, Counter(server: server))
        }
    }

    func both(_ one: Here, _ other: Child, _ step: (any Side) async throws -> Void) async throws {
        try await step(one)
        try await step(other)
    }
}

extension LocalServer {
    fileprivate func count(_ name: String) async throws -> Int { try await SharedCacheTests.Counter(server: self).count(name) }
}
