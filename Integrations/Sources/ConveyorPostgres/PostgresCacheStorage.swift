public import Conveyor
import Crypto
public import Foundation
public import Logging
import NIOConcurrencyHelpers
public import PostgresNIO

/// The secret under which ``PostgresCacheStorage`` writes identities (HMAC-SHA256): at least 16
/// bytes, the same for every process that shares a table.
///
/// ```swift
/// let key = try CacheIdentityKey(Array(configuration.cacheIdentitySecret.utf8))
/// ```
public struct CacheIdentityKey: Sendable {
    /// A key shorter than 16 bytes: too few to keep a guessed credential from being confirmed.
    public struct TooShort: Error, CustomStringConvertible {
        /// How many bytes the key had.
        public let count: Int

        /// What is wrong, for logs (never the key).
        public var description: String {
            "the cache identity key has \(count) bytes: give at least 16 secret bytes from your configuration"
        }
    }

    let bytes: [UInt8]

    /// A key from secret bytes.
    /// - Parameter bytes: At least 16 bytes of a secret from your configuration.
    /// - Throws: ``TooShort`` for fewer than 16.
    public init(_ bytes: some Sequence<UInt8>) throws(TooShort) {
        let bytes = Array(bytes)
        guard bytes.count >= 16 else { throw TooShort(count: bytes.count) }
        self.bytes = bytes
    }
}

/// A ``Conveyor/CacheStorage`` in a PostgreSQL table, shared by every process that points at it:
/// what one replica of a service fetched answers the others, and a restart starts warm.
///
/// ```swift
/// let database = PostgresClient(configuration: configuration, backgroundLogger: logger)
/// let storage = try PostgresCacheStorage(
///     client: database, maxBytes: 256 * 1024 * 1024, logger: logger,
///     identityKey: try CacheIdentityKey(secrets.cacheIdentityKey))
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
/// - **No credential is stored, nor anything that confirms a guessed one.** A row holds the
///   SHA-256 of the entry's key and of its URL's key (the URL is not stored), the entry as
///   ``Conveyor/CachedResponse/encoded()`` writes it (credential headers and `Set-Cookie` left
///   out), its size and two times. With an `identityKey`, private answers are kept per identity
///   (a row per variant) and identities only as an HMAC-SHA256 under the key; without one, no
///   private answer is stored and no digest at all.
/// - **Bounded.** An entry larger than `maxBytes` is not stored. Rows past their use (stale
///   without a validator, or stale for longer than `keepStale`) and the least recently used rows
///   beyond `maxBytes` are deleted by ``trim()``, which stores run after every tenth of
///   `maxBytes` they wrote (so each process can overshoot by a tenth before it trims). The trim
///   compares a running total of the rows' sizes (kept by triggers) with `maxBytes` and deletes
///   in batches of at most 1,000 rows found through an index, each ended by the database itself
///   (`statement_timeout`, `lock_timeout`) at its bound: its cost does not grow with the table.
/// - **A database that is down, slow or gone is a miss, never a failed or hung request.** Every
///   call ends within `timeout` (on `clock`), its follow-up statements included (a hit's refresh
///   of `last_used`, a store's trim): a lookup that did not answer is a miss, a store that did
///   not finish is dropped. A call that runs out of time closes its connection, so a database
///   that never answers (a network partition) holds no place after the timeout. After a failure
///   the storage leaves the database alone for a cool-down of four times `timeout`, at least a
///   second (lookups miss at once), logs one warning per failure (not per request) and one
///   notice when the database answers again. At most 64 calls wait on the database at once;
///   more are misses at once.
/// - **Concurrent writers** of one key leave one whole entry: a store is one `INSERT … ON
///   CONFLICT DO UPDATE` of a single row, and a row that does not decode (damaged, or written by
///   another format version) is a miss and is deleted.
/// - **Every value is a bind parameter**; the table's name, the one identifier, must be a plain
///   lowercase SQL name (checked in `init`).
///
/// The table is created on first use (or by ``prepare()``) as `UNLOGGED`: PostgreSQL writes no
/// WAL for it, and empties it after a crash (a cache may forget) and does not copy it to
/// replicas.
public final class PostgresCacheStorage: CacheStorage, CacheFillCoordinating {
    /// Why the storage could not be created.
    public enum ConfigurationError: Error, Hashable, CustomStringConvertible {
        /// The table name is not a lowercase SQL name (`a`–`z`, `0`–`9`, `_`, not starting with a
        /// digit, at most 63 bytes, PostgreSQL's limit).
        case invalidTableName(String)

