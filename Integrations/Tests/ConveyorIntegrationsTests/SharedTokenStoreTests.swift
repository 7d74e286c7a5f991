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
/// `PostgresTokenStore` against the real database: instances that each hold a store over one
/// table renew a rejected token once between them; a holder that hangs or fails holds the others
/// at most its lease; a database that does not answer leaves each instance renewing for itself;
/// the table never holds the token in clear.
@Suite(.timeLimit(.minutes(2))) struct SharedTokenStoreTests {
    /// Counts renewals and hands out `token-1`, `token-2`, …, after `delay`.
    final class Issuer: TokenRefresher {
        let issued = NIOLockedValueBox(0)
        let delay: Duration
        init(delay: Duration = .milliseconds(200)) { self.delay = delay }
        func refreshToken(replacing expiredToken: String?) async throws -> String {
            try await Task.sleep(for: delay)  // the token endpoint's time, so renewals overlap
            let number = issued.withLockedValue { count in
                count += 1
                return count
            }
            return "token-\(number)-SECRET"
        }
    }

    struct Failing: TokenRefresher {
        struct Refused: Error {}
        func refreshToken(replacing expiredToken: String?) async throws -> String { throw Refused() }
    }

    struct Hanging: TokenRefresher {
        func refreshToken(replacing expiredToken: String?) async throws -> String {
            try await Task.sleep(for: .seconds(60))
            return "never"
        }
    }

    static let key = try! TokenEncryptionKey(Array("0123456789abcdef0123456789abcdef".utf8))

    func withDatabases<T: Sendable>(_ count: Int, _ body: @Sendable ([PostgresClient], String) async throws -> T) async throws -> T {
        try await FleetLoadTests.withDatabases(count, tablePrefix: "tokens_", body)
    }

    func store(_ database: PostgresClient, _ table: String, _ refresher: any TokenRefresher, lease: Duration = .seconds(10))
        throws -> PostgresTokenStore
    {
        try PostgresTokenStore(
            client: database, table: table, name: "upstream", encryptionKey: Self.key, refresher: refresher, lease: lease,
            timeout: .seconds(5))
    }

    @Test func fourInstancesRenewARejectedTokenOnceBetweenThem() async throws {
        try await withDatabases(4) { databases, table in
            let issuer = Issuer()
            let stores = try databases.map { try store($0, table, issuer) }
            // No token yet: 8 requests on each instance got a 401 without one.
            let first = try await Self.everyone(stores, replacing: nil)
            #expect(Set(first).count == 1 && issuer.issued.withLockedValue { $0 } == 1, "\(Set(first))")
            for store in stores { #expect(try await store.currentToken() == first[0]) }
            // That token is rejected everywhere at once: one renewal again.
            let second = try await Self.everyone(stores, replacing: first[0])
            #expect(Set(second).count == 1 && second[0] != first[0])
            #expect(issuer.issued.withLockedValue { $0 } == 2)
            // An instance that still sends the first token gets the second from the table.
            #expect(try await stores[3].refreshToken(replacing: first[0]) == second[0])
            #expect(issuer.issued.withLockedValue { $0 } == 2)
        }
    }

    @Test func throughAuthTokenBehaviorFourInstancesSignInOnceBetweenThem() async throws {
        try await withDatabases(4) { databases, table in
            let issuer = Issuer()
            try await LocalServer.withServer { server in
                let clients = try databases.map { database in
                    let tokens = try store(database, table, issuer)
                    return NetworkClient(baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)) {
                        AuthTokenBehavior(tokens: tokens, refresher: tokens)
                    }
                }
                // The server accepts only the first token issued; no instance has one yet.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for client in clients {
                        for _ in 0..<8 {
                            group.addTask {
                                _ = try await client.send(Request<Data>(path: "/auth?token=token-1-SECRET"))
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                #expect(issuer.issued.withLockedValue { $0 } == 1)

                // The same without the store: each instance keeps its own token.
                let alone = Issuer()
                let separate = try (0..<4).map { _ in
                    let own = InMemoryTokenStore(token: nil) { expired in try await alone.refreshToken(replacing: expired) }
                    return NetworkClient(baseURL: server.baseURL, transport: try AsyncHTTPClientTransport(client: sharedHTTPClient)) {
                        AuthTokenBehavior(tokens: own, refresher: own)
                    }
                }
                await withTaskGroup(of: Void.self) { group in
                    for client in separate {
                        for _ in 0..<8 {
                            // Only the first token issued is accepted: the others' requests fail.
                            group.addTask { _ = try? await client.send(Request<Data>(path: "/auth?token=token-1-SECRET")) }
                        }
                    }
                }
                let renewals = (shared: issuer.issued.withLockedValue { $0 }, separate: alone.issued.withLockedValue { $0 })
                print("renewals for 32 rejected requests on 4 instances: \(renewals.shared) with the store, \(renewals.separate) without")
                #expect(renewals.separate == 4)
            }
        }
    }

    static func everyone(_ stores: [PostgresTokenStore], replacing token: String?) async throws -> [String] {
        try await withThrowingTaskGroup(of: String.self) { group in
            for store in stores {
                for _ in 0..<8 { group.addTask { try await store.refreshToken(replacing: token) } }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    /// A holder that hangs holds the others at most its lease, once; so does one whose clock is an
    /// hour ahead or behind (clocks at the edges: the lease's times are the database's).
    @Test(arguments: [0.0, 3_600.0, -3_600.0])
    func aHolderThatHangsHoldsTheOthersAtMostItsLeaseOnce(skew: TimeInterval) async throws {
        try await withDatabases(2) { databases, table in
            let lease = Duration.milliseconds(800)
            let hung = try PostgresTokenStore(
                client: databases[0], table: table, name: "upstream", encryptionKey: Self.key, refresher: Hanging(),
                lease: lease, timeout: .seconds(5), now: { Date().addingTimeInterval(skew) })
            let issuer = Issuer(delay: .zero)
            let other = try store(databases[1], table, issuer, lease: lease)
            let holder = Task { try await hung.refreshToken(replacing: nil) }
            defer { holder.cancel() }
            for _ in 0..<200 {
                if (try? await Self.leaseHeld(databases[1], table)) == true { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(try await Self.leaseHeld(databases[1], table))
            let started = ContinuousClock.now
            let first = try await other.refreshToken(replacing: nil)
            let waited = ContinuousClock.now - started
            // The hung lease held while it lasted, and no longer.
            #expect(first == "token-1-SECRET" && waited >= lease * 0.8 && waited < lease + .seconds(2), "\(waited)")
            // The next renewal does not wait for the dead holder again.
            let again = ContinuousClock.now
            let second = try await other.refreshToken(replacing: first)
            #expect(second == "token-2-SECRET" && ContinuousClock.now - again < lease / 2)
        }
    }

    /// A lease row written by hand (or by a tool) that ends far ahead (`infinity`, two hours)
    /// holds no one: the first instance renews at once, under the lease, and the others take its
    /// token from the table. (Before: every renewal waited the whole lease, then renewed for
    /// itself without storing the token, for as long as the row stood.)
    @Test(arguments: ["'infinity'", "clock_timestamp() + interval '2 hours'"])
    func aLeaseRowEndingFarAheadHoldsNoOne(until: String) async throws {
        try await withDatabases(2) { databases, table in
            let lease = Duration.seconds(2)
            let issuer = Issuer(delay: .zero)
            let first = try store(databases[0], table, issuer, lease: lease)
            let second = try store(databases[1], table, issuer, lease: lease)
            _ = try await first.currentToken()  // creates the table
            try await databases[0].query(
                """
                INSERT INTO \(unescaped: table) (name, sealed, lease_holder, lease_until)
                VALUES ('upstream', NULL, gen_random_uuid(), \(unescaped: until))
                """)
            let token = try await first.refreshToken(replacing: nil)
            #expect(token == "token-1-SECRET")
            // The renewal went through the table: the other instance takes the token from it. (A
            // renewal that waited the far lease out renewed without storing: this fails then,
            // whatever the machine's speed.)
            #expect(try await second.refreshToken(replacing: nil) == "token-1-SECRET")
            #expect(issuer.issued.withLockedValue { $0 } == 1)
        }
    }

    @Test func aRenewalThatFailsReleasesTheLeaseAtOnce() async throws {
        try await withDatabases(2) { databases, table in
            let failing = try store(databases[0], table, Failing())
            let issuer = Issuer(delay: .zero)
            let other = try store(databases[1], table, issuer)
            await #expect(throws: Failing.Refused.self) { try await failing.refreshToken(replacing: nil) }
            let started = ContinuousClock.now
            #expect(try await other.refreshToken(replacing: nil) == "token-1-SECRET")
            // Under the 10 s lease the failed renewal held: a busy machine's pauses stay below it.
            #expect(ContinuousClock.now - started < .seconds(8), "the lease of the failed renewal was released")
        }
    }

    @Test func theTableNeverHoldsTheTokenInClearAndAnotherKeyCannotOpenIt() async throws {
        try await withDatabases(1) { databases, table in
            let issuer = Issuer(delay: .zero)
            let one = try store(databases[0], table, issuer)
            let token = try await one.refreshToken(replacing: nil)
            var bytes = Data()
            for try await (name, sealed) in try await databases[0].query(
                "SELECT name, sealed FROM \(unescaped: table)").decode((String, Data?).self)
            {
                bytes += Data(name.utf8) + (sealed ?? Data())
            }
            #expect(!bytes.isEmpty && bytes.range(of: Data(token.utf8)) == nil && bytes.range(of: Data("SECRET".utf8)) == nil)
            let otherKey = try PostgresTokenStore(
                client: databases[0], table: table, name: "upstream",
                encryptionKey: try TokenEncryptionKey(Array("fedcba9876543210fedcba9876543210".utf8)), refresher: issuer)
            #expect(try await otherKey.currentToken() == nil, "a token sealed with another key does not open")
        }
    }

    @Test func aDatabaseThatDoesNotAnswerLeavesEachInstanceRenewingForItself() async throws {
        let closed = try SharedCacheTests().closedPort()
        let postgres = try await TestPostgres.shared()
        let database = PostgresClient(
            configuration: SharedCacheTests.configuration(postgres, port: closed), backgroundLogger: SharedCacheTests.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let issuer = Issuer(delay: .zero)
        let store = try PostgresTokenStore(
            client: database, name: "upstream", encryptionKey: Self.key, refresher: issuer, timeout: .milliseconds(200))
        let started = ContinuousClock.now
        #expect(try await store.refreshToken(replacing: nil) == "token-1-SECRET")
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(try await store.currentToken() == "token-1-SECRET")
    }

    @Test func aKeyOfAnotherLengthIsRefused() {
        #expect { _ = try TokenEncryptionKey(Array("short".utf8)) } throws: { error in
            (error as? TokenEncryptionKey.WrongLength)?.count == 5
        }
    }

    static func leaseHeld(_ database: PostgresClient, _ table: String) async throws -> Bool {
        var held = false
        let rows = try await database.query(
            "SELECT lease_until IS NOT NULL FROM \(unescaped: table) WHERE name = 'upstream'")
        for try await value in rows.decode(Bool.self) { held = value }
        return held
    }
}
}
