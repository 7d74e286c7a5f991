public import Conveyor
import Crypto
public import Foundation
public import Logging
import NIOConcurrencyHelpers
public import PostgresNIO

/// One access token for a fleet: a ``Conveyor/TokenProvider`` and ``Conveyor/TokenRefresher`` for
/// ``Conveyor/AuthTokenBehavior`` that keeps the token in a PostgreSQL table every instance
/// shares, so that a token rejected with `401` is renewed by **one** instance and read by the
/// others, not renewed by each (client-credentials tokens are rate-limited, and at some providers
/// billed per issuance).
///
/// ```swift
/// let tokens = try PostgresTokenStore(
///     client: database, name: "weather-api", encryptionKey: try TokenEncryptionKey(secrets.tokenKey),
///     refresher: clientCredentials)   // your TokenRefresher: POST /token with the client's secret
/// let upstream = NetworkClient(baseURL: api, transport: transport) {
///     AuthTokenBehavior(tokens: tokens, refresher: tokens)
/// }
/// ```
///
/// What holds (Docs/Integrations.md, "One token for a fleet"):
/// - **One renewal per rejected token.** A renewal runs under a lease in the table (one statement
///   takes it); an instance whose token was rejected and finds another one in the table uses it
///   without renewing; one that finds the lease held waits for the new token, at most the lease.
/// - **Never without a token because of the fleet.** A holder that dies or hangs holds the others
///   at most its `lease`, after which the next one renews; a renewal that throws releases the lease
///   and the error reaches the requests that waited for it, as ``Conveyor/AuthTokenBehavior``
///   reports a refresher's; a database that does not answer within `timeout` makes each instance
///   renew for itself, as without the store. After such a failure the store leaves the database
///   alone for a cool-down of four times `timeout`, at least a second (each instance renews for
///   itself at once), and logs one warning, then one notice when the table answers again.
/// - **The token is never in clear in the table**: it is sealed with ChaCha20-Poly1305 under
///   `encryptionKey` (with the table and the token's name as associated data, so a sealed token
///   copied to another row does not open), and nothing of it reaches a log.
public final class PostgresTokenStore: TokenProvider, TokenRefresher {
    /// The table the tokens live in.
    public let table: String
    /// The token's name in the table (one row per name: a table may hold several APIs' tokens).
    public let name: String
    /// How long one instance may hold the renewal before another may take it.
    public let lease: Duration
    /// How long one call may wait on the database.
    public let timeout: Duration

    private let refresher: any TokenRefresher
    private let key: SymmetricKey
    private let logger: Logger
    private let clock: any Clock<Duration>
    private let quotedTable: String
    /// Every call to the database goes through it: each ends within `timeout`, a cool-down after
    /// a failure, and the table created on first use.
    private let calls: BoundedCalls
    private let state = NIOLockedValueBox(State())

    private struct State {
        var token: String?
    }

    /// How often an instance waiting for another's renewal looks for the new token.
    static let pollInterval: Duration = .milliseconds(25)