        /// What is wrong, for logs (never the key).
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
    /// How long a process may hold the turn to fetch a missing or stale answer while the others
    /// wait; `.zero` turns coordination off.
    public let fillLease: Duration

    private let client: PostgresClient
    private let keepStale: TimeInterval
    private let logger: Logger
    private let clock: any Clock<Duration>
    private let now: @Sendable () -> Date
    private let lockKey: Int64
    /// How credentials are written into the rows: keyed with `identityKey`, or not at all.
    public let credentialDigest: CacheCredentialDigest
    /// The table's name and the names derived from it, quoted.
    let names: Names
    /// Every call to the database goes through it: each ends within `timeout`, a cool-down after
    /// a failure, and the schema prepared on first use.
    private let calls: BoundedCalls
    private let state = NIOLockedValueBox(State())

    /// The most calls that may wait on the database at once (``BoundedCalls/maxWaiting``).
    static let maxWaiting = BoundedCalls.maxWaiting
    /// The most calls that ran out of time and may be still ending; at this many, calls are
    /// misses at once (``BoundedCalls/maxAbandoned``).
    static let maxAbandoned = BoundedCalls.maxAbandoned
    /// A hit refreshes the row's `last_used` (for eviction) only when it is older than this.
    static let touchInterval: TimeInterval = 60

    private struct State {
        var bytesSinceTrim = 0
        var trimming = false
        /// The waiters for another process's fill, by the URL's hash: one poll per URL.
        var fillWaiters: [Data: [UUID: CheckedContinuation<Void, Never>]] = [:]
    }

    /// How often a process waiting for another's fill asks whether it has ended.
    static let fillPollInterval: Duration = .milliseconds(25)
    /// How long after a private answer a URL's fills are not coordinated (other identities could
    /// not use what the next filler stores, so they should not wait for it).
    static let privateFillHint: TimeInterval = 300

    /// Creates a storage over a table of a database, without an identity key: no private answer
    /// is stored (nothing in the table could confirm a guessed credential), and an answer any
    /// credentials may use is stored without who fetched it. Nothing is sent until the first call.
    /// - Parameters:
    ///   - client: The database's client. Run it (`client.run()`) for as long as the storage is
    ///     used; until it runs, every call times out as a miss.
    ///   - table: The table's name, created if missing; `conveyor_http_cache` by default.
    ///   - maxBytes: The most bytes the entries may take together; 256 MiB by default.
    ///   - keepStale: How long a stale entry that can be revalidated is kept after it went stale.
    ///   - timeout: How long one call may wait on the database; 250 ms by default.
    ///   - logger: Where failures and recoveries of the database are logged.
    ///   - clock: The clock `timeout` and the cool-down are measured on.
    ///   - now: The current time, for expiry.
    /// - Throws: ``ConfigurationError/invalidTableName(_:)``.
    public convenience init(
        client: PostgresClient, table: String = "conveyor_http_cache", maxBytes: Int = 256 * 1024 * 1024,
        keepStale: Duration = .seconds(86_400), timeout: Duration = .milliseconds(250),
        logger: Logger = Logger(label: "conveyor.cache.postgres"),
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() }
    ) throws(ConfigurationError) {
        try self.init(
            client: client, table: table, maxBytes: maxBytes, keepStale: keepStale, timeout: timeout, logger: logger,
            clock: clock, now: now, identityKey: nil, fillLease: .seconds(5))
    }

