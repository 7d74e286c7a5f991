import Foundation
import IntegrationsTestSupport
import PostgresNIO
import Testing

/// The suites that load the shared PostgreSQL server and both cores (herds of 128 requests, 6,000
/// requests over four pools, a trim of a million rows, a partition whose bounds are measured in real time) run one test at
/// a time: run beside each other, the partition test's "every place free within 2 s" failed once
/// in CI while a herd, the fleet figure and the million-row trim ran with it.
@Suite(.serialized) enum FleetLoadTests {}

extension FleetLoadTests {
    /// `count` clients of the shared database, each running (as the instances of a fleet each have
    /// their own), and a table name of the test's own (`tablePrefix` and a UUID) for `body`.
    static func withDatabases<T: Sendable>(
        _ count: Int, tablePrefix: String, _ body: @Sendable ([PostgresClient], String) async throws -> T
    ) async throws -> T {
        let postgres = try await TestPostgres.shared()
        let databases = (0..<count).map { _ in
            PostgresClient(configuration: SharedCacheTests.configuration(postgres), backgroundLogger: SharedCacheTests.quiet)
        }
        return try await withThrowingTaskGroup(of: Void.self) { runners in
            for database in databases { runners.addTask { await database.run() } }
            defer { runners.cancelAll() }
            return try await body(databases, tablePrefix + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))
        }
    }
}
