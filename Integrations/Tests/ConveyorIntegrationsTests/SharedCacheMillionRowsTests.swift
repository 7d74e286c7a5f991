import ConveyorTesting
import Foundation
import InMemoryLogging
import IntegrationsTestSupport
import Logging
import PostgresNIO
import Testing

@testable import ConveyorPostgres

extension FleetLoadTests {
/// The trim of `PostgresCacheStorage` on a table of 1,000,000 rows (filled with one `INSERT …
/// SELECT … generate_series`; the rows' entries are one byte, their `bytes` say 282, which is
/// what the trim reads): bounded batches whatever the table's size. A suite of its own for its
/// time limit: filling the table takes most of a minute on a busy 2-core machine.
@Suite(.timeLimit(.minutes(10))) struct SharedCacheMillionRowsTests {
    @Test func theTrimOfAMillionRowsRunsInBoundedBatches() async throws {
        let server = try await TestPostgres.shared()
        let database = PostgresClient(
            configuration: SharedCacheTests.configuration(server), backgroundLogger: SharedCacheTests.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let logs = InMemoryLogHandler()
        let clock = ManualClock()
        // The defaults: 256 MiB, 250 ms.
        let storage = try PostgresCacheStorage(
            client: database, table: SharedCacheTests.uniqueTable(), logger: Logger(label: "cache") { _ in logs },
            clock: clock)
        try await storage.prepare()
        let table = storage.names.table
        // 1,000,000 rows of 282 bytes: 282,000,000 bytes, 13,564,544 over the bound (48,102 rows);
        // the oldest rows are the ones with the highest `i`. 1,000 of them are past their use.
        try await database.query(
            """
            INSERT INTO \(unescaped: table) (key_hash, entry, bytes, expires_at, last_used)
            SELECT sha256(int4send(i)), '\\x00'::bytea, 282,
                CASE WHEN i % 1000 = 0 THEN now() - interval '1 minute' ELSE now() + interval '1 hour' END,
                now() - i * interval '1 millisecond'
            FROM generate_series(1, 1000000) AS i
            """)
        try await database.query("ANALYZE \(unescaped: table)")
        #expect(try await total(database, storage) == 282_000_000)

        // Each batch's plan: through indexes, bounded by the batch, whatever the table's size.
        for pass in PostgresCacheStorage.TrimPass.allCases {
            var plan: [String] = []
            let rows = try await database.query(storage.trimStatement(pass, now: Date(), explain: true))
            for try await line in rows.decode(String.self) { plan.append(line) }
            let text = plan.joined(separator: "\n")
            print("EXPLAIN of the trim's \(pass) batch at 1,000,000 rows:\n\(text)")
            let cost = try #require(Self.totalCost(plan.first ?? ""), "\(text)")
            #expect(cost < 10_000, "\(text)")
            #expect(!text.contains("Seq Scan on \(storage.table) ") && !text.contains("SubPlan"), "\(text)")
        }

        // The whole trim: every batch within the storage's 250 ms, set on the database (a batch
        // that ran longer would have thrown 57014).
        let started = ContinuousClock.now
        try await storage.trim()
        let took = ContinuousClock.now - started
        print("trim of 1,000,000 rows (48,102 deleted in batches of at most 1,000): \(took)")
        let (sum, count) = try await actual(database, table)
        #expect(sum <= Int64(storage.maxBytes) && sum > Int64(storage.maxBytes) - 282 * 1_000)
        #expect(try await total(database, storage) == sum)
        #expect(count < 1_000_000 - 48_000)
        #expect(logs.entries.isEmpty)
    }

    /// The first line of `EXPLAIN`: `… (cost=0.56..123.45 rows=…`: the total cost.
    static func totalCost(_ line: String) -> Double? {
        guard let range = line.range(of: "cost=") else { return nil }
        let rest = line[range.upperBound...]
        guard let dots = rest.range(of: "..") else { return nil }
        return Double(rest[dots.upperBound...].prefix { $0 == "." || $0.isNumber })
    }

    func total(_ database: PostgresClient, _ storage: PostgresCacheStorage) async throws -> Int64 {
        var total: Int64 = -1
        for try await value in try await database.query("SELECT total FROM \(unescaped: storage.names.total)").decode(
            Int64.self)
        {
            total = value
        }
        return total
    }

    func actual(_ database: PostgresClient, _ table: String) async throws -> (Int64, Int64) {
        var result: (Int64, Int64) = (-1, -1)
        let rows = try await database.query(
            "SELECT coalesce(sum(bytes), 0)::bigint, count(*)::bigint FROM \(unescaped: table)")
        for try await row in rows.decode((Int64, Int64).self) { result = row }
        return result
    }
}
}
