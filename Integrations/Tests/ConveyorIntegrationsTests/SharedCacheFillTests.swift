import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorPostgres
import Foundation
import IntegrationsTestSupport
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

extension FleetLoadTests {
/// One fill across the fleet (`PostgresCacheStorage` as `CacheFillCoordinating`), against the
/// real database: a cold entry asked for by four instances at once reaches the upstream once; a
/// filler that dies holds the others at most its lease; a database that stalls holds a request at
/// most the storage's timeout; after a private answer, other identities do not wait.
@Suite(.timeLimit(.minutes(3))) struct SharedCacheFillTests {
    struct Fleet {
        let clients: [NetworkClient]
        let storages: [PostgresCacheStorage]
        /// Seconds every instance's clock (its cache's and its storage's `now`) is moved on by.
        let offset: NIOLockedValueBox<TimeInterval>
    }

    /// `instances` instances over one table, each its own `PostgresClient`, storage, client and
    /// bearer token (as the replicas of a service each sign in with a token of their own).
    func withFleet<T: Sendable>(
        instances: Int, fillLease: Duration = .seconds(5), timeout: Duration = .seconds(10),
        _ body: @Sendable (Fleet, LocalServer, [PostgresClient]) async throws -> T
    ) async throws -> T {
        let postgres = try await TestPostgres.shared()
        let table = SharedCacheTests.uniqueTable()
        let databases = (0..<instances).map { _ in
            PostgresClient(configuration: SharedCacheTests.configuration(postgres), backgroundLogger: SharedCacheTests.quiet)
        }
        return try await withThrowingTaskGroup(of: Void.self) { runners in
            for database in databases { runners.addTask { await database.run() } }
            defer { runners.cancelAll() }
            return try await LocalServer.withServer { server in
                var clients: [NetworkClient] = []
                var storages: [PostgresCacheStorage] = []
                let offset = NIOLockedValueBox<TimeInterval>(0)
                let now: @Sendable () -> Date = { Date().addingTimeInterval(offset.withLockedValue { $0 }) }
                for (index, database) in databases.enumerated() {
                    let storage = try PostgresCacheStorage(
                        client: database, table: table, timeout: timeout, now: now,
                        identityKey: try CacheIdentityKey(SharedCacheTests.identityKey.utf8), fillLease: fillLease)
                    try await storage.prepare()
                    storages.append(storage)
                    let token = "instance-\(index)-token"
                    clients.append(
                        NetworkClient(baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)) {
                            HeadersBehavior(["Authorization": "Bearer \(token)"])
                            CacheBehavior(storage: storage, now: now)
                        })
                }
                return try await body(Fleet(clients: clients, storages: storages, offset: offset), server, databases)
            }
        }
    }

