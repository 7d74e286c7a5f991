import Conveyor
import ConveyorTesting
import Foundation

struct Movie: Codable, Sendable { var id: Int; var title: String }

/// A per-request behavior: shows a message when this one request fails (like an app's toast).
struct ShowErrorBehavior: FailureObserving {
    let shown: Locked<[String]>
    func afterFailure(_ error: NetworkError, context: RequestContext) async {
        shown.withLock { $0.append("Could not save your rating (\(error.status.map(String.init) ?? "no status")).") }
    }
}

/// The demo story on an in-memory server: every step checks that Conveyor did what it says.
struct Story {
    struct Step {
        let title: String
        let request: String
        var attempts = 0
        var outcome = ""
        var ok = false
        var notes: [String] = []
    }

    let trace = Trace()
    /// Retry waits: recorded and skipped by default; with `--real-time`, really waited.
    let clock: any Clock<Duration>
    let mock = MockTransport()
    let tokens = InMemoryTokenStore(token: "expired-token") { _ in "fresh-token" }
    let transitions = Locked<[Bool]>([])
    let counter: NetworkActivityCounter
    let auth: AuthTokenBehavior
    let logLines = Locked<[String]>([])
    /// Every attempt's metrics, from `MetricsBehavior`.
    let metrics = Locked<[AttemptMetrics]>([])

    init(realTime: Bool) {
        clock = realTime ? ContinuousClock() : ImmediateClock()
        let transitions = self.transitions
        counter = NetworkActivityCounter { active in transitions.withLock { $0.append(active) } }
        auth = AuthTokenBehavior(tokens: tokens, refresher: tokens)
    }

