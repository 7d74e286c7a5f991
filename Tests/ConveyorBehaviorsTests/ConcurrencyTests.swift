import ConveyorTesting
import Foundation
import Testing

/// 1,000 concurrent requests through one client with the standard behaviors: nothing is lost,
/// duplicated or left open.
@Suite struct ConcurrencyTests {
    @Test func aThousandConcurrentRequestsWithTheStandardBehaviors() async throws {
        let requestCount = 1_000
        let gate = Gate()
        let firstWave = Tally(threshold: requestCount, gate: gate)
        let tokens = FakeTokens("stale", gate: gate)  // the refresh waits until every request got its 401
        let counter = NetworkActivityCounter()
        let runner = FakeTaskRunner()
        let sink = CapturingLogSink()
        let flakyAttempts = Locked<[String: Int]>([:])

        // The server: 401 for the stale token; then every fifth request answers 503 once.
        let mock = MockTransport()
        mock.stub(nil, "/v1/items", reply: .handler { request in
            guard request.headers["Authorization"] == "Bearer fresh-1" else {
                await firstWave.add()
                return .status(401)
            }
            let n = request.url.query ?? ""
            let seen = flakyAttempts.withLock { attempts -> Int in
                attempts[n, default: 0] += 1
                return attempts[n, default: 0]
            }
            let index = Int(n.split(separator: "=").last ?? "") ?? 0
            return index % 5 == 0 && seen == 1 ? .status(503) : .json(["n": index])
        })

        // The gated refresh lasts as long as the burst takes to arrive: on a clock that is never
        // advanced, its 30 s timeout cannot fire however busy the machine is (it did, once in 20 runs).
        let auth = AuthTokenBehavior(tokens: tokens, refresher: tokens, clock: ManualClock())
        let client = makeClient(mock) {
            auth
            ActivityCounterBehavior(counter: counter)
            BackgroundTaskBehavior(runner: runner)
            RetryBehavior(.exponentialBackoff(maxAttempts: 3, jitter: .none))
            LoggingBehavior(sink: sink)
        }

        let results = await withTaskGroup(of: (Int, Result<[String: Int], NetworkError>).self) { group in
            for index in 0..<requestCount {
                group.addTask {
                    do throws(NetworkError) {
                        return (index, .success(try await client.send(Request<[String: Int]>(path: "/items", query: ["n": index]))))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            return await group.reduce(into: [Int: Result<[String: Int], NetworkError>]()) { $0[$1.0] = $1.1 }
        }

        // Every request succeeded with its own answer, but for a fifth request whose retry of its
        // 503 the client's retry budget refused: the 1,000 retries with the refreshed token are
        // counted in it (never refused), so how many of the 200 retries of a 503 fit depends on
        // how far its window had moved (each backoff moves the immediate clock); such a request
        // ends with the server's 503, never another error.
        #expect(results.count == requestCount)
        #expect(results.allSatisfy { index, result in
            switch result {
            case .success(let value): value == ["n": index]
            case .failure(let error): index % 5 == 0 && error.status == 503
            }
        })
        let retried503 = results.filter { index, result in index % 5 == 0 && (try? result.get()) != nil }.count
        // One refresh for the whole 401 wave.
        #expect(tokens.refreshes.withLock { $0 } == 1)
        #expect(await auth.refreshCount == 1)
        // Attempts: 1,000 with the stale token, 1,000 retries, plus one more for each fifth request
        // whose retry was made.
        #expect(mock.requests.count == requestCount * 2 + retried503)
        #expect(retried503 > 0)
        // Nothing left open: counter at zero, every background task ended exactly once.
        #expect(counter.count == 0)
        let (begun, ended) = runner.state.withLock { ($0.begun, $0.ended) }
        #expect(begun.count == requestCount)
        #expect(ended.sorted() == begun.sorted())
        #expect(runner.openIDs.isEmpty)
        // Exactly one outcome line per request, none lost or duplicated.
        let outcomes = sink.messages.filter { $0.hasPrefix("←") || $0.hasPrefix("✕") }
        let ids = outcomes.compactMap { $0.split(separator: " ").dropFirst().first.map(String.init) }
        #expect(outcomes.count == requestCount)
        #expect(Set(ids).count == requestCount)
    }
}
