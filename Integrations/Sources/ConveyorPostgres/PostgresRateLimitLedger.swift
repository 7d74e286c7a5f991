public import Conveyor
import Foundation
public import Logging
public import PostgresNIO

/// One quota for a fleet: a ``Conveyor/RateLimitLedger`` in a PostgreSQL table, so that every
/// instance's ``Conveyor/RateLimiter`` made with it sends, together with the others, at most the
/// quota in any period (GitHub's 5,000 requests an hour per token, a partner's 100 a minute).
///
/// ```swift
/// let ledger = try PostgresRateLimitLedger(client: database, name: "partner-api")
/// let partner = NetworkClient(baseURL: api, transport: transport) {
///     RetryBehavior()
///     RateLimitBehavior(RateLimiter(sharedQuota: .init(100, per: .seconds(60)), ledger: ledger))
/// }
/// ```
///
/// What holds (Docs/Resilience.md, "One quota for a fleet"):
/// - **Never more than the quota.** An instance takes a *grant* of several sends in one call (a
///   function of the table's, under a lock of the quota's own, so grants made at the same moment
///   never add up past it) and spends them locally, within ``grantValidity``; a grant counts
///   against the quota, on the database's clock, from the moment it is made until `period +`
///   ``grantValidity`` later. So in any period the fleet's sends are at most the quota, whatever
///   window the upstream counts in; no instance's own clock is read for it.
/// - **The database is not on every request's path.** A grant holds up to an eighth of the
///   quota; an instance asks again when it has spent it (see ``Conveyor/RateLimiter``).
/// - **An instance that dies** leaves its grant counted until it ages out (`period +`
///   ``grantValidity``); the others are held to what remains until then, never past the quota.
/// - **A database that does not answer** within `timeout` makes every attempt that needs a grant
///   fail at once with ``Conveyor/NetworkError/rateLimited`` (or, with the limiter's
///   `fallbackQuota`, held to that share alone) for the cool-down, then the database is asked
///   again.
/// - **The table** holds the quota's name, the origin, and each grant's time and size: no
///   request, no credential.
public final class PostgresRateLimitLedger: RateLimitLedger {
    /// The table the grants live in.
    public let table: String
    /// The quota's name: the instances that give the same name (and table) share one quota per
    /// origin; give another name for another quota to the same origin (another token's).
    public let name: String
    /// The longest a grant's sends may be made after it is asked for (1 s by default), and at
    /// most a twentieth of the quota's period: the margin the quota keeps (a grant counts for
    /// `period + grantValidity`), so a busy fleet keeps about 95 % of it in use.
    public let grantValidity: Duration
    /// How long one call may wait on the database.
    public var timeout: Duration { calls.timeout }

    private let calls: BoundedCalls
    private let client: PostgresClient
    private let logger: Logger
    private let quotedTable: String
    private let function: String

