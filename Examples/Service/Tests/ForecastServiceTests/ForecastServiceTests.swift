import Conveyor
import ConveyorMetrics
import ConveyorTesting
import ForecastService
import Foundation
import Hummingbird
import HummingbirdTesting
import InMemoryLogging
import InMemoryTracing
import Logging
import MetricsTestKit
import ServiceLifecycle
import ServiceTestSupport
import Testing
import Tracing

/// The service against a real upstream on 127.0.0.1, both run by the test; retry waits on a
/// clock that does not wait.
struct Harness {
    let logs = InMemoryLogHandler()
    let tracer = InMemoryTracer()
    let metrics = TestMetrics()

    var logger: Logger {
        var logger = Logger(label: "forecast-service") { [logs] _ in logs }
        logger.logLevel = .trace
        return logger
    }

    /// The upstream's quota the service is given (`requests/seconds`), if any.
    var upstreamQuota: String? = nil
    /// Where the service's identical upstream GETs in flight share one call.
    let deduplication = DeduplicationBehavior()

    func configuration(upstream: URL, cacheDatabase: URL? = nil) -> ServiceConfiguration {
        ServiceConfiguration(
            port: 0,
            upstream: UpstreamConfiguration(
                baseURL: upstream, clientID: "forecast-service", clientSecret: UpstreamState.secret),
            // Generous: the first call also connects and creates the table, beside other test suites.
            cacheDatabase: cacheDatabase, cacheDatabaseTimeout: .seconds(10),
            cacheIdentityKey: "forecast-tests-identity-key",
            tokenEncryptionKey: cacheDatabase == nil ? nil : "forecast-tests-token-key-32bytes",
            upstreamQuota: upstreamQuota)
    }