    func makeClient() -> NetworkClient {
        let sink = MemorySink(lines: logLines)
        let behaviors: [any RequestBehavior] = [
            HeadersBehavior(["User-Agent": "conveyor-demo/1.0"]),
            auth,
            ActivityCounterBehavior(counter: counter),
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none)),
            LoggingBehavior(sink: sink),
            MetricsBehavior(sink: MemoryMetrics(recorded: metrics)),
        ]
        return NetworkClient(
            baseURL: URL(string: "https://api.example.test/v1")!, transport: mock,
            configuration: .init(clock: clock)
        ) { behaviors.map { Traced($0, trace: trace) } }
    }

    /// The in-memory server's routes.
    func stubRoutes() {
        mock.stub(.get, "/v1/movies/popular", reply: .json([Movie(id: 1, title: "Alien"), Movie(id: 2, title: "Heat")]))
        mock.stub(.get, "/v1/me", reply: .handler { request in
            request.headers["Authorization"] == "Bearer fresh-token" ? .json(["name": "Ann"]) : .status(401)
        })
        mock.enqueue(.request(.get, "/v1/movies/upcoming"), reply: .status(503, headers: ["Retry-After": "2"]))
        mock.stub(.get, "/v1/movies/upcoming", reply: .json([Movie(id: 3, title: "Dune")]))
        mock.stub(.post, "/v1/login", reply: .json(["session": "s-1"]))
        mock.stub(.post, "/v1/movies/7/rating", reply: .text(#"{"error":"stars must be 1-5"}"#, status: 422))
    }

    func run(printer: (String) -> Void) async -> [Step] {
        stubRoutes()
        let client = makeClient()
        var steps: [Step] = []

        steps.append(await step("A typed GET through five client behaviors", "GET /movies/popular", printer) {
            let movies: [Movie] = try await client.get("/movies/popular")
            return (movies.map(\.title) == ["Alien", "Heat"], "200, \(movies.count) movies", ["decoded \(movies.map(\.title))"])
        })

        steps.append(await step("An expired token: 401, one refresh, one retry", "GET /me", printer) {
            let me: [String: String] = try await client.get("/me")
            let refreshes = await auth.refreshCount
            let sent = mock.requests.filter { $0.url.path == "/v1/me" }.map { $0.headers["Authorization"] ?? "none" }
            return (
                me == ["name": "Ann"] && refreshes == 1, "401 → 1 refresh → 200",
                ["refreshes: \(refreshes)", "tokens sent: \(sent.joined(separator: ", "))"]
            )
        })

        steps.append(await step("A 503 with Retry-After: 2 is retried after 2 s", "GET /movies/upcoming", printer) {
            let before = ContinuousClock.now
            let movies: [Movie] = try await client.get("/movies/upcoming")
            let elapsed = ContinuousClock.now - before
            if let immediate = clock as? ImmediateClock {
                let waits = immediate.sleeps
                return (
                    movies.count == 1 && waits == [.seconds(2)], "503 → wait 2 s → 200",
                    ["waited \(waits.map(\.description)) on the injected clock (not slept; --real-time to wait)"]
                )
            }
            return (
                movies.count == 1 && elapsed >= .seconds(2), "503 → wait 2 s → 200",
                ["really waited \(elapsed) before the retry"]
            )
        })

        steps.append(await step("The login call leaves the auth behavior out", "POST /login", printer) {
            let session: [String: String] = try await client.send(
                Request<[String: String]>(method: .post, path: "/login", body: .form(["user": "ann", "password": "hunter2"]))
                    .excluding(.named("AuthTokenBehavior")))
            let header = mock.requests.last?.headers["Authorization"]
            return (session["session"] == "s-1" && header == nil, "200, no auth header", ["Authorization sent: \(header ?? "none")"])
        })

        let shown = Locked<[String]>([])
        steps.append(await step("A per-request behavior reports this request's failure", "POST /movies/7/rating", printer) {
            do throws(NetworkError) {
                try await client.send(
                    Request<Void>(method: .post, path: "/movies/7/rating", body: .json(["stars": 9])),
                    behaviors: [Traced(ShowErrorBehavior(shown: shown), trace: trace)])
                return (false, "200", ["expected a 422"])
            } catch {
                let messages = shown.withLock { $0 }
                return (
                    error.status == 422 && messages.count == 1, "422 → message shown",
                    ["error: \(error)", "shown: \(messages.first ?? "nothing")"]
                )
            }
        })

        steps.append(await step("A cancelled request still returns the activity counter to 0", "GET /movies/slow", printer) {
            let (started, signal) = AsyncStream<Void>.makeStream()
            mock.stub(.get, "/v1/movies/slow", reply: .handler { _ in
                signal.yield()
                return .hang
            })
            let task = Task { () async throws -> Void in try await client.send(Request<Void>(path: "/movies/slow")) }
            for await _ in started { break }
            let during = counter.count
            task.cancel()
            let cancelled: Bool
            do {
                try await task.value
                cancelled = false
            } catch {
                cancelled = (error as? NetworkError)?.isCancellation == true
            }
            return (
                cancelled && during == 1 && counter.count == 0, cancelled ? "cancelled, counter 0" : "not cancelled",
                ["activity counter in flight: \(during), after cancel: \(counter.count)"]
            )
        })

        let indicator = transitions.withLock { $0 }
        let balanced = counter.count == 0 && indicator.count % 2 == 0
        printer("Network activity indicator transitions: \(indicator.map { $0 ? "on" : "off" }.joined(separator: " "))")
        printer("Log lines written (secrets redacted): \(logLines.withLock { $0.count }); e.g.")
        for line in logLines.withLock({ Array($0.prefix(2)) }) { printer("    \(line)") }
        if !balanced { steps.append(Step(title: "activity counter balanced", request: "-", outcome: "unbalanced")) }
        return steps
    }

    private func step(
        _ title: String, _ request: String, _ printer: (String) -> Void,
        _ body: () async throws -> (ok: Bool, outcome: String, notes: [String])
    ) async -> Step {
        var step = Step(title: title, request: request)
        let sentBefore = mock.requests.count
        do {
            (step.ok, step.outcome, step.notes) = try await body()
        } catch {
            step.outcome = "unexpected error: \(error)"
            step.ok = false
        }
        step.attempts = mock.requests.count - sentBefore
        printer("")
        printer("\(step.ok ? "✔" : "✘") \(title)")
        printer("  \(request)")
        for line in Trace.render(trace.drain()) { printer(line) }
        for note in step.notes { printer("  · \(note)") }
        return step
    }
}

/// Keeps log lines in memory so the demo can show a few.
/// Keeps each attempt's metrics for the summary.
struct MemoryMetrics: MetricsSink {
    let recorded: Locked<[AttemptMetrics]>
    func record(_ metrics: AttemptMetrics) { recorded.withLock { $0.append(metrics) } }
}

struct MemorySink: LogSink {
    let lines: Locked<[String]>
    var isEnabled: Bool { true }
    func write(_ entry: LogEntry) { lines.withLock { $0.append(entry.message) } }
}
