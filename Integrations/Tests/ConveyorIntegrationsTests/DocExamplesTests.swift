import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorLogging
import ConveyorMetrics
import ConveyorPostgres
import ConveyorTracing
import CoreMetrics
import Foundation
import Logging
import PostgresNIO
import Testing
import Tracing

// Every Swift block of Docs/Integrations.md marked "compiled by its DocExamplesTests" is copied
// below, as written, into a function that the compiler checks (the functions are never run: they
// would contact api.example.com). The test checks that the copies and the document agree, so an
// example that stops compiling, or a document edited without its copy, fails the suite.

struct Movie: Decodable, Sendable {
    let id: Int
    let title: String
}

enum DocExamples {
    static func asyncHTTPClientTransport() async throws {
        let http = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: AsyncHTTPClientTransport.configuration())
        let client = NetworkClient(
            baseURL: URL(string: "https://api.example.com")!,
            transport: try AsyncHTTPClientTransport(client: http)
        ) {
            RetryBehavior()
        }
        let movies: [Movie] = try await client.get("/movies")
        // After the last request, at shutdown:
        try await http.shutdown()
        _ = movies
    }

    static func swiftLogSink() throws {
        var logger = Logger(label: "com.example.api")
        logger.logLevel = .debug
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())
        let client = NetworkClient(
            baseURL: URL(string: "https://api.example.com")!,
            transport: try AsyncHTTPClientTransport(client: http)
        ) {
            LoggingBehavior(sink: SwiftLogSink(logger: logger, metadata: ["component": "api-client"]))
            RequestLoggerBehavior(logger: logger)   // AsyncHTTPClient's own lines carry the request's id
        }
        _ = client
    }

    static func metricsBehavior() {
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!) {
            RetryBehavior()
            MetricsBehavior(sink: SwiftMetricsSink())   // last: it times what goes to the network
        }
        _ = client
    }

    static func resilienceMetrics() {
        let resilience = ResilienceMetrics()   // MetricsSystem's factory, bootstrapped by your app
        let breaker = CircuitBreaker(onChange: resilience.circuitChanged)
        let limiter = ConcurrencyLimiter(onChange: resilience.limitChanged)
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!) {
            ResilienceMetricsBehavior(resilience)        // budget refusals, pacing, hedges: per request
            RetryBehavior()
            HedgingBehavior()
            MetricsBehavior(sink: SwiftMetricsSink())   // a refused attempt: error.type circuitOpen or rateLimited
            ConcurrencyLimitBehavior(limiter)
            CircuitBreakerBehavior(breaker)
        }
        _ = client
    }

    struct AttemptTimer: MetricsSink {
        func record(_ metrics: AttemptMetrics) {
            let (seconds, attoseconds) = metrics.duration.components
            CoreMetrics.Timer(label: "http.client.attempt.duration", dimensions: [("status", "\(metrics.status ?? 0)")])
                .recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        }
    }

    static func tracingBehavior() async throws {
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!) {
            RetryBehavior()
            TracingBehavior()     // InstrumentationSystem.tracer, bootstrapped by your app
        }
        try await withSpan("load dashboard") { _ in
            let movies: [Movie] = try await client.get("/movies")
            print(movies.count)
        }
    }
}

func upstreamClient(http: HTTPClient, session: some TokenProvider & TokenRefresher, logger: Logger) throws -> NetworkClient {
    NetworkClient(
        baseURL: URL(string: "https://weather.example.com")!,
        transport: try AsyncHTTPClientTransport(client: http)
    ) {
        RetryBehavior()                                      // 503 with Retry-After, timeouts, lost connections
        AuthTokenBehavior(tokens: session, refresher: session)  // a 401 refreshes once and resends
        CacheBehavior()                                      // fresh answers from memory
        DeduplicationBehavior()                              // identical GETs in flight share one call
        TracingBehavior()                                    // a client span per attempt that goes out
        MetricsBehavior(sink: SwiftMetricsSink())            // http.client.request.duration per attempt
        RequestLoggerBehavior(logger: logger)                // AsyncHTTPClient logs with the request's id
        LoggingBehavior(sink: SwiftLogSink(logger: logger))  // last: logs each attempt as sent
    }
}

// The Swift block of Docs/Integrations.md, "One token for a fleet", as written.
enum TokenStoreGuideExamples {
    func fleetUpstream(
        database: PostgresClient, transport: AsyncHTTPClientTransport, secret: [UInt8], signIn: any TokenRefresher
    ) throws -> NetworkClient {
        // secret: 32 bytes from the configuration, the same on every instance; signIn: your call to
        // the token endpoint (POST /token with the client's credentials).
        let tokens = try PostgresTokenStore(
            client: database, name: "weather-api", encryptionKey: try TokenEncryptionKey(secret), refresher: signIn)
        return NetworkClient(baseURL: URL(string: "https://weather.example.com")!, transport: transport) {
            AuthTokenBehavior(tokens: tokens, refresher: tokens)
        }
    }
}

// The Swift block of Docs/Integrations.md, "One quota for a fleet", as written.
enum QuotaGuideExamples {
    func partnerClient(database: PostgresClient, transport: AsyncHTTPClientTransport) throws -> NetworkClient {
        // Every instance: the same table, the same name, the same quota.
        let ledger = try PostgresRateLimitLedger(client: database, name: "partner-api")
        let quota = RateLimiter(sharedQuota: .init(100, per: .seconds(60)), ledger: ledger)
        return NetworkClient(baseURL: URL(string: "https://partner.example.com")!, transport: transport) {
            RetryBehavior()
            RateLimitBehavior(quota)
        }
    }
}

@Suite struct DocExamplesTests {
    static let marker = "compiled by its DocExamplesTests"

    /// The blocks of `document` marked with ``marker``, each as its lines without indentation.
    static func markedBlocks(of document: String) -> [[String]] {
        var blocks: [[String]] = []
        var lines = document.split(separator: "\n", omittingEmptySubsequences: false).makeIterator()
        while let line = lines.next() {
            guard line.contains(marker), lines.next()?.hasPrefix("```swift") == true else { continue }
            var block: [String] = []
            while let inner = lines.next(), !inner.hasPrefix("```") { block.append(inner.trimmingCharacters(in: .whitespaces)) }
            blocks.append(block)
        }
        return blocks
    }

    @Test(arguments: [
        ("Docs/Integrations.md", "DocExamplesTests.swift", 9), ("Docs/OpenAPI.md", "OpenAPIGuideExamples.swift", 5),
        ("Docs/Caching.md", "CachingGuideExamples.swift", 1),
    ])
    func everyExampleOfTheGuideIsCompiledHere(guide path: String, copies: String, count: Int) throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let guide = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        let compiled = try String(
            contentsOf: here.deletingLastPathComponent().appendingPathComponent(copies), encoding: .utf8
        )
        .split(separator: "\n", omittingEmptySubsequences: false)
        .map { $0.trimmingCharacters(in: .whitespaces) }
        let blocks = Self.markedBlocks(of: guide)
        #expect(blocks.count == count)
        for block in blocks {
            let found = compiled.indices.contains { start in
                start + block.count <= compiled.count && Array(compiled[start..<start + block.count]) == block
            }
            #expect(found, "this example of \(path) is not compiled in \(copies):\n\(block.joined(separator: "\n"))")
        }
    }
}