    func application(
        upstream: URL, cacheDatabase: URL? = nil, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> some ApplicationProtocol {
        try buildApplication(
            configuration(upstream: upstream, cacheDatabase: cacheDatabase), logger: logger, tracer: tracer,
            metrics: SwiftMetricsSink(factory: metrics), clock: ImmediateClock(), deduplication: deduplication,
            onServerRunning: onServerRunning)
    }

    /// Runs the service (its HTTP client and lifecycle included) on a free port for `body`.
    func withService<Value: Sendable>(
        upstream: URL, cacheDatabase: URL? = nil, _ body: @Sendable (any TestClientProtocol) async throws -> Value
    ) async throws -> Value {
        try await application(upstream: upstream, cacheDatabase: cacheDatabase).test(.live) { client in
            try await body(client)
        }
    }
}

extension TestClientProtocol {
    func get(_ uri: String) async throws -> (status: Int, body: String) {
        try await execute(uri: uri, method: .get) { ($0.status.code, String(buffer: $0.body)) }
    }
}

// Each test is bounded: a hang fails it (and cancels it) instead of holding CI. One at a time
// (the whole suite takes a fraction of a second): the two-instance tests share the database and
// the timing-free checks stay simple to read.
@Suite(.timeLimit(.minutes(1)), .serialized) struct ForecastServiceTests {
    @Test func aForecastSignsInOnceAndTheSecondIsACacheHit() async throws {
        let harness = Harness()
        try await withUpstream { upstream, state in
            try await harness.withService(upstream: upstream) { client in
                let first = try await client.get("/forecast/paris")
                #expect(first.status == 200)
                #expect(first.body.contains("Sunny, 21.5 °C"))
                let second = try await client.get("/forecast/paris")
                let decoded = try [first, second].map { try JSONDecoder().decode(Forecast.self, from: Data($0.body.utf8)) }
                #expect(decoded[0] == decoded[1])
                #expect(decoded[0].city == "Paris")
            }
            // No token at first: one 401, one token, the resend answered; the second from the cache.
            #expect(await state.unauthorized == 1)
            #expect(await state.tokensIssued == 1)
            #expect(await state.hits("paris") == 1)
        }
    }

    /// Two instances of the service over one database and one upstream, each with its own HTTP
    /// client, token and database client: `body` gets both, the upstream's state and a fresh
    /// stamp (letters) for names new to the database; afterwards, nothing either instance logged
    /// holds a secret (the database's password, tokens and user tokens included).
    func withTwoInstances(
        upstreamQuota: String? = nil,
        _ body: @Sendable (any TestClientProtocol, any TestClientProtocol, UpstreamState, String) async throws -> Void
    ) async throws {
        let database = try await TestPostgres.shared()
        let first = Harness(upstreamQuota: upstreamQuota)
        let second = Harness(upstreamQuota: upstreamQuota)
        try await withUpstream { upstream, state in
            try await first.withService(upstream: upstream, cacheDatabase: database.url) { one in
                try await second.withService(upstream: upstream, cacheDatabase: database.url) { other in
                    try await body(one, other, state, String(UUID().uuidString.prefix(8).filter(\.isLetter)).lowercased())
                }
            }
        }
        for entry in first.logs.entries + second.logs.entries {
            #expect(!"\(entry.message) \(entry.metadata)".contains("SECRET"), "\(entry)")
        }
    }

    /// Two instances share one cache on PostgreSQL: the second answers from what the first
    /// fetched, and the upstream sees one call (the second instance never even signs in).
    @Test func twoInstancesShareOneCacheOnPostgreSQL() async throws {
        try await withTwoInstances { one, other, state, stamp in
            // Both use the default table; the city is new to it.
            let city = "city" + stamp
            let fetched = try await one.get("/forecast/\(city)")
            let shared = try await other.get("/forecast/\(city)")
            #expect(fetched.status == 200 && shared.status == 200)
            let forecasts = try [fetched, shared].map {
                try JSONDecoder().decode(Forecast.self, from: Data($0.body.utf8))
            }
            #expect(forecasts[0] == forecasts[1] && forecasts[0].text == "Sunny, 21.5 °C")
            #expect(await state.tokensIssued == 1)
            #expect(await state.hitsAll == 1)
        }
    }

    /// Two instances share one token through the database: the second asks for a city the
    /// first never fetched (a miss) and signs in with the first's token, not its own.
    @Test func twoInstancesSignInOnceBetweenThem() async throws {
        try await withTwoInstances { one, other, state, stamp in
            let fetched = try await one.get("/forecast/first\(stamp)")
            let signedIn = try await other.get("/forecast/second\(stamp)")
            #expect(fetched.status == 200 && signedIn.status == 200)
            #expect(await state.tokensIssued == 1)
            #expect(await state.hitsAll == 2)
        }
    }

    /// Two instances given one quota of 4 upstream requests an hour share it through the database:
    /// the first instance's 401, its resend and one more city, the second instance's one city;
    /// its next city is answered `503` with `Retry-After`, not sent.
    @Test func twoInstancesShareOneUpstreamQuota() async throws {
        // A quota of its own for this run (the ledger is named by client and upstream URL).
        try await withTwoInstances(upstreamQuota: "4/3600") { one, other, state, stamp in
            #expect(try await one.get("/forecast/first\(stamp)").status == 200)  // 401, then 200: 2
            #expect(try await one.get("/forecast/second\(stamp)").status == 200)  // 3
            #expect(try await other.get("/forecast/third\(stamp)").status == 200)  // 4
            let refused = try await other.execute(uri: "/forecast/fourth\(stamp)", method: .get) { $0 }
            #expect(refused.status == .serviceUnavailable)
            let retryAfter = refused.headers[.retryAfter].flatMap(Int.init) ?? 0
            #expect(retryAfter > 3_500 && retryAfter <= 3_602, "\(retryAfter)")
            #expect(try await one.get("/forecast/fifth\(stamp)").status == 503)
            #expect(await state.unauthorized == 1)
            #expect(await state.hitsAll == 3)
        }
    }

    /// Users' own answers on two instances sharing the cache: each user's `private` answer is
    /// kept for that user alone (one upstream call per user, whichever instance asks), another
    /// user never gets it, and no token reaches a log.
    @Test func twoInstancesKeepEachUsersPrivateAnswer() async throws {
        try await withTwoInstances { one, other, state, stamp in
            let (alice, bob) = ("alice\(stamp)", "bob\(stamp)")
            // A, then B, then A and B again on the other instance: two upstream calls.
            for (client, user) in [(one, alice), (one, bob), (other, alice), (other, bob), (one, alice)] {
                let answer = try await client.execute(
                    uri: "/me/saved", method: .get, headers: [.authorization: "Bearer user-\(user)-SECRET"]
                ) { ($0.status, String(buffer: $0.body)) }
                #expect(answer.0 == .ok)
                let saved = try JSONDecoder().decode(SavedCities.self, from: Data(answer.1.utf8))
                #expect(saved.user == user && saved.cities.first == "\(user)ville")
            }
            let anonymous = try await one.execute(uri: "/me/saved", method: .get) { $0.status }
            #expect(anonymous == .unauthorized)
            #expect(await state.saved == [alice: 1, bob: 1])
        }
    }

    @Test func anExpiredTokenIsRefreshedAndTheRequestResent() async throws {
        let harness = Harness()
        try await withUpstream { upstream, state in
            try await harness.withService(upstream: upstream) { client in
                let status1 = try await client.get("/forecast/rome").status
                #expect(status1 == 200)
                await state.expire()
                let status2 = try await client.get("/forecast/lima").status
                #expect(status2 == 200)
            }
            #expect(await state.tokensIssued == 2)
            #expect(await state.unauthorized == 2)
        }
    }

    @Test func a503WithRetryAfterIsRetried() async throws {
        let harness = Harness()
        try await withUpstream { upstream, state in
            try await harness.withService(upstream: upstream) { client in
                let answer = try await client.get("/forecast/oslo")
                #expect(answer.status == 200)
            }
            #expect(await state.hits("oslo") == 2)
        }
    }

    @Test func anUpstreamFailureIsABadGatewayWithNoSecretInIt() async throws {
        let harness = Harness()
        try await withUpstream { upstream, state in
            try await harness.withService(upstream: upstream) { client in
                let failed = try await client.get("/forecast/atlantis")
                #expect(failed.status == 502)
                #expect(!failed.body.contains("SECRET"))
                let missing = try await client.get("/forecast/nowhere")
                #expect(missing.status == 404)
                let status3 = try await client.get("/forecast/new%20york").status
                #expect(status3 == 400)
            }
            #expect(await state.hits("atlantis") > 1)  // retried before giving up
        }
        for entry in harness.logs.entries {
            #expect(!"\(entry.message) \(entry.metadata)".contains("SECRET"), "\(entry)")
        }
    }

    @Test func identicalRequestsInFlightShareOneUpstreamCall() async throws {
        let harness = Harness()
        try await withUpstream { upstream, state in
            try await harness.withService(upstream: upstream) { client in
                let status4 = try await client.get("/forecast/rome").status
                #expect(status4 == 200)  // signed in
                let callers = 4
                // Each caller on a connection of its own (the test client has one connection).
                let service = NetworkClient(baseURL: URL(string: "http://127.0.0.1:\(try #require(client.port))")!)
                try await withThrowingTaskGroup(of: String.self) { group in
                    for _ in 0..<callers {
                        group.addTask { try await service.send(Conveyor.Request<String>(path: "/forecast/slowtown")) }
                    }
                    var arrivals = state.arrivals.makeAsyncIterator()
                    while let city = await arrivals.next(), city != "slowtown" {}  // nil: cancelled
                    // Release once every caller waits on the call in flight (the service's own
                    // de-duplication says so). It was: once every caller's span had started, and
                    // 200 turns later; a caller that had not joined by then on a loaded machine
                    // made a call of its own after the release (seen in CI). Bounded: a caller
                    // that never joins fails the test instead of spinning.
                    var turns = 0
                    while harness.deduplication.waitingCallers < callers {
                        turns += 1
                        try #require(turns < 10_000_000, "only \(harness.deduplication.waitingCallers) callers joined")
                        await Task.yield()
                    }
                    #expect(harness.deduplication.callsInFlight == 1)
                    await state.release()
                    var statuses: [String] = []
                    for try await body in group { statuses.append(body) }
                    #expect(statuses.count == callers && statuses.allSatisfy { $0.contains("Fog, 4.5 °C") })
                }
            }
            #expect(await state.hits("slowtown") == 1)
        }
    }

    @Test func tracesMetricsAndLogsDescribeEachUpstreamCall() async throws {
        let harness = Harness()
        let upstreamURL = try await withUpstream { upstream, _ in
            try await harness.withService(upstream: upstream) { client in
                let status = try await client.get("/forecast/oslo").status
                #expect(status == 200)
            }
            return upstream
        }
        // The weather request: a 401 (no token yet), a 503, a 200: three client spans under one.
        let weather = try #require(harness.tracer.finishedSpans.first {
            $0.kind == .internal && $0.attributes.get("url.full") == .string("\(upstreamURL)/weather/oslo")
        })
        let attempts = harness.tracer.finishedSpans.filter { $0.parentSpanID == weather.spanID }
        let statuses: [SpanAttribute?] = attempts.map { $0.attributes.get("http.response.status_code") }
        #expect(statuses == [.int64(401), .int64(503), .int64(200)])
        #expect(harness.metrics.timers.contains { timer in
            timer.label == "http.client.request.duration" && timer.dimensions.contains { $0 == ("error.type", "503") }
        })
        let done = harness.logs.entries.filter { $0.message.description == "HTTP request succeeded" }
        #expect(done.contains { $0.metadata["url.full"]?.description.hasSuffix("/weather/oslo") == true })
        // AsyncHTTPClient's own lines carry the request's id.
        #expect(harness.logs.entries.contains { $0.metadata["ahc-request-id"] != nil && $0.metadata["conveyor.request_id"] != nil })
    }

    @Test func aGracefulShutdownDuringARequestLetsItFinishThenClosesTheClient() async throws {
        let harness = Harness()
        try await withUpstream { upstream, state in
            let (ports, port) = AsyncStream.makeStream(of: Int.self)
            let app = try harness.application(upstream: upstream) { port.yield($0) }
            let group = ServiceGroup(services: [app], logger: harness.logger)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                var bound = ports.makeAsyncIterator()
                let servicePort = try #require(await bound.next())
                let caller = NetworkClient(baseURL: URL(string: "http://127.0.0.1:\(servicePort)")!)
                let answer = Task { try await caller.send(Conveyor.Request<String>(path: "/forecast/slowtown")) }
                var arrivals = state.arrivals.makeAsyncIterator()
                while let city = await arrivals.next(), city != "slowtown" {}  // nil: cancelled
                // The upstream call is in flight: shut down now, then let the upstream answer.
                await group.triggerGracefulShutdown()
                await state.release()
                #expect(try await answer.value.contains("Fog, 4.5 °C"))
                try await tasks.waitForAll()  // the group ended: server drained, client shut down
            }
            #expect(harness.logs.entries.contains { $0.message.description == "HTTP client shut down" })
        }
    }
}
