public import Conveyor
import Crypto
public import Foundation
public import Logging
import NIOConcurrencyHelpers
public import PostgresNIO

/// A ``Conveyor/CacheStorage`` in a PostgreSQL table, shared by every process that points at it:
/// what one replica of a service fetched answers the others, and a restart starts warm.
///
/// ```swift
/// let database = PostgresClient(configuration: configuration, backgroundLogger: logger)
/// let storage = try PostgresCacheStorage(client: database, maxBytes: 256 * 1024 * 1024, logger: logger)
/// let upstream = NetworkClient(baseURL: api, transport: transport) {
///     AuthTokenBehavior(tokens: tokens)
///     CacheBehavior(storage: storage)
/// }
/// // Run the PostgresClient (`database.run()`) for as long as the storage is used, in a
/// // ServiceGroup or a task of its own.
/// ```
///
/// What holds (Docs/Caching.md, "A cache shared by a fleet"):
/// - **The cache's rules are ``Conveyor/CacheBehavior``'s**: freshness, revalidation, `Vary`,
///   `no-store`, private answers only for the same credentials and unsafe methods removing entries
///   work across processes, since every process reads the one row of a URL.
/// - **No credential is stored.** A row holds the SHA-256 of the entry's key (the URL is not
///   stored), the entry as ``Conveyor/CachedResponse/encoded()`` writes it (credential headers
///   and `Set-Cookie` left out; the credentials of a private answer only as a SHA-256), its size
///   and two times.
/// - **Bounded.** An entry larger than `maxBytes` is not stored. Rows past their use (stale
///   without a validator, or stale for longer than `keepStale`) and the least recently used rows
///   beyond `maxBytes` are deleted by ``trim()``, which stores run after every tenth of
///   `maxBytes` they wrote (so each process can overshoot by a tenth before it trims).
/// - **A database that is down, slow or gone is a miss, never a failed or hung request.** Every
///   call ends within `timeout` (on `clock`): a lookup that did not answer is a miss, a store
///   that did not finish is dropped. After a failure the storage leaves the database alone for a
///   cool-down of four times `timeout`, at least a second (lookups miss at once), logs one warning per failure (not per
///   request) and one notice when the database answers again. At most 64 calls wait on the
///   database at once; more are misses at once.
/// - **Concurrent writers** of one key leave one whole entry: a store is one `INSERT … ON
///   CONFLICT DO UPDATE` of a single row, and a row that does not decode (damaged, or written by
///   another format version) is a miss and is deleted.
/// - **Every value is a bind parameter**; the table's name, the one identifier, must be a plain
///   lowercase SQL name (checked in `init`).
///
/// The table is created on first use (or by ``prepare()``) as `UNLOGGED`: PostgreSQL writes no
/// WAL for it, and empties it after a crash (a cache may forget) and does not copy it to
/// replicas.
public final class PostgresCacheStorage: CacheStorage {
    /// Why the storage could not be created.
    public enum ConfigurationError: Error, Hashable, CustomStringConvertible {
        /// The table name is not a lowercase SQL name (`a`–`z`, `0`–`9`, `_`, not starting with a
        /// digit, at most 63 bytes).
        case invalidTableName(String)

        /// What is wrong, for logs.
        public var description: String {
            switch self {
            case .invalidTableName(let name):
                "invalid table name \(name.debugDescription): use a-z, 0-9 and _, starting with a letter or _, up to 63 bytes"
            }
        }
    }

    /// The table the entries live in.
    public let table: String
    /// The most bytes the stored entries may take together (``trim()`` enforces it).
    public let maxBytes: Int
    /// How long one call may wait on the database before it counts as a miss.
    public let timeout: Duration

    private let client: PostgresClient
    private let keepStale: TimeInterval
    private let logger: Logger
    private let clock: any Clock<Duration>
    private let now: @Sendable () -> Date
    private let lockKey: Int64
    private let state = NIOLockedValueBox(State())

    /// The most calls that may wait on the database at once.
    static let maxWaiting = 64
    /// A hit refreshes the row's `last_used` (for eviction) only when it is older than this.
    static let touchInterval: TimeInterval = 60

    private struct State {
        var schemaReady = false
        var waiting = 0
        /// No call reaches the database before this instant of `clock` (after a failure).
        var coolingUntil: (any InstantProtocol)?
        var failing = false
        var bytesSinceTrim = 0
        var trimming = false
    }