    /// Sends `perInstance` requests at once from every instance; returns the bodies.
    static func herd(_ fleet: Fleet, path: String, perInstance: Int) async throws -> [String] {
        try await withThrowingTaskGroup(of: String.self) { group in
            for client in fleet.clients {
                for _ in 0..<perInstance {
                    group.addTask {
                        String(decoding: try await client.send(Request<Data>(path: path)), as: UTF8.self)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test func aColdEntryAskedForByFourInstancesAtOnceReachesTheUpstreamOnce() async throws {
        let (coordinated, uncoordinated) = try await (
            withFleet(instances: 4) { fleet, server, _ in
                let name = UUID().uuidString
                let bodies = try await Self.herd(fleet, path: "/cache/\(name)?cc=public%2C%20max-age%3D600&delay=300", perInstance: 32)
                #expect(bodies.count == 128 && Set(bodies).count == 1, "every request got the one answer")
                return try await SharedCacheTests.Counter(server: server).count(name)
            },
            withFleet(instances: 4, fillLease: .zero) { fleet, server, _ in
                let name = UUID().uuidString
                _ = try await Self.herd(fleet, path: "/cache/\(name)?cc=public%2C%20max-age%3D600&delay=300", perInstance: 32)
                return try await SharedCacheTests.Counter(server: server).count(name)
            })
        print("a cold entry, 4 instances x 32 requests at once: \(coordinated) upstream call(s) with one fill; \(uncoordinated) without")
        #expect(coordinated == 1)
        #expect(uncoordinated > 1)
    }

    /// A fill whose answer is a `503` stores nothing and hands the turn to one waiter: the others
    /// wait once more and are answered from what it stores. The upstream is asked twice, not by
    /// every waiter of the fleet at once (up to 128 times when the waiters fetch themselves).
    @Test func aFillThatFailsHandsTheTurnToOneWaiter() async throws {
        try await withFleet(instances: 4) { fleet, server, _ in
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=public%2C%20max-age%3D600&delay=300&fail=1"
            let outcomes = try await withThrowingTaskGroup(of: String?.self) { group in
                for client in fleet.clients {
                    for _ in 0..<32 {
                        group.addTask {
                            do {
                                return String(decoding: try await client.send(Request<Data>(path: path)), as: UTF8.self)
                            } catch {
                                return nil
                            }
                        }
                    }
                }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            let calls = try await SharedCacheTests.Counter(server: server).count(name)
            let answers = outcomes.compactMap { $0 }
            print("a fill answered 503, 4 instances x 32 requests at once: \(calls) upstream call(s), \(outcomes.count - answers.count) failed")
            #expect(calls == 2, "the 503, then one fill for everyone else")
            #expect(outcomes.count == 128 && answers.count == 127 && Set(answers).count == 1)
        }
    }

    @Test func anEntryThatExpiresUnderLoadIsRefreshedOnce() async throws {
        try await withFleet(instances: 4) { fleet, server, _ in
            let name = UUID().uuidString
            // Fresh for 5 s, with a validator. Stored with every instance's clock 6 s behind the
            // server's (so the answer's `Date` does not age the revalidated one), then the clocks
            // catch up: the herd finds it stale.
            let path = "/cache/\(name)?cc=public%2C%20max-age%3D5&etag=%22v1%22&delay=300"
            fleet.offset.withLockedValue { $0 = -6 }
            _ = try await fleet.clients[0].send(Request<Data>(path: path))
            fleet.offset.withLockedValue { $0 = 0 }
            _ = try await Self.herd(fleet, path: path, perInstance: 16)
            #expect(try await SharedCacheTests.Counter(server: server).count(name) == 2)
        }
    }

    @Test func aFillerKilledMidLeaseHoldsTheOthersAtMostItsLease() async throws {
        let postgres = try await TestPostgres.shared()
        let database = PostgresClient(configuration: SharedCacheTests.configuration(postgres), backgroundLogger: SharedCacheTests.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let table = SharedCacheTests.uniqueTable()
        let lease = Duration.seconds(1)
        try await LocalServer.withServer { server in
            let storage = try PostgresCacheStorage(
                client: database, table: table, timeout: .seconds(10),
                identityKey: try CacheIdentityKey(SharedCacheTests.identityKey.utf8), fillLease: lease)
            try await storage.prepare()
            let client = NetworkClient(baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)) {
                CacheBehavior(storage: storage)
            }
            let child = try SharedCacheTests.Child(
                base: server.baseURL, database: postgres.url, table: table, identityKey: SharedCacheTests.identityKey,
                fillLease: lease)
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=public%2C%20max-age%3D600&delay=5000"
            child.start("GET", path)
            // The child holds the lease once its request reached the upstream.
            let counter = SharedCacheTests.Counter(server: server)
            for _ in 0..<400 where try await counter.count(name) == 0 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(try await counter.count(name) == 1)
            child.kill()
            let started = ContinuousClock.now
            _ = try await client.send(Request<Data>(path: path))
            let waited = ContinuousClock.now - started
            // It waited for the dead filler (the lease was live), then fetched itself: at most the
            // lease, plus the upstream's 5 s.
            #expect(waited < lease + .seconds(5) + .seconds(2), "\(waited)")
            #expect(try await counter.count(name) == 2)
            // The dead lease is gone for the next one: it is this process's now, then released.
            #expect(await storage.beginFill(of: server.baseURL.absoluteString + "/other") != .wait)
        }
    }

    /// Clocks at the edges: a filler whose clock is an hour ahead (or behind) and that dies holding
    /// the lease holds the others at most the lease, once: the lease's times are the database's.
    @Test(arguments: [3_600.0, -3_600.0])
    func aFillerWhoseClockIsWrongHoldsTheOthersAtMostItsLeaseOnce(skew: TimeInterval) async throws {
        let postgres = try await TestPostgres.shared()
        let databases = (0..<2).map { _ in
            PostgresClient(configuration: SharedCacheTests.configuration(postgres), backgroundLogger: SharedCacheTests.quiet)
        }
        let runners = databases.map { database in Task { await database.run() } }
        defer { runners.forEach { $0.cancel() } }
        let table = SharedCacheTests.uniqueTable()
        let key = try CacheIdentityKey(SharedCacheTests.identityKey.utf8)
        let lease = Duration.milliseconds(500)
        let wrong = try PostgresCacheStorage(
            client: databases[0], table: table, timeout: .seconds(10), now: { Date().addingTimeInterval(skew) },
            identityKey: key, fillLease: lease)
        let right = try PostgresCacheStorage(
            client: databases[1], table: table, timeout: .seconds(10), identityKey: key, fillLease: lease)
        try await right.prepare()
        let url = "http://127.0.0.1:1/cache/\(UUID().uuidString)"
        // The wrong clock's instance takes the turn and dies holding it (never ends it).
        guard case .fill = await wrong.beginFill(of: url) else {
            Issue.record("the first to ask takes the turn")
            return
        }
        let started = ContinuousClock.now
        var turn = await right.beginFill(of: url)
        // Bounded far above the lease, far below the skew: a busy machine can pause this task for
        // seconds, and the bug this guards against held the others for an hour.
        while turn == .wait, ContinuousClock.now - started < lease + .seconds(10) {
            await right.waitForFill(of: url)
            turn = await right.beginFill(of: url)
        }
        guard case .fill(let taken) = turn else {
            Issue.record("after the lease, still \(turn)")
            return
        }
        // The dead lease held while it lasted (no fetch beside it), and no longer.
        let waited = ContinuousClock.now - started
        #expect(waited >= lease * 0.8 && waited < lease + .seconds(10), "\(waited)")
        await right.endFill(taken, stored: .nothing)
    }

    /// A lease row written by hand (or by a tool) that ends far ahead (`infinity`, two hours)
    /// holds no one: a lease that ends further ahead than this instance's own lease could not have
    /// been written by it or a peer with the same lease, and counts as ended. (Before: every request
    /// for the URL waited its whole lease, then fetched without one, for as long as the row stood.)
    @Test(arguments: ["'infinity'", "clock_timestamp() + interval '2 hours'"])
    func aLeaseRowEndingFarAheadHoldsNoOne(until: String) async throws {
        let postgres = try await TestPostgres.shared()
        let database = PostgresClient(configuration: SharedCacheTests.configuration(postgres), backgroundLogger: SharedCacheTests.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let table = SharedCacheTests.uniqueTable()
        let key = try CacheIdentityKey(SharedCacheTests.identityKey.utf8)
        let lease = Duration.seconds(2)
        let storage = try PostgresCacheStorage(client: database, table: table, timeout: .seconds(10), identityKey: key, fillLease: lease)
        try await storage.prepare()
        let url = "http://127.0.0.1:1/cache/\(UUID().uuidString)"
        guard case .fill = await storage.beginFill(of: url) else {
            Issue.record("the first to ask takes the turn")
            return
        }
        // The row is rewritten by hand: its lease now ends far ahead.
        try await database.query("UPDATE \(unescaped: "\"" + table + "_fill\"") SET until = \(unescaped: until)")
        let turn = await storage.beginFill(of: url)
        // Not waited for: the turn is this instance's at once (whether it also came quickly is
        // left to the clock of a busy machine; the turn is what the bug changed).
        #expect(turn != .wait, "a lease that ends \(until) is waited for")
        if turn == .wait { await storage.waitForFill(of: url) }
        if case .fill(let taken) = turn { await storage.endFill(taken, stored: .nothing) }
        // And the trim removes such a row: the table keeps no lease that holds no one.
        try await database.query("UPDATE \(unescaped: "\"" + table + "_fill\"") SET until = \(unescaped: until)")
        _ = await storage.beginFill(of: url + "/other")
        var count = -1
        try await database.query("UPDATE \(unescaped: "\"" + table + "_fill\"") SET until = \(unescaped: until)")
        try await storage.trim()
        for try await value in try await database.query("SELECT count(*)::int FROM \(unescaped: "\"" + table + "_fill\"")").decode(Int.self) {
            count = value
        }
        #expect(count == 0)
    }

    @Test func aDatabaseThatStallsHoldsARequestAtMostTheStoragesTimeout() async throws {
        try await withFleet(instances: 1, timeout: .milliseconds(300)) { fleet, server, databases in
            let name = UUID().uuidString
            let path = "/cache/\(name)?cc=public%2C%20max-age%3D600"
            // Another session holds every lease row and the table's lock for as long as the test runs.
            let fill = fleet.storages[0].table + "_fill"
            let (locked, lockHeld) = AsyncStream<Void>.makeStream()
            let locker = Task {
                try await databases[0].withTransaction(logger: Logger(label: "locker")) { connection in
                    try await connection.query("LOCK TABLE \(unescaped: "\"" + fill + "\"") IN ACCESS EXCLUSIVE MODE", logger: Logger(label: "locker"))
                    lockHeld.yield()
                    // Held until the test ends (cancelled), at most 20 s.
                    try await Task.sleep(for: .seconds(20))
                }
            }
            defer { locker.cancel() }
            for await _ in locked { break }
            let started = ContinuousClock.now
            _ = try await fleet.clients[0].send(Request<Data>(path: path))
            let took = ContinuousClock.now - started
            #expect(try await SharedCacheTests.Counter(server: server).count(name) == 1)
            // The turn was not given within the timeout: fetched without one.
            #expect(took < .seconds(2), "\(took)")
        }
    }

    @Test func afterAPrivateAnswerOtherIdentitiesDoNotWaitAndASharedOneEndsTheLease() async throws {
        try await withFleet(instances: 2) { fleet, server, _ in
            let (one, other) = (fleet.storages[0], fleet.storages[1])
            let url = server.baseURL.absoluteString + "/cache/\(UUID().uuidString)"
            guard case .fill(let lease) = await one.beginFill(of: url) else {
                Issue.record("the first asks gets the turn")
                return
            }
            #expect(await other.beginFill(of: url) == .wait)
            await one.endFill(lease, stored: .privateAnswer)
            #expect(await other.beginFill(of: url) == .fetch, "the URL answers privately: no one waits")
            let shared = URL(string: url + "-shared")!.absoluteString
            guard case .fill(let next) = await other.beginFill(of: shared) else {
                Issue.record("a new URL's turn")
                return
            }
            await other.endFill(next, stored: .sharedAnswer)
            guard case .fill = await one.beginFill(of: shared) else {
                Issue.record("after a shared answer the lease is gone")
                return
            }
        }
    }
}
}
