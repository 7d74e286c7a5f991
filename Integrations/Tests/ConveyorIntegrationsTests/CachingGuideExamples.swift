import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorPostgres
import Foundation
import Logging
import PostgresNIO

// The Swift blocks of Docs/Caching.md marked "compiled by its DocExamplesTests", copied as
// written (DocExamplesTests checks that they agree). Never run: they name weather.example.com.
// SharedCacheTests runs the same code against a real PostgreSQL.
enum CachingGuideExamples {
    func sharedUpstream(
        database: PostgresClient, transport: AsyncHTTPClientTransport, identityKey: CacheIdentityKey, logger: Logger
    ) throws -> NetworkClient {
        // Run the PostgresClient for as long as the client is used: in the service group, or `database.run()`.
        // identityKey: `try CacheIdentityKey(secret)`, 16 bytes or more, the same on every instance.
        let storage = try PostgresCacheStorage(
            client: database, maxBytes: 256 * 1024 * 1024, logger: logger, identityKey: identityKey)
        return NetworkClient(baseURL: URL(string: "https://weather.example.com")!, transport: transport) {
            CacheBehavior(storage: storage)
        }
    }
}