    /// Creates a storage over a table of a database; nothing is sent until the first call.
    /// - Parameters:
    ///   - client: The database's client. Run it (`client.run()`) for as long as the storage is
    ///     used; until it runs, every call times out as a miss.
    ///   - table: The table's name, created if missing; `conveyor_http_cache` by default. Give
    ///     each cache its own table (see Docs/Caching.md for sizing and clearing it).
    ///   - maxBytes: The most bytes the entries may take together; 256 MiB by default.
    ///   - keepStale: How long a stale entry that can be revalidated is kept after it went stale;
    ///     a day by default. A stale entry without a validator is deleted at once.
    ///   - timeout: How long one call may wait on the database; 250 ms by default.
    ///   - logger: Where failures and recoveries of the database are logged (never a key, a URL
    ///     or a credential).
    ///   - clock: The clock `timeout` and the cool-down are measured on; injectable for tests.
    ///   - now: The current time, for expiry (the same clock as ``Conveyor/CacheBehavior``'s `now`).
    /// - Throws: ``ConfigurationError/invalidTableName(_:)``.
    public init(
        client: PostgresClient, table: String = "conveyor_http_cache", maxBytes: Int = 256 * 1024 * 1024,
        keepStale: Duration = .seconds(86_400), timeout: Duration = .milliseconds(250),
        logger: Logger = Logger(label: "conveyor.cache.postgres"),
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() }
    ) throws(ConfigurationError) {
        guard Self.isPlainName(table) else { throw .invalidTableName(table) }
        self.client = client
        self.table = table
        self.maxBytes = max(0, maxBytes)
        self.keepStale = max(0, Self.seconds(keepStale))
        self.timeout = timeout
        self.logger = logger
        self.clock = clock
        self.now = now
        lockKey = Self.advisoryLockKey(table)
    }

    // MARK: - CacheStorage

    /// The entry stored for a key, or `nil` (also when the database did not answer in time).
    public func entry(for key: String) async -> CachedResponse? {
        let hash = Self.hash(key)
        let now = now()
        let touchBefore = now.addingTimeInterval(-Self.touchInterval)
        let found: (Data, Bool)?? = await bounded("lookup") { [client, table] in
            let rows = try await client.query(
                """
                SELECT entry, last_used < \(touchBefore) FROM \(unescaped: Self.quoted(table))
                WHERE key_hash = \(hash) AND expires_at > \(now)
                """)
            for try await row in rows.decode((Data, Bool).self) { return row }
            return nil
        }
        guard case .some(.some((let data, let touch))) = found else { return nil }
        guard let entry = CachedResponse(encoded: data) else {
            // Damaged, or another format version: a miss, and gone.
            await removeEntry(for: key)
            return nil
        }
        if touch {
            _ = await bounded("touch") { [client, table] in
                try await client.query(
                    "UPDATE \(unescaped: Self.quoted(table)) SET last_used = \(now) WHERE key_hash = \(hash)")
            }
        }
        return entry
    }

    /// Stores an entry (one row per key, replaced whole); an entry larger than `maxBytes`, or
    /// already of no use, removes the key's row instead.
    public func store(_ entry: CachedResponse, for key: String) async {
        let now = now()
        let data = entry.encoded()
        let expires = expiry(of: entry)
        guard data.count <= maxBytes, expires > now else {
            await removeEntry(for: key)
            return
        }
        let hash = Self.hash(key)
        let size = data.count
        let stored: Void? = await bounded("store") { [client, table] in
            try await client.query(
                """
                INSERT INTO \(unescaped: Self.quoted(table)) (key_hash, entry, bytes, expires_at, last_used)
                VALUES (\(hash), \(data), \(size), \(expires), \(now))
                ON CONFLICT (key_hash) DO UPDATE SET entry = EXCLUDED.entry, bytes = EXCLUDED.bytes,
                    expires_at = EXCLUDED.expires_at, last_used = EXCLUDED.last_used
                """)
        }
        guard stored != nil else { return }
        let due: Bool = state.withLockedValue { state in
            state.bytesSinceTrim += size
            guard state.bytesSinceTrim >= max(1, maxBytes / 10), !state.trimming else { return false }
            state.trimming = true
            return true
        }
        if due {
            await trimNow()
            state.withLockedValue {
                $0.trimming = false
                $0.bytesSinceTrim = 0
            }
        }
    }

    /// Removes the key's row, if any.
    public func removeEntry(for key: String) async {
        let hash = Self.hash(key)
        _ = await bounded("remove") { [client, table] in
            try await client.query("DELETE FROM \(unescaped: Self.quoted(table)) WHERE key_hash = \(hash)")
        }
    }

    /// Removes every row of the table (for every process that shares it).
    public func removeAll() async {
        _ = await bounded("remove all") { [client, table] in
            try await client.query("DELETE FROM \(unescaped: Self.quoted(table))")
        }
    }

    // MARK: - Schema and upkeep

    /// Creates the table and its indexes if they are missing (a call on first use does the same).
    /// Call it at startup to find a wrong configuration early; unlike the storage's other calls it
    /// throws, and it is not bounded by `timeout`.
    /// - Throws: The database's error.
    public func prepare() async throws {
        let table = Self.quoted(self.table)
        let indexPrefix = self.table
        let lockKey = lockKey
        // One process creates at a time: `CREATE … IF NOT EXISTS` run side by side can still
        // collide in PostgreSQL's catalog.
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            try await connection.query(
                """
                CREATE UNLOGGED TABLE IF NOT EXISTS \(unescaped: table) (
                    key_hash bytea PRIMARY KEY,
                    entry bytea NOT NULL,
                    bytes integer NOT NULL,
                    expires_at timestamptz NOT NULL,
                    last_used timestamptz NOT NULL)
                """, logger: logger)
            try await connection.query(
                "CREATE INDEX IF NOT EXISTS \(unescaped: Self.quoted(indexPrefix + "_last_used")) ON \(unescaped: table) (last_used)",
                logger: logger)
            try await connection.query(
                "CREATE INDEX IF NOT EXISTS \(unescaped: Self.quoted(indexPrefix + "_expires_at")) ON \(unescaped: table) (expires_at)",
                logger: logger)
        }
        state.withLockedValue { $0.schemaReady = true }
    }

    /// Deletes the rows past their use and then the least recently used ones until the rest fit
    /// in `maxBytes`. Stores run it as they go; call it to trim now (after lowering `maxBytes`,
    /// say). One process trims a table at a time; a call while another trims returns at once.
    /// - Throws: The database's error.
    public func trim() async throws {
        try await prepareIfNeeded()
        let now = now()
        let limit = Int64(maxBytes)
        // One statement: the advisory lock (held to its end) keeps two processes' deletes from
        // deadlocking on the same rows; the running sum walks from the most recently used row.
        try await client.query(
            """
            WITH turn AS (SELECT pg_try_advisory_xact_lock(\(lockKey)) AS mine),
            ranked AS (
                SELECT key_hash, sum(bytes) OVER (ORDER BY last_used DESC, key_hash) AS running
                FROM \(unescaped: Self.quoted(table)) WHERE expires_at > \(now))
            DELETE FROM \(unescaped: Self.quoted(table)) AS t USING turn
            WHERE turn.mine AND (t.expires_at <= \(now)
                OR t.key_hash IN (SELECT key_hash FROM ranked WHERE running > \(limit)))
            """, logger: logger)
    }

    private func trimNow() async {
        _ = await bounded("trim") { try await self.trim() }
    }

    private func prepareIfNeeded() async throws {
        guard !state.withLockedValue({ $0.schemaReady }) else { return }
        try await prepare()
    }

    /// When the row stops being of use: when the entry goes stale if it cannot be revalidated,
    /// `keepStale` later if it can.
    private func expiry(of entry: CachedResponse) -> Date {
        let staleAt = entry.freshUntil == .distantPast ? now() : entry.freshUntil
        return entry.hasValidator ? staleAt.addingTimeInterval(keepStale) : entry.freshUntil
    }

    // MARK: - Bounded calls

    /// Runs `operation` against the database within `timeout`: its value, or `nil` when the
    /// database failed, did not answer in time, is cooling down after a failure, or already has
    /// ``maxWaiting`` calls waiting (a call that timed out keeps its place until the database
    /// lets it go). Never throws, never waits longer than `timeout`.
    private func bounded<T: Sendable>(
        _ operation: String, _ body: @escaping @Sendable () async throws -> T
    ) async -> T? {
        let admitted: Bool = state.withLockedValue { state in
            if let until = state.coolingUntil {
                guard clock.hasPassed(until) else { return false }
                state.coolingUntil = nil
            }
            guard state.waiting < Self.maxWaiting else { return false }
            state.waiting += 1
            return true
        }
        guard admitted else { return nil }
        let race = Race<T>()
        let work = Task {
            do {
                try await self.prepareIfNeeded()
                race.finish(.value(try await body()))
            } catch {
                race.finish(.failed(error))
            }
            self.state.withLockedValue { $0.waiting -= 1 }
        }
        let timer = Task { [clock, timeout] in
            try? await clock.sleep(for: timeout)
            race.finish(.timedOut)
        }
        let outcome = await withTaskCancellationHandler {
            await race.outcome()
        } onCancel: {
            race.finish(.cancelled)
        }
        timer.cancel()
        switch outcome {
        case .value(let value):
            work.cancel()
            recovered()
            return value
        case .failed(let error):
            failed(operation, reason: Self.describe(error))
        case .timedOut:
            work.cancel()
            failed(operation, reason: "no answer within \(timeout)")
        case .cancelled:
            work.cancel()
        }
        return nil
    }

    /// After a failure the database is left alone for this long: four timeouts, at least a second.
    var cooldown: Duration { max(timeout * 4, .seconds(1)) }

    private func failed(_ operation: String, reason: String) {
        let cooldown = cooldown
        // Calls that were waiting when the database went away fail together: one line for them.
        let first: Bool = state.withLockedValue { state in
            defer {
                state.coolingUntil = clock.deadline(after: cooldown)
                state.failing = true
            }
            return state.coolingUntil == nil
        }
        guard first else { return }
        logger.warning(
            "HTTP cache database unavailable: every lookup is a miss and nothing is stored for the cool-down",
            metadata: [
                "cache.table": "\(table)", "cache.operation": "\(operation)", "cache.reason": "\(reason)",
                "cache.cooldown": "\(cooldown)",
            ])
    }

    private func recovered() {
        let wasFailing = state.withLockedValue { state in
            defer { state.failing = false }
            return state.failing
        }
        if wasFailing { logger.notice("HTTP cache database answers again", metadata: ["cache.table": "\(table)"]) }
    }

    /// What an error says, without anything of the query: PostgresNIO's errors describe only
    /// their kind (details need `String(reflecting:)`, which is never used here).
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            var text = "PostgreSQL: \(error.code)"
            if let state = error.serverInfo?[.sqlState] { text += " (SQLSTATE \(state))" }
            return text
        }
        return "\(type(of: error))"
    }

    // MARK: - Names and keys

    /// The row's key: SHA-256 of the cache key (the URL never reaches the table).
    static func hash(_ key: String) -> Data { Data(SHA256.hash(data: Data(key.utf8))) }

    static func isPlainName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 63, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first)
        else { return false }
        return bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_")
        }
    }

    /// A checked plain name, quoted as an identifier.
    static func quoted(_ name: String) -> String { "\"\(name)\"" }

    /// The advisory lock that serializes schema creation and trims of one table, from its name.
    static func advisoryLockKey(_ table: String) -> Int64 {
        let digest = SHA256.hash(data: Data(("conveyor-http-cache:" + table).utf8))
        return digest.prefix(8).reduce(Int64(0)) { ($0 << 8) | Int64($1) }
    }

    static func seconds(_ duration: Duration) -> TimeInterval {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension Clock {
    fileprivate func deadline(after duration: Duration) -> any InstantProtocol where Duration == Swift.Duration {
        now.advanced(by: duration)
    }

    fileprivate func hasPassed(_ instant: any InstantProtocol) -> Bool where Duration == Swift.Duration {
        guard let instant = instant as? Instant else { return true }
        return now >= instant
    }
}

/// The first of a call's endings (its value or error, the timeout, the caller's cancellation),
/// delivered once to the one waiter.
private final class Race<T: Sendable>: Sendable {
    enum Outcome: Sendable {
        case value(T)
        case failed(any Error)
        case timedOut
        case cancelled
    }

    private struct State {
        var outcome: Outcome?
        var waiter: CheckedContinuation<Outcome, Never>?
    }

    private let state = NIOLockedValueBox(State())

    func finish(_ outcome: Outcome) {
        let waiter: CheckedContinuation<Outcome, Never>? = state.withLockedValue { state in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }

    func outcome() async -> Outcome {
        await withCheckedContinuation { continuation in
            let ready: Outcome? = state.withLockedValue { state in
                if let outcome = state.outcome { return outcome }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