    /// Creates a storage over a table of a database; nothing is sent until the first call.
    ///
    /// With an `identityKey`, private answers are kept per identity (a user's answer never
    /// replaces another's), and every credential or account is written as an HMAC-SHA256 under
    /// the key: a reader of the table without the key cannot confirm a guessed credential.
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
    ///   - identityKey: A secret from the configuration, the same for every
    ///     process that shares the table (processes with different keys never match each other's
    ///     private answers), or `nil` to store no private answer at all.
    ///   - fillLease: How long one process may hold the turn to fetch a missing or stale answer
    ///     while the others wait for it (5 s by default; about the upstream's timeout); `.zero`
    ///     lets every process fetch for itself.
    /// - Throws: ``ConfigurationError/invalidTableName(_:)``.
    public init(
        client: PostgresClient, table: String = "conveyor_http_cache", maxBytes: Int = 256 * 1024 * 1024,
        keepStale: Duration = .seconds(86_400), timeout: Duration = .milliseconds(250),
        logger: Logger = Logger(label: "conveyor.cache.postgres"),
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() },
        identityKey: CacheIdentityKey?, fillLease: Duration = .seconds(5)
    ) throws(ConfigurationError) {
        guard Self.isPlainName(table) else { throw .invalidTableName(table) }
        credentialDigest = identityKey.map { .keyed($0.bytes) } ?? .none
        self.client = client
        self.table = table
        self.maxBytes = max(0, maxBytes)
        self.keepStale = max(0, Self.seconds(keepStale))
        self.timeout = timeout
        self.fillLease = max(.zero, fillLease)
        self.logger = logger
        self.clock = clock
        self.now = now
        let lockKey = Self.advisoryLockKey(table)
        let names = Names(table: table)
        self.lockKey = lockKey
        self.names = names
        calls = BoundedCalls(
            client: client, timeout: timeout, clock: clock, logger: logger,
            messages: .init(
                unavailable:
                    "HTTP cache database unavailable: every lookup is a miss and nothing is stored for the cool-down",
                answersAgain: "HTTP cache database answers again", namespace: "cache", table: table),
            prepare: { connection in
                try await Self.prepare(on: connection, names: names, lockKey: lockKey, logger: logger)
            })
    }

    // MARK: - CacheStorage

    /// The entry stored for a key, or `nil` (also when the database did not answer in time). For
    /// a variant key, the variant's entry or, when it has none, the URL's: one statement.
    public func entry(for key: String) async -> CachedResponse? {
        let own = Self.hash(key)
        let url = Self.urlKey(of: key).map(Self.hash) ?? own
        let now = now()
        let touchBefore = now.addingTimeInterval(-Self.touchInterval)
        let found: CachedResponse?? = await calls.run("lookup") { [logger, names] (session: Session<CachedResponse?>) in
            let rows = try await session.connection.query(
                """
                SELECT entry, last_used < \(touchBefore), key_hash FROM \(unescaped: names.table)
                WHERE key_hash IN (\(own), \(url)) AND expires_at > \(now)
                ORDER BY key_hash = \(own) DESC LIMIT 1
                """, logger: logger)
            var found: (Data, Bool, Data)?
            for try await row in rows.decode((Data, Bool, Data).self) { found = row }
            guard let (data, touch, hash) = found else { return nil }
            guard let entry = CachedResponse(encoded: data) else {
                // Damaged, or another format version: a miss, and gone.
                try await session.connection.query(
                    "DELETE FROM \(unescaped: names.table) WHERE key_hash = \(hash)", logger: logger)
                return nil
            }
            if touch {
                // The entry is the answer even if the refresh of `last_used` runs out of time.
                session.keep(entry)
                try await session.connection.query(
                    "UPDATE \(unescaped: names.table) SET last_used = \(now) WHERE key_hash = \(hash)", logger: logger)
            }
            return entry
        }
        return found ?? nil
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
        let url = Self.urlKey(of: key).map(Self.hash) ?? hash
        let size = data.count
        _ = await calls.run("store") { [logger, names] (session: Session<Void>) in
            try await session.connection.query(
                """
                INSERT INTO \(unescaped: names.table) (key_hash, entry, bytes, expires_at, last_used, url_hash)
                VALUES (\(hash), \(data), \(size), \(expires), \(now), \(url))
                ON CONFLICT (key_hash) DO UPDATE SET entry = EXCLUDED.entry, bytes = EXCLUDED.bytes,
                    expires_at = EXCLUDED.expires_at, last_used = EXCLUDED.last_used, url_hash = EXCLUDED.url_hash
                """, logger: logger)
            // The trim, when due, runs in what is left of the store's time.
            let due: Bool = self.state.withLockedValue { state in
                state.bytesSinceTrim += size
                guard state.bytesSinceTrim >= max(1, self.maxBytes / 10), !state.trimming else { return false }
                state.trimming = true
                return true
            }
            guard due else { return }
            var finished = false
            defer {
                // An unfinished trim stays due: the next store goes on with it.
                self.state.withLockedValue { state in
                    state.trimming = false
                    if finished { state.bytesSinceTrim = 0 }
                }
            }
            finished = try await self.trimBatches(on: session.connection, remaining: session.remaining)
        }
    }

    /// Removes the key's row, if any.
    public func removeEntry(for key: String) async {
        let hash = Self.hash(key)
        _ = await calls.run("remove") { [logger, names] (session: Session<Void>) in
            try await session.connection.query(
                "DELETE FROM \(unescaped: names.table) WHERE key_hash = \(hash)", logger: logger)
        }
    }

    /// Keeps a private answer per identity, in a row of its own: `true`.
    public var keepsVariants: Bool { true }

    /// Removes the row of a URL's key and the rows of all its variants, in one statement (rows
    /// written before 1.2 have no `url_hash`: theirs is their `key_hash`).
    public func removeVariants(of key: String) async {
        let hash = Self.hash(key)
        _ = await calls.run("remove") { [logger, names] (session: Session<Void>) in
            try await session.connection.query(
                "DELETE FROM \(unescaped: names.table) WHERE key_hash = \(hash) OR url_hash = \(hash)", logger: logger)
        }
    }

    // MARK: - One fill across the fleet

    /// Takes the URL's lease when no live one exists (one statement: an insert, or an update of
    /// an expired lease), and otherwise says whether to wait for its holder or, after a private
    /// answer, to fetch at once. A database that does not answer in time: fetch.
    public func beginFill(of key: String) async -> CacheFillTurn {
        guard fillLease > .zero else { return .fetch }
        let hash = Self.hash(key)
        let holder = UUID()
        let lease = Self.seconds(fillLease)
        let hint = Self.privateFillHint
        // The lease's times are the database's (`clock_timestamp()`): an instance whose clock is
        // wrong neither makes a lease last longer nor ends another's early. A lease (or private
        // hint) that ends further ahead than this instance would ever write one was not written by
        // it or a peer with the same lease (a row written by hand: `infinity`), and counts as ended.
        let turn: CacheFillTurn? = await calls.run("fill") { [logger, names] (session: Session<CacheFillTurn>) in
            let rows = try await session.connection.query(
                """
                WITH taken AS (
                    INSERT INTO \(unescaped: names.fill) AS f (key_hash, holder, until, private)
                    VALUES (\(hash), \(holder), clock_timestamp() + make_interval(secs => \(lease)), false)
                    ON CONFLICT (key_hash) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until, private = false
                    WHERE f.until <= clock_timestamp()
                        OR f.until > clock_timestamp() + make_interval(secs => CASE WHEN f.private THEN \(hint) ELSE \(lease) END)
                    RETURNING true)
                SELECT true, false FROM taken
                UNION ALL
                SELECT false, private FROM \(unescaped: names.fill)
                WHERE key_hash = \(hash) AND NOT EXISTS (SELECT 1 FROM taken)
                """, logger: logger)
            // No row at all: the insert met a row another transaction committed after this
            // statement's snapshot was taken (the SELECT cannot see it): someone else's lease.
            var turn = CacheFillTurn.wait
            for try await (mine, isPrivate) in rows.decode((Bool, Bool).self) {
                turn = mine ? .fill(CacheFillLease(key: key, holder: holder)) : isPrivate ? .fetch : .wait
            }
            return turn
        }
        return turn ?? .fetch
    }

    /// Ends the lease: removes it, or after a private answer keeps it as a hint that the URL
    /// answers privately, so its next fills are not waited for (``privateFillHint``).
    public func endFill(_ lease: CacheFillLease, stored: CacheFillResult) async {
        let hash = Self.hash(lease.key)
        let holder = lease.holder
        let hint = Self.privateFillHint
        _ = await calls.run("fill end") { [logger, names] (session: Session<Void>) in
            if stored == .privateAnswer {
                try await session.connection.query(
                    """
                    UPDATE \(unescaped: names.fill) SET until = clock_timestamp() + make_interval(secs => \(hint)), private = true
                    WHERE key_hash = \(hash) AND holder = \(holder)
                    """, logger: logger)
            } else {
                try await session.connection.query(
                    "DELETE FROM \(unescaped: names.fill) WHERE key_hash = \(hash) AND holder = \(holder)",
                    logger: logger)
            }
        }
    }

    /// Waits until the URL's lease has ended (released, expired, or turned into a private hint),
    /// at most ``fillLease`` on `clock`, or until the caller is cancelled. The waiters of one URL
    /// in this process share one poll of the database every 25 ms; a poll the database does not
    /// answer ends the wait.
    public func waitForFill(of key: String) async {
        guard fillLease > .zero else { return }
        let hash = Self.hash(key)
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let first: Bool = state.withLockedValue { state in
                    let first = state.fillWaiters[hash] == nil
                    state.fillWaiters[hash, default: [:]][id] = continuation
                    return first
                }
                if Task.isCancelled { resumeWaiter(id, of: hash) }
                if first { Task { await self.pollFill(hash) } }
            }
        } onCancel: {
            resumeWaiter(id, of: hash)
        }
    }

    private func resumeWaiter(_ id: UUID, of hash: Data) {
        let waiter = state.withLockedValue { state in state.fillWaiters[hash]?.removeValue(forKey: id) }
        waiter?.resume()
    }

    /// Polls the URL's lease until it has ended or ``fillLease`` has passed, then resumes every
    /// waiter of the URL.
    private func pollFill(_ hash: Data) async {
        let deadline = clock.deadline(after: fillLease)
        let lease = Self.seconds(fillLease)
        while !clock.hasPassed(deadline) {
            let live: Bool? = await calls.run("fill wait") { [logger, names] (session: Session<Bool>) in
                let rows = try await session.connection.query(
                    """
                    SELECT until > clock_timestamp() AND until <= clock_timestamp() + make_interval(secs => \(lease))
                        AND NOT private
                    FROM \(unescaped: names.fill) WHERE key_hash = \(hash)
                    """, logger: logger)
                var live = false
                for try await value in rows.decode(Bool.self) { live = value }
                return live
            }
            guard live == true else { break }
            let stillWaited = state.withLockedValue { $0.fillWaiters[hash]?.isEmpty == false }
            guard stillWaited else { break }
            try? await clock.sleep(for: min(Self.fillPollInterval, clock.remaining(until: deadline)))
        }
        let waiters = state.withLockedValue { state in state.fillWaiters.removeValue(forKey: hash) ?? [:] }
        for waiter in waiters.values { waiter.resume() }
    }

    /// Removes every row of the table (for every process that shares it).
    public func removeAll() async {
        _ = await calls.run("remove all") { [logger, names] (session: Session<Void>) in
            try await session.connection.withTransaction(logger: logger) { connection in
                try await Self.limit(connection, to: session.remaining() * 3 / 4, logger: logger)
                try await connection.query("DELETE FROM \(unescaped: names.table)", logger: logger)
            }
        }
    }

    // MARK: - Schema and upkeep

    /// Creates the table, its indexes and its running total if they are missing (a call on first
    /// use does the same). Call it at startup to find a wrong configuration early; unlike the
    /// storage's other calls it throws, and it is not bounded by `timeout`.
    /// - Throws: The database's error.
    public func prepare() async throws {
        try await client.withConnection { connection in
            try await self.calls.prepare(on: connection)
        }
    }

    /// Creates what is missing of the schema of `names` (``BoundedCalls``'s `prepare`: it holds
    /// no storage, only these values).
    private static func prepare(
        on connection: PostgresConnection, names: Names, lockKey: Int64, logger: Logger
    ) async throws {
        // One process creates at a time: `CREATE … IF NOT EXISTS` run side by side can still
        // collide in PostgreSQL's catalog.
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            for statement in names.schema {
                try await connection.query(statement, logger: logger)
            }
            // A table of an earlier version has no `url_hash` (the URL a variant's row belongs
            // to): added once. Looked up first, since `ALTER TABLE` locks the table even when it
            // has nothing to do.
            let columns = try await connection.query(
                """
                SELECT count(*)::bigint FROM pg_attribute
                WHERE attrelid = \(names.table)::regclass AND attname = 'url_hash' AND NOT attisdropped
                """, logger: logger)
            var hasURLHash: Int64 = 0
            for try await count in columns.decode(Int64.self) { hasURLHash = count }
            if hasURLHash == 0 { try await connection.query(names.addURLHash, logger: logger) }
            try await connection.query(names.urlHashIndexSchema, logger: logger)
            // The running total of `bytes` (what the trim compares with `maxBytes`, without
            // summing the table) is kept by triggers; they are created, and the total counted
            // once, when they are missing (a table of an older version, or created by hand).
            let present = try await connection.query(
                """
                SELECT count(*)::bigint FROM pg_trigger
                WHERE tgrelid = \(names.table)::regclass AND tgname LIKE 'conveyor_total_%'
                """, logger: logger)
            var triggers: Int64 = 0
            for try await count in present.decode(Int64.self) { triggers = count }
            guard triggers < 4 else { return }
            for statement in names.totalSchema {
                try await connection.query(statement, logger: logger)
            }
        }
    }

    /// Deletes the rows past their use and then the least recently used ones until the rest fit
    /// in `maxBytes`, in batches of at most 1,000 rows, each a statement of its own that the
    /// database ends after `timeout` (`statement_timeout` and `lock_timeout`). Stores run it as
    /// they go, within their own `timeout`; call it to trim now (after lowering `maxBytes`, say).
    /// One process trims a table at a time; a call while another trims returns at once.
    /// - Throws: The database's error (a batch that ran out of time: SQLSTATE 57014 or 55P03).
    public func trim() async throws {
        try await client.withConnection { connection in
            try await self.calls.prepareIfNeeded(on: connection)
            _ = try await self.trimBatches(on: connection, remaining: nil)
        }
    }

    /// The most rows one statement of the trim deletes.
    static let trimBatchRows = 1_000

    enum TrimPass: CaseIterable {
        /// Rows past their use, oldest expiry first.
        case expired
        /// The least recently used rows, while the total is over `maxBytes`.
        case leastRecentlyUsed
    }

    /// Runs the trim's batches on one connection.
    /// - Parameter remaining: The time left of the call that runs the trim; `nil` for ``trim()``.
    /// - Returns: Whether the trim finished; `false` when the call's time ran short first.
    private func trimBatches(on connection: PostgresConnection, remaining: (@Sendable () -> Duration)?) async throws
        -> Bool
    {
        let now = now()
        for pass in TrimPass.allCases {
            while true {
                var limit = timeout
                if let remaining {
                    // Start a batch only with an eighth of the timeout left, and let the database
                    // end it a quarter before the call's deadline (time for its COMMIT).
                    let left = remaining()
                    guard left > timeout / 8 else { return false }
                    limit = left * 3 / 4
                }
                let deleted: Int64
                do {
                    deleted = try await connection.withTransaction(logger: logger) { connection in
                        try await Self.limit(connection, to: limit, logger: self.logger)
                        var deleted: Int64 = 0
                        let rows = try await connection.query(self.trimStatement(pass, now: now), logger: self.logger)
                        for try await count in rows.decode(Int64.self) { deleted = count }
                        return deleted
                    }
                } catch let error as PSQLError where remaining != nil && Self.ranOutOfTime(error) {
                    // The database ended the batch at the call's bound: the next store goes on.
                    return false
                }
                if deleted < Self.trimBatchRows { break }
            }
        }
        // Fill leases that ended without being released (a filler that died) and private hints
        // that ran out: at most a batch, in what is left of the call's time.
        if let remaining, remaining() <= timeout / 8 { return true }
        try await connection.query(
            """
            DELETE FROM \(unescaped: names.fill) WHERE key_hash IN (
                SELECT key_hash FROM \(unescaped: names.fill)
                WHERE until < clock_timestamp()
                    OR until > clock_timestamp() + make_interval(secs => \(max(Self.seconds(fillLease), Self.privateFillHint)))
                LIMIT \(Self.trimBatchRows))
            """, logger: logger)
        return true
    }

    /// One batch of a trim's pass: at most ``trimBatchRows`` rows found through an index, deleted
    /// by their primary key; the advisory lock (held to the end of the batch's transaction)
    /// keeps two processes' trims from waiting on each other's rows. Returns the count deleted.
    /// - Parameter explain: Prefix the statement with `EXPLAIN` (for the tests).
    func trimStatement(_ pass: TrimPass, now: Date, explain: Bool = false) -> PostgresQuery {
        let prefix = explain ? "EXPLAIN " : ""
        let rows = Self.trimBatchRows
        switch pass {
        case .expired:
            return """
                \(unescaped: prefix)WITH turn AS (SELECT pg_try_advisory_xact_lock(\(lockKey)) AS mine),
                doomed AS (
                    SELECT key_hash FROM \(unescaped: names.table) WHERE expires_at <= \(now)
                    ORDER BY expires_at LIMIT \(rows)),
                gone AS (
                    DELETE FROM \(unescaped: names.table)
                    WHERE key_hash = ANY (ARRAY(SELECT doomed.key_hash FROM doomed, turn WHERE turn.mine))
                    RETURNING 1)
                SELECT count(*)::bigint FROM gone
                """
        case .leastRecentlyUsed:
            // The oldest rows, as many of them (of at most `rows`) as it takes to bring the
            // running total under the bound.
            return """
                \(unescaped: prefix)WITH turn AS (SELECT pg_try_advisory_xact_lock(\(lockKey)) AS mine),
                over AS (SELECT coalesce(sum(total), 0) - \(Int64(maxBytes)) AS bytes FROM \(unescaped: names.total)),
                oldest AS (
                    SELECT key_hash, sum(bytes) OVER (ORDER BY last_used, key_hash) - bytes AS before
                    FROM (SELECT key_hash, bytes, last_used FROM \(unescaped: names.table)
                        ORDER BY last_used LIMIT \(rows)) AS candidates),
                gone AS (
                    DELETE FROM \(unescaped: names.table)
                    WHERE key_hash = ANY (ARRAY(
                        SELECT oldest.key_hash FROM oldest, over, turn WHERE turn.mine AND oldest.before < over.bytes))
                    RETURNING 1)
                SELECT count(*)::bigint FROM gone
                """
        }
    }

    /// Sets the transaction's `statement_timeout` and `lock_timeout` on the database: what runs
    /// in it is ended by the database itself after `limit`, whatever happens to the connection.
    private static func limit(_ connection: PostgresConnection, to limit: Duration, logger: Logger) async throws {
        let milliseconds = String(max(1, Int64(seconds(limit) * 1_000)))
        try await connection.query(
            "SELECT set_config('statement_timeout', \(milliseconds), true), set_config('lock_timeout', \(milliseconds), true)",
            logger: logger)
    }

    /// The database ended a statement at its `statement_timeout` or `lock_timeout`.
    private static func ranOutOfTime(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return state == "57014" || state == "55P03"
    }

    /// When the row stops being of use: when the entry goes stale if it cannot be revalidated,
    /// `keepStale` later if it can.
    private func expiry(of entry: CachedResponse) -> Date {
        let staleAt = entry.freshUntil == .distantPast ? now() : entry.freshUntil
        return entry.hasValidator ? staleAt.addingTimeInterval(keepStale) : entry.freshUntil
    }

    // MARK: - Bounded calls

    /// What a call's body gets (``BoundedCalls/Session``).
    typealias Session<T: Sendable> = BoundedCalls.Session<T>

    /// How many calls wait on the database now, and how many ran out of time and have not ended
    /// (for the tests: a call that ran out of time must end at once, its place free).
    var load: (waiting: Int, abandoned: Int) { calls.load }

    /// After a failure the database is left alone for this long: four timeouts, at least a second.
    var cooldown: Duration { calls.cooldown }

    // MARK: - Names and keys

    /// The row's key: SHA-256 of the cache key (the URL never reaches the table).
    static func hash(_ key: String) -> Data { Data(SHA256.hash(data: Data(key.utf8))) }

    /// The URL's key of a variant key (what comes before its line feed); `nil` for a URL's key.
    static func urlKey(of key: String) -> String? {
        guard let end = key.utf8.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        return String(key[..<end])
    }

    static func isPlainName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 63, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first)
        else { return false }
        return bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
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

    /// A duration in seconds (the one conversion of the Postgres products: the cache, the token
    /// store and the quota ledger bind it into their statements).
    static func seconds(_ duration: Duration) -> TimeInterval {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension PostgresCacheStorage {
    /// The identifiers of a storage: its table, the table's indexes, the running total of its
    /// rows' sizes and the function and triggers that keep it. PostgreSQL cuts identifiers at 63
    /// bytes; a derived name that would not fit is the table's name cut short, an 8-digit hash of
    /// the whole name and the suffix, so the names of one table never collide.
    struct Names: Sendable {
        /// Quoted.
        let table: String
        let lastUsedIndex: String
        let expiresAtIndex: String
        let urlHashIndex: String
        /// The table of fill leases (one row per URL being fetched, or answering privately).
        let fill: String
        /// The table of one row holding the sum of `bytes`.
        let total: String
        /// The trigger function that keeps `total`.
        let function: String

        init(table name: String) {
            table = PostgresCacheStorage.quoted(name)
            lastUsedIndex = PostgresCacheStorage.quoted(Self.derived(name, "_last_used"))
            expiresAtIndex = PostgresCacheStorage.quoted(Self.derived(name, "_expires_at"))
            urlHashIndex = PostgresCacheStorage.quoted(Self.derived(name, "_url_hash"))
            fill = PostgresCacheStorage.quoted(Self.derived(name, "_fill"))
            total = PostgresCacheStorage.quoted(Self.derived(name, "_total"))
            function = PostgresCacheStorage.quoted(Self.derived(name, "_total_update"))
        }

        /// `name + suffix` when it fits in 63 bytes, else `name` cut short + `_` + 8 hex digits of
        /// its SHA-256 + `suffix` (`name` is ASCII: checked by `init`).
        static func derived(_ name: String, _ suffix: String) -> String {
            guard name.utf8.count + suffix.utf8.count > 63 else { return name + suffix }
            let digest = SHA256.hash(data: Data(name.utf8)).prefix(4).map { String(format: "%02x", $0) }.joined()
            return String(name.prefix(63 - suffix.utf8.count - 9)) + "_" + digest + suffix
        }

        /// The table and its indexes (`CREATE … IF NOT EXISTS`).
        var schema: [PostgresQuery] {
            [
                """
                CREATE UNLOGGED TABLE IF NOT EXISTS \(unescaped: table) (
                    key_hash bytea PRIMARY KEY,
                    entry bytea NOT NULL,
                    bytes integer NOT NULL,
                    expires_at timestamptz NOT NULL,
                    last_used timestamptz NOT NULL,
                    url_hash bytea)
                """,
                "CREATE INDEX IF NOT EXISTS \(unescaped: lastUsedIndex) ON \(unescaped: table) (last_used)",
                "CREATE INDEX IF NOT EXISTS \(unescaped: expiresAtIndex) ON \(unescaped: table) (expires_at)",
                """
                CREATE UNLOGGED TABLE IF NOT EXISTS \(unescaped: fill) (
                    key_hash bytea PRIMARY KEY, holder uuid NOT NULL, until timestamptz NOT NULL,
                    private boolean NOT NULL DEFAULT false)
                """,
                """
                CREATE UNLOGGED TABLE IF NOT EXISTS \(unescaped: total) (
                    one boolean PRIMARY KEY DEFAULT true CHECK (one), total bigint NOT NULL)
                """,
            ]
        }

        /// What a table of an earlier version lacks: the column naming the URL a row belongs to
        /// (a variant's row).
        var addURLHash: PostgresQuery { "ALTER TABLE \(unescaped: table) ADD COLUMN IF NOT EXISTS url_hash bytea" }

        /// The index removing a URL's variants reads (after the column exists).
        var urlHashIndexSchema: PostgresQuery {
            "CREATE INDEX IF NOT EXISTS \(unescaped: urlHashIndex) ON \(unescaped: table) (url_hash)"
        }

        /// The running total: a function, four statement triggers (each statement adds what it
        /// changed, from its transition tables: one update of the total per statement, not per
        /// row) and the total counted once. Run when the triggers are missing.
        var totalSchema: [PostgresQuery] {
            let add = { (amount: String) in
                "INSERT INTO \(total) AS t VALUES (true, \(amount)) ON CONFLICT (one) DO UPDATE SET total = t.total + EXCLUDED.total;"
            }
            let function: PostgresQuery = """
                CREATE OR REPLACE FUNCTION \(unescaped: self.function)() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF TG_OP = 'INSERT' THEN
                        \(unescaped: add("(SELECT coalesce(sum(bytes), 0) FROM new_rows)"))
                    ELSIF TG_OP = 'UPDATE' THEN
                        \(unescaped: add("(SELECT coalesce(sum(bytes), 0) FROM new_rows) - (SELECT coalesce(sum(bytes), 0) FROM old_rows)"))
                    ELSIF TG_OP = 'DELETE' THEN
                        \(unescaped: add("-(SELECT coalesce(sum(bytes), 0) FROM old_rows)"))
                    ELSE
                        DELETE FROM \(unescaped: total);
                    END IF;
                    RETURN NULL;
                END $$
                """
            var statements = [function]
            let triggers = [
                ("insert", "INSERT", "REFERENCING NEW TABLE AS new_rows"),
                ("update", "UPDATE", "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"),
                ("delete", "DELETE", "REFERENCING OLD TABLE AS old_rows"), ("truncate", "TRUNCATE", ""),
            ]
            for (name, event, transition) in triggers {
                statements.append("DROP TRIGGER IF EXISTS conveyor_total_\(unescaped: name) ON \(unescaped: table)")
                statements.append(
                    """
                    CREATE TRIGGER conveyor_total_\(unescaped: name) AFTER \(unescaped: event) ON \(unescaped: table)
                    \(unescaped: transition) FOR EACH STATEMENT EXECUTE FUNCTION \(unescaped: self.function)()
                    """)
            }
            statements.append(
                """
                INSERT INTO \(unescaped: total) SELECT true, coalesce(sum(bytes), 0) FROM \(unescaped: table)
                ON CONFLICT (one) DO UPDATE SET total = EXCLUDED.total
                """)
            return statements
        }
    }
}