    /// Creates a store; nothing is sent until the first call.
    /// - Parameters:
    ///   - client: The database's client; run it for as long as the store is used.
    ///   - table: The table's name, created if missing; `conveyor_tokens` by default.
    ///   - name: The token's name (which API it is for).
    ///   - encryptionKey: The key the token is sealed with, the same on every instance.
    ///   - refresher: What obtains a new token (your call to the token endpoint).
    ///   - lease: How long one instance may renew before another may (about the token endpoint's
    ///     timeout); 10 s by default.
    ///   - timeout: How long one call may wait on the database; 250 ms by default. After a call
    ///     that failed or ran out of time, the store leaves the database alone for four times
    ///     `timeout`, at least a second.
    ///   - logger: Where the store's failures and recoveries are logged (never a token).
    ///   - clock: The clock waits, timeouts and the cool-down are measured on.
    ///   - now: Not read: a lease's times are the database's, so that an instance whose clock is
    ///     wrong cannot lengthen or shorten another's lease (kept for source compatibility).
    /// - Throws: ``PostgresCacheStorage/ConfigurationError/invalidTableName(_:)``.
    public init(
        client: PostgresClient, table: String = "conveyor_tokens", name: String, encryptionKey: TokenEncryptionKey,
        refresher: any TokenRefresher, lease: Duration = .seconds(10), timeout: Duration = .milliseconds(250),
        logger: Logger = Logger(label: "conveyor.tokens.postgres"), clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws(PostgresCacheStorage.ConfigurationError) {
        guard PostgresCacheStorage.isPlainName(table) else { throw .invalidTableName(table) }
        self.table = table
        self.name = name
        self.key = SymmetricKey(data: encryptionKey.bytes)
        self.refresher = refresher
        self.lease = lease
        self.timeout = timeout
        self.logger = logger
        self.clock = clock
        let quotedTable = PostgresCacheStorage.quoted(table)
        self.quotedTable = quotedTable
        let lockKey = PostgresCacheStorage.advisoryLockKey("tokens:" + table)
        calls = BoundedCalls(
            client: client, timeout: timeout, clock: clock, logger: logger,
            messages: .init(
                unavailable: "token table unavailable: each instance renews its own token for the cool-down",
                answersAgain: "token table answers again", namespace: "tokens", table: table),
            prepare: { connection in
                try await Self.prepare(on: connection, quotedTable: quotedTable, lockKey: lockKey, logger: logger)
            })
    }

    // MARK: - TokenProvider

    /// The token this instance last used, or the fleet's from the table on first use (`nil` when
    /// there is none yet: the first request's `401` renews it).
    public func currentToken() async throws -> String? {
        if let token = state.withLockedValue({ $0.token }) { return token }
        let stored = await read()?.token
        if let stored { state.withLockedValue { $0.token = stored } }
        return stored
    }

    // MARK: - TokenRefresher

    /// The fleet's token when it is no longer `expiredToken`; otherwise renews it, under the
    /// lease, or waits for the instance that holds the lease.
    public func refreshToken(replacing expiredToken: String?) async throws -> String {
        let deadline = clock.deadline(after: lease)
        while true {
            guard let row = await read() else {
                // The database does not answer: renew here, as without the store.
                return try await renewLocally(replacing: expiredToken)
            }
            if let token = row.token, token != expiredToken {
                state.withLockedValue { $0.token = token }
                return token
            }
            if row.leaseFree {
                switch await takeLease() {
                case .some(let holder):
                    return try await renew(holder: holder, replacing: expiredToken)
                case .none:
                    break  // another took it first: wait for its token
                }
            }
            guard !clock.hasPassed(deadline) else {
                // The holder outlived its lease on this clock: renew here.
                return try await renewLocally(replacing: expiredToken)
            }
            try await clock.sleep(for: Self.pollInterval)
        }
    }

    private func renew(holder: UUID, replacing expiredToken: String?) async throws -> String {
        let token: String
        do {
            token = try await refresher.refreshToken(replacing: expiredToken)
        } catch {
            await release(holder: holder, storing: nil)
            throw error
        }
        state.withLockedValue { $0.token = token }
        await release(holder: holder, storing: token)
        return token
    }

    private func renewLocally(replacing expiredToken: String?) async throws -> String {
        let token = try await refresher.refreshToken(replacing: expiredToken)
        state.withLockedValue { $0.token = token }
        return token
    }

    // MARK: - The table

    struct Row {
        var token: String?
        var leaseFree: Bool
    }

    /// The name's row: its token (opened) and whether its lease is free. `nil` when the database
    /// did not answer in time (or is cooling down after a failure).
    private func read() async -> Row? {
        let lease = PostgresCacheStorage.seconds(lease)
        let found: Row?? = await calls.run("read") { [self] (session: BoundedCalls.Session<Row?>) in
            let rows = try await session.connection.query(
                """
                SELECT sealed, lease_until IS NULL OR lease_until <= clock_timestamp()
                    OR lease_until > clock_timestamp() + make_interval(secs => \(lease))
                FROM \(unescaped: quotedTable)
                WHERE name = \(name)
                """, logger: logger)
            var row = Row(token: nil, leaseFree: true)
            for try await (sealed, free) in rows.decode((Data?, Bool).self) {
                row = Row(token: sealed.flatMap(open), leaseFree: free)
                if sealed != nil, row.token == nil {
                    logger.warning(
                        "the token in the table does not open with this instance's encryption key: renewing here",
                        metadata: ["tokens.table": "\(table)", "tokens.name": "\(name)"])
                }
            }
            return row
        }
        return found ?? nil
    }

    /// Takes the renewal lease when it is free (one statement); the holder's ID, or `nil`.
    private func takeLease() async -> UUID? {
        let holder = UUID()
        let lease = PostgresCacheStorage.seconds(lease)
        // The lease's times are the database's (`clock_timestamp()`): an instance whose clock is
        // wrong neither makes a lease last longer nor ends another's early.
        let taken: Bool? = await calls.run("lease") { [self] (session: BoundedCalls.Session<Bool>) in
            let rows = try await session.connection.query(
                """
                INSERT INTO \(unescaped: quotedTable) AS t (name, sealed, lease_holder, lease_until)
                VALUES (\(name), NULL, \(holder), clock_timestamp() + make_interval(secs => \(lease)))
                ON CONFLICT (name) DO UPDATE SET lease_holder = EXCLUDED.lease_holder, lease_until = EXCLUDED.lease_until
                WHERE t.lease_until IS NULL OR t.lease_until <= clock_timestamp()
                    OR t.lease_until > clock_timestamp() + make_interval(secs => \(lease))
                RETURNING true
                """, logger: logger)
            var taken = false
            for try await _ in rows.decode(Bool.self) { taken = true }
            return taken
        }
        return taken == true ? holder : nil
    }

    /// Ends the lease, storing the new token (sealed) when there is one.
    private func release(holder: UUID, storing token: String?) async {
        let sealed = token.flatMap(seal)
        _ = await calls.run("release") { [self] (session: BoundedCalls.Session<Void>) in
            let connection = session.connection
            if let sealed {
                try await connection.query(
                    """
                    UPDATE \(unescaped: quotedTable) SET sealed = \(sealed), lease_holder = NULL, lease_until = NULL
                    WHERE name = \(name) AND lease_holder = \(holder)
                    """, logger: logger)
            } else {
                try await connection.query(
                    """
                    UPDATE \(unescaped: quotedTable) SET lease_holder = NULL, lease_until = NULL
                    WHERE name = \(name) AND lease_holder = \(holder)
                    """, logger: logger)
            }
        }
    }

    /// The token sealed with ChaCha20-Poly1305; the table and the name are the associated data.
    private func seal(_ token: String) -> Data? {
        (try? ChaChaPoly.seal(Data(token.utf8), using: key, authenticating: associatedData))?.combined
    }

    private func open(_ sealed: Data) -> String? {
        guard let box = try? ChaChaPoly.SealedBox(combined: sealed),
            let plain = try? ChaChaPoly.open(box, using: key, authenticating: associatedData)
        else { return nil }
        return String(decoding: plain, as: UTF8.self)
    }

    private var associatedData: Data { Data("conveyor-token:\(table):\(name)".utf8) }

    /// Creates the table if it is missing (``BoundedCalls``'s `prepare`: it holds no store, only
    /// these values).
    private static func prepare(
        on connection: PostgresConnection, quotedTable: String, lockKey: Int64, logger: Logger
    ) async throws {
        // One process creates at a time: `CREATE … IF NOT EXISTS` run side by side can collide in
        // PostgreSQL's catalog (seen: instances starting together renewed for themselves).
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            try await connection.query(
                """
                CREATE UNLOGGED TABLE IF NOT EXISTS \(unescaped: quotedTable) (
                    name text PRIMARY KEY, sealed bytea, lease_holder uuid, lease_until timestamptz)
                """, logger: logger)
        }
    }
}

/// The key ``PostgresTokenStore`` seals the token with: 32 secret bytes, the same on every
/// instance.
public struct TokenEncryptionKey: Sendable {
    /// A key of another length than 32 bytes.
    public struct WrongLength: Error, CustomStringConvertible {
        /// How many bytes the key had.
        public let count: Int

        /// What is wrong, for logs (never the key).
        public var description: String {
            "the token encryption key has \(count) bytes: give exactly 32 secret bytes from your configuration"
        }
    }

    let bytes: [UInt8]

    /// A key from 32 secret bytes.
    /// - Parameter bytes: Exactly 32 bytes of a secret from your configuration.
    /// - Throws: ``WrongLength`` otherwise.
    public init(_ bytes: some Sequence<UInt8>) throws(WrongLength) {
        let bytes = Array(bytes)
        guard bytes.count == 32 else { throw WrongLength(count: bytes.count) }
        self.bytes = bytes
    }
}