    /// Creates a ledger; nothing is sent until the first grant.
    /// - Parameters:
    ///   - client: The database's client; run it for as long as the ledger is used.
    ///   - table: The table's name, created if missing (with its function); `conveyor_quota` by
    ///     default. A logged table: a database that restarts keeps its grants.
    ///   - name: The quota's name.
    ///   - grantValidity: The longest a grant's sends may be made after it is asked for (clamped
    ///     to 1 ms … 1 min; a twentieth of the quota's period at most).
    ///   - timeout: How long one call may wait on the database; 250 ms by default.
    ///   - logger: Where the database's failures and recoveries are logged.
    ///   - clock: The clock `timeout` and the cool-down are measured on.
    /// - Throws: ``PostgresCacheStorage/ConfigurationError/invalidTableName(_:)``.
    public init(
        client: PostgresClient, table: String = "conveyor_quota", name: String,
        grantValidity: Duration = .seconds(1), timeout: Duration = .milliseconds(250),
        logger: Logger = Logger(label: "conveyor.quota.postgres"), clock: any Clock<Duration> = ContinuousClock()
    ) throws(PostgresCacheStorage.ConfigurationError) {
        guard PostgresCacheStorage.isPlainName(table) else { throw .invalidTableName(table) }
        self.table = table
        self.name = name
        self.grantValidity = min(max(grantValidity, .milliseconds(1)), .seconds(60))
        let quotedTable = PostgresCacheStorage.quoted(table)
        let function = PostgresCacheStorage.quoted(PostgresCacheStorage.Names.derived(table, "_grant"))
        let index = PostgresCacheStorage.quoted(PostgresCacheStorage.Names.derived(table, "_granted_at"))
        let ageIndex = PostgresCacheStorage.quoted(PostgresCacheStorage.Names.derived(table, "_age"))
        self.quotedTable = quotedTable
        self.function = function
        self.client = client
        self.logger = logger
        calls = BoundedCalls(
            client: client, timeout: timeout, clock: clock, logger: logger,
            messages: .init(
                unavailable:
                    "quota database unavailable: attempts that need a grant are refused (or held to the fallback quota) for the cool-down",
                answersAgain: "quota database answers again", namespace: "quota", table: table),
            prepare: { connection in
                try await Self.prepare(
                    connection, table: table, quotedTable: quotedTable, function: function, indexes: (index, ageIndex),
                    logger: logger)
            })
    }

    /// Creates the table and its function if they are missing (the first grant does the same).
    /// Call it at startup to find a wrong configuration early; it throws, and is not bounded by
    /// `timeout`.
    /// - Throws: The database's error.
    public func prepare() async throws {
        try await client.withConnection { connection in try await self.calls.prepare(on: connection) }
    }

    // MARK: - RateLimitLedger

    /// Grants up to `wanted` sends of `quota` for `key` (the origin), in one call: what leaves the
    /// sends granted in the last `period + validity` at or under the quota.
    public func grant(_ wanted: Int, of quota: RateLimiter.Quota, for key: String) async -> RateLimitGrant {
        let validity = min(grantValidity, quota.period / 20)
        let window = PostgresCacheStorage.seconds(quota.period + validity)
        let id = UUID()
        let query: PostgresQuery = """
            SELECT granted, retry_after FROM \(unescaped: function)(\(name), \(key), \(Int64(max(1, wanted))), \
            \(Int64(quota.requests)), \(window), \(id))
            """
        let answer: (Int64, Double)? = await calls.run("grant") {
            [logger] (session: BoundedCalls.Session<(Int64, Double)>) in
            let rows = try await session.connection.query(query, logger: logger)
            var answer: (Int64, Double) = (0, 0)
            for try await row in rows.decode((Int64, Double).self) { answer = row }
            return answer
        }
        guard let (granted, retryAfter) = answer else { return .unavailable(retryAfter: calls.cooldown) }
        guard granted > 0 else {
            // What the table says, within what a grant can last (a row edited by hand could say
            // `infinity`, which no conversion to an integer survives).
            let seconds = retryAfter.isFinite ? min(max(retryAfter, 0), Self.longestWindow) : Self.longestWindow
            return .exhausted(retryAfter: .milliseconds(Int64((seconds * 1_000).rounded(.up))))
        }
        return RateLimitGrant(permits: Int(granted), validFor: validity, id: id.uuidString)
    }

    /// Subtracts the `unused` sends from the grant's row (nothing when it has aged out already).
    public func giveBack(_ unused: Int, of grant: RateLimitGrant, for key: String) async {
        guard unused > 0, let id = UUID(uuidString: grant.id) else { return }
        let query: PostgresQuery = """
            UPDATE \(unescaped: quotedTable) SET sends = sends - \(Int64(unused))
            WHERE name = \(name) AND origin = \(key) AND id = \(id) AND sends >= \(Int64(unused))
            """
        _ = await calls.run("give back") { [logger] (session: BoundedCalls.Session<Void>) in
            try await session.connection.query(query, logger: logger)
        }
    }

    // MARK: - Schema

