import Conveyor
import ConveyorPostgres
import ConveyorTesting
import Foundation
import IntegrationsTestSupport
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

/// The cross-credential rules of `CacheBehavior` (RFC 9111 §3.5 and §5.2.2.10) through
/// `PostgresCacheStorage`, as two replicas of a service each holding its own token would meet
/// them: two clients, each with its own storage value on one table of a real PostgreSQL
/// (`TestPostgres`), an origin played by a `MockTransport` per replica (so what reached it is
/// counted exactly), and one injected clock (no waiting). The same cases as `CacheBehaviorTests`
/// runs on memory storage.
@Suite(.timeLimit(.minutes(2))) struct SharedMaxAgeTests {
    /// The clock every part reads: both caches and both storages (whose expiry of a row follows it).
    final class Now: Sendable {
        private let value = NIOLockedValueBox(Date(timeIntervalSince1970: 1_800_000_000))
        func advance(_ seconds: Double) { value.withLockedValue { $0 = $0.addingTimeInterval(seconds) } }
        var function: @Sendable () -> Date { { [self] in self.value.withLockedValue { $0 } } }
    }

    /// One replica: its origin, its client, its outcomes.
    struct Replica {
        let origin: MockTransport
        let client: NetworkClient
        let outcomes: Outcomes

        func get(_ path: String, _ authorization: String?) async throws -> String {
            let headers: HTTPHeaders = authorization.map { ["Authorization": "Bearer \($0)"] } ?? [:]
            let response = try await client.send(Request<HTTPResponse>(path: path, headers: headers))
            return String(decoding: response.body, as: UTF8.self)
        }
    }

    /// The cache's outcome of each request.
    final class Outcomes: SuccessObserving, FailureObserving {
        private let list = NIOLockedValueBox<[CacheOutcome?]>([])
        var last: CacheOutcome? { list.withLockedValue { $0.last ?? nil } }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            let outcome = context[CacheOutcome.self]
            list.withLockedValue { $0.append(outcome) }
        }
        func afterFailure(_ error: NetworkError, context: RequestContext) async {
            let outcome = context[CacheOutcome.self]
            list.withLockedValue { $0.append(outcome) }
        }
    }

    static let api = URL(string: "https://payroll.test/v1")!

    /// Two replicas sharing one new table, on one clock.
    func withReplicas(_ body: (Replica, Replica, Now) async throws -> Void) async throws {
        let server = try await TestPostgres.shared()
        let database = PostgresClient(
            configuration: .init(
                host: server.host, port: server.port, username: server.username, password: server.password,
                database: server.database, tls: .disable),
            backgroundLogger: Logger(label: "postgres") { _ in SwiftLogNoOpLogHandler() })
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let table = "cache_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let now = Now()
        func replica() throws -> Replica {
            let storage = try PostgresCacheStorage(
                client: database, table: table, keepStale: .seconds(3_600), timeout: .seconds(10), now: now.function,
                identityKey: try CacheIdentityKey("shared-max-age-tests-key".utf8))
            let origin = MockTransport(baseURL: Self.api)
            let outcomes = Outcomes()
            let client = NetworkClient(baseURL: Self.api, transport: origin) {
                outcomes
                CacheBehavior(storage: storage, now: now.function)
            }
            return Replica(origin: origin, client: client, outcomes: outcomes)
        }
        try await body(try replica(), try replica(), now)
        _ = try? await database.query("DROP TABLE IF EXISTS \(unescaped: table)")
    }

    /// `max-age=3600, s-maxage=0`: Alice's replica reuses Alice's payroll for an hour; Bob's
    /// request, on the other replica, reaches the origin (which refuses it), as does one with no
    /// credential.
    @Test func sMaxAgeZeroSendsEveryOtherCredentialToTheOrigin() async throws {
        try await withReplicas { alice, bob, now in
            alice.origin.enqueue(.text("Alice's payroll", headers: ["Cache-Control": "max-age=3600, s-maxage=0"]))
            #expect(try await alice.get("/payroll", "alice") == "Alice's payroll")
            now.advance(60)
            #expect(try await alice.get("/payroll", "alice") == "Alice's payroll" && alice.outcomes.last == .hit)
            #expect(try await bob.get("/payroll", "alice") == "Alice's payroll" && bob.outcomes.last == .hit)
            bob.origin.enqueue(.text("forbidden", status: 403))
            await #expect(throws: NetworkError.self) { _ = try await bob.get("/payroll", "bob") }
            #expect(bob.origin.requests.count == 1)
            #expect(bob.origin.requests.last?.headers["Authorization"] == "Bearer bob")
            alice.origin.enqueue(.text("Alice's payroll", headers: ["Cache-Control": "max-age=3600, s-maxage=0"]))
            _ = try await alice.get("/other", "alice")
            bob.origin.enqueue(.text("sign in", status: 401))
            await #expect(throws: NetworkError.self) { _ = try await bob.get("/other", nil) }
            #expect(bob.origin.requests.count == 2 && alice.origin.requests.count == 2)
        }
    }

    /// With a validator, the other credential's request is conditional and carries its own
    /// credential: a `304` gives it the stored body, a `403` is its answer.
    @Test func sMaxAgeZeroRevalidatesWithTheOtherCredential() async throws {
        try await withReplicas { alice, bob, _ in
            alice.origin.enqueue(
                .text("report", headers: ["Cache-Control": "public, max-age=3600, s-maxage=0", "ETag": "\"v1\""]))
            _ = try await alice.get("/report", "alice")
            bob.origin.enqueue(.status(304, headers: ["ETag": "\"v1\""]))
            #expect(try await bob.get("/report", "bob") == "report" && bob.outcomes.last == .revalidated)
            let sent = try #require(bob.origin.requests.last)
            #expect(sent.headers["Authorization"] == "Bearer bob" && sent.headers["If-None-Match"] == "\"v1\"")
            bob.origin.enqueue(.text("forbidden", status: 403))
            await #expect(throws: NetworkError.self) { _ = try await bob.get("/report", "carol") }
            #expect(bob.origin.requests.count == 2)
            #expect(bob.origin.requests.last?.headers["Authorization"] == "Bearer carol")
        }
    }

    /// `public, max-age=600, s-maxage=5`: other credentials reuse it for 5 s, the fetcher for
    /// 600 s; and the other way round, the row stays for the longer `s-maxage` although it has no
    /// validator and its `max-age` is past.
    @Test func otherCredentialsReuseAnAnswerForItsSMaxAgeTheFetcherForItsMaxAge() async throws {
        try await withReplicas { alice, bob, now in
            alice.origin.enqueue(.text("short", headers: ["Cache-Control": "public, max-age=600, s-maxage=5"]))
            _ = try await alice.get("/short", "alice")
            now.advance(4.9)
            #expect(try await bob.get("/short", "bob") == "short" && bob.outcomes.last == .hit)
            now.advance(55.1)
            #expect(try await alice.get("/short", "alice") == "short" && alice.outcomes.last == .hit)
            bob.origin.enqueue(.text("short, again"))
            #expect(try await bob.get("/short", "bob") == "short, again" && bob.outcomes.last == .miss)

            alice.origin.enqueue(.text("long", headers: ["Cache-Control": "public, max-age=5, s-maxage=600"]))
            _ = try await alice.get("/long", "alice")
            now.advance(60)
            #expect(try await bob.get("/long", "bob") == "long" && bob.outcomes.last == .hit)
            #expect(try await bob.get("/long", nil) == "long" && bob.outcomes.last == .hit)
            alice.origin.enqueue(.text("long, again"))
            #expect(try await alice.get("/long", "alice") == "long, again" && alice.outcomes.last == .miss)
            #expect(alice.origin.requests.count == 3 && bob.origin.requests.count == 1)
        }
    }
}