    /// The table, its index and the function that makes a grant. The function takes a lock of the
    /// quota's own (an advisory lock on the table, name and origin, held to the end of the call's
    /// transaction), so every statement after it sees the grants made before; it deletes the
    /// grants that aged out, sums the rest, and grants what leaves the sum at or under the quota,
    /// or answers how long until the oldest ages out. Rows dated further in the future than a clock
    /// stepped back could explain are deleted (no grant is made in the future). It also deletes up
    /// to 100 rows of any quota
    /// older than any quota's period and validity can be (a day and a minute), so the quotas no one
    /// asks for any more leave nothing behind: the table holds at most a day's grants.
    private static func prepare(
        _ connection: PostgresConnection, table: String, quotedTable: String, function: String,
        indexes: (key: String, age: String), logger: Logger
    ) async throws {
        let lockKey = PostgresCacheStorage.advisoryLockKey("quota:" + table)
        let lockPrefix = "conveyor-quota:\(table):"
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS \(unescaped: quotedTable) (
                    name text NOT NULL, origin text NOT NULL, id uuid NOT NULL,
                    granted_at timestamptz NOT NULL, sends bigint NOT NULL,
                    PRIMARY KEY (name, origin, id))
                """, logger: logger)
            try await connection.query(
                "CREATE INDEX IF NOT EXISTS \(unescaped: indexes.key) ON \(unescaped: quotedTable) (name, origin, granted_at)",
                logger: logger)
            try await connection.query(
                "CREATE INDEX IF NOT EXISTS \(unescaped: indexes.age) ON \(unescaped: quotedTable) (granted_at)",
                logger: logger)
            try await connection.query(
                """
                CREATE OR REPLACE FUNCTION \(unescaped: function)(
                    p_name text, p_origin text, p_wanted bigint, p_quota bigint, p_window double precision, p_id uuid)
                RETURNS TABLE (granted bigint, retry_after double precision) LANGUAGE plpgsql AS $$
                DECLARE
                    t_now timestamptz;
                    t_used bigint;
                    t_oldest timestamptz;
                    t_window interval := make_interval(secs => p_window);
                BEGIN
                    PERFORM pg_advisory_xact_lock(hashtextextended('\(unescaped: lockPrefix)' || p_name || ' ' || p_origin, 0));
                    t_now := clock_timestamp();
                    DELETE FROM \(unescaped: quotedTable) q
                        WHERE q.name = p_name AND q.origin = p_origin AND q.granted_at <= t_now - t_window;
                    DELETE FROM \(unescaped: quotedTable) q WHERE q.ctid = ANY (ARRAY(
                        SELECT o.ctid FROM \(unescaped: quotedTable) o
                        WHERE o.granted_at < t_now - interval '1 day 1 minute' LIMIT 100));
                    -- No grant is made in the future: a row there beyond what a clock stepped back
                    -- could explain (a day and a minute; `infinity`) was written by hand, and counts
                    -- for nothing.
                    DELETE FROM \(unescaped: quotedTable) q
                        WHERE q.name = p_name AND q.origin = p_origin AND q.granted_at > t_now + interval '1 day 1 minute';
                    SELECT coalesce(sum(greatest(q.sends, 0)), 0), min(q.granted_at) INTO t_used, t_oldest
                        FROM \(unescaped: quotedTable) q WHERE q.name = p_name AND q.origin = p_origin;
                    IF t_used >= p_quota THEN
                        RETURN QUERY SELECT 0::bigint,
                            extract(epoch FROM least(t_oldest, t_now + interval '1 day 1 minute') + t_window - t_now)::double precision;
                        RETURN;
                    END IF;
                    INSERT INTO \(unescaped: quotedTable) (name, origin, id, granted_at, sends)
                        VALUES (p_name, p_origin, p_id, t_now, least(p_wanted, p_quota - t_used));
                    RETURN QUERY SELECT least(p_wanted, p_quota - t_used), 0::double precision;
                END $$
                """, logger: logger)
        }
    }

    /// The longest a grant counts, in seconds: the longest period (a day) and validity (a minute).
    static let longestWindow: Double = 86_460
}
