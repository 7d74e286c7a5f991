@testable import ConveyorBehaviors
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Adds `X-Request-ID` (one per logical request) and remembers, per request, whether the
/// response it got carries its own attempt.
struct OwnRequestCheck: HeaderAdding, SuccessObserving {
    let seen: Locked<[String: String]>  // request id → the X-Request-ID of the response's request
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        ["X-Request-ID": "\(context.requestID)"]
    }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        seen.withLock { $0["\(context.requestID)"] = response.request.headers["X-Request-ID"] ?? "none" }
    }
}

/// An `intercept` member placed after the de-duplication: every send waits at it, ignoring
/// cancellation, until the test lets it through. Lets the test make a call's leader leave
/// before the call reaches the transport.
struct Door: AttemptIntercepting {
    let stuck: Stuck
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        await stuck.wait()
        return try await next(request)
    }
}

/// Unit tests of `DeduplicationBehavior` on a `MockTransport` whose replies wait for the test.
@Suite struct DeduplicationBehaviorTests {
    /// A client with the behavior, and a transport whose every call waits at `held` and then
    /// answers `reply`.
    func setUp(
        _ behavior: DeduplicationBehavior, held: Stuck, reply: MockTransport.Reply = .text("shared"),
        configuration: NetworkClient.Configuration = .init(clock: ImmediateClock()),
        @RequestBehaviorBuilder more: () -> [any RequestBehavior] = { [] }
    ) -> (NetworkClient, MockTransport) {
        let mock = MockTransport(baseURL: apiURL)
        mock.stub(nil, "/movies", reply: .handler { _ in
            await held.wait()
            return reply
        })
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            behavior
            more()
        }
        return (client, mock)
    }

    @Test func identicalGetsInFlightShareOneTransportCall() async throws {
        let held = Stuck()
        let dedup = DeduplicationBehavior()
        let seen = Locked<[String: String]>([:])
        let (client, mock) = setUp(dedup, held: held) { OwnRequestCheck(seen: seen) }
        let tasks = (0..<50).map { _ in Task { try await client.send(Request<String>(path: "/movies")) } }
        await dedup.calls.waitUntilWaiting(50)
        await held.entered(1)
        // What a dashboard or a test reads: every caller waits, on one call.
        #expect(dedup.waitingCallers == 50 && dedup.callsInFlight == 1)
        held.release()
        for task in tasks { #expect(try await task.value == "shared") }
        #expect(mock.requests.count == 1)
        #expect(dedup.calls.count == 0 && dedup.calls.waiting == 0)
        #expect(dedup.waitingCallers == 0 && dedup.callsInFlight == 0)
        // X-Request-ID differs per request and is ignored; each caller's response carries its own.
        let own = seen.withLock { $0 }
        #expect(own.count == 50 && own.allSatisfy { $0.key == $0.value })
    }

    @Test(arguments: [
        ("other path", Request<String>(path: "/movies/2")),
        ("other query", Request<String>(path: "/movies", query: ["page": 2])),
        ("other Accept", Request<String>(path: "/movies", headers: ["Accept": "text/csv"])),
        ("other Authorization", Request<String>(path: "/movies", headers: ["Authorization": "Bearer B"])),
        ("Authorization even when listed as ignored", Request<String>(path: "/movies", headers: ["Authorization": "Bearer B"])),
        ("HEAD", Request<String>(method: .head, path: "/movies")),
        ("other timeout", Request<String>(path: "/movies", timeout: .seconds(7))),
    ])
    func differentRequestsDoNotShare(_ label: String, _ other: Request<String>) async throws {
        let held = Stuck()
        let dedup = label.contains("listed") ? DeduplicationBehavior(ignoring: ["Authorization"]) : DeduplicationBehavior()
        let mock = MockTransport(baseURL: apiURL)
        mock.stub(nil, "/movies", reply: .handler { _ in
            await held.wait()
            return .text("1")
        })
        mock.stub(nil, "/movies/2", reply: .handler { _ in
            await held.wait()
            return .text("2")
        })
        // Timeouts on a clock that never moves: the "other timeout" case is about the key, and a
        // loaded machine (the thread sanitizer) once took longer than its 7 s of real time.
        let client = NetworkClient(
            baseURL: apiURL, transport: mock, configuration: .init(timeoutClock: ManualClock())
        ) { dedup }
        let first = Task { try await client.send(Request<String>(path: "/movies", headers: ["Authorization": "Bearer A"])) }
        let second = Task { try await client.send(other) }
        await dedup.calls.waitUntilWaiting(2)
        #expect(dedup.calls.count == 2, "\(label)")
        await held.entered(2)
        held.release()
        _ = try await first.value
        _ = try await second.value
        #expect(mock.requests.count == 2)
    }

    @Test func headersThatDoNotMatterStillShare() async throws {
        let held = Stuck()
        let dedup = DeduplicationBehavior()
        let (client, mock) = setUp(dedup, held: held)
        let first = Task {
            try await client.send(
                Request<String>(path: "/movies", headers: ["Accept": "application/json", "traceparent": "00-a-b-01", "X-Lang": "en"]))
        }
        let second = Task {
            try await client.send(  // other order, other case, another trace
                Request<String>(path: "/movies", headers: ["x-lang": "en", "traceparent": "00-c-d-01", "ACCEPT": "application/json"]))
        }
        await dedup.calls.waitUntilWaiting(2)
        #expect(dedup.calls.count == 1)
        held.release()
        #expect(try await first.value == "shared")
        #expect(try await second.value == "shared")
        #expect(mock.requests.count == 1)
    }

    @Test func otherMethodsGoStraightToTheTransport() async throws {
        let held = Stuck()
        let dedup = DeduplicationBehavior()
        let (client, mock) = setUp(dedup, held: held)
        let tasks = (0..<5).map { _ in
            Task { try await client.send(Request<String>(method: .post, path: "/movies", body: .json(["a": 1]))) }
        }
        await held.entered(5)  // five calls reached the transport
        #expect(dedup.calls.count == 0)
        held.release()
        for task in tasks { _ = try await task.value }
        #expect(mock.requests.count == 5)
    }

    @Test func everyCallerRunsItsOwnBalancedHooksOnTheSharedResponse() async throws {
        for status in [200, 500] {
            let held = Stuck()
            let dedup = DeduplicationBehavior()
            let recorder = HookRecorder()
            let (client, mock) = setUp(dedup, held: held, reply: .status(status)) {
                RecordingBehavior("spy", recorder: recorder)
            }
            let tasks = (0..<10).map { _ in Task { await outcome { try await client.send(Request<Void>(path: "/movies")) } } }
            await dedup.calls.waitUntilWaiting(10)
            held.release()
            for task in tasks { #expect(await task.value == (status == 200 ? "success" : "status 500")) }
            #expect(mock.requests.count == 1)
            let byRequest = Dictionary(grouping: recorder.events, by: \.requestID)
            #expect(byRequest.count == 10)
            for events in byRequest.values {
                let hooks = events.map(\.hook)
                #expect(hooks.filter { $0 == .beforeSend }.count == 1)
                #expect(hooks.filter { $0 == .afterSuccess || $0 == .afterFailure }.count == 1)
                #expect(hooks.last == (status == 200 ? .afterSuccess : .afterFailure))
                #expect(events.last?.outcome == (status == 200 ? .success(status: 200) : events.last?.outcome))
                if status == 200 { #expect(hooks.contains(.validate)) }
            }
        }
    }

    @Test func cancellingACallerThatJoinedLeavesTheOthersTheSharedCall() async throws {
        let held = Stuck()
        let dedup = DeduplicationBehavior()
        let (client, mock) = setUp(dedup, held: held)
        // The leader first, then two callers that join its call.
        var tasks = [Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } }]
        await dedup.calls.waitUntilWaiting(1)
        tasks += (0..<2).map { _ in Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } } }
        await dedup.calls.waitUntilWaiting(3)
        await held.entered(1)
        tasks[1].cancel()
        #expect(await tasks[1].value == "cancelled")
        #expect(dedup.calls.waiting == 2)
        held.release()
        #expect(await tasks[0].value == "success")
        #expect(await tasks[2].value == "success")
        #expect(mock.requests.count == 1)
    }

    /// A flight never outlives its leader (whose deadline bounds it): when the leader leaves,
    /// the call is cancelled and the earliest caller still waiting sends again.
    @Test func cancellingTheLeaderSendsAgainForTheOthers() async throws {
        let held = Stuck()
        let dedup = DeduplicationBehavior()
        let (client, mock) = setUp(dedup, held: held)
        let leader = Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } }
        await dedup.calls.waitUntilWaiting(1)
        let others = (0..<2).map { _ in Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } } }
        await dedup.calls.waitUntilWaiting(3)
        await held.entered(1)
        leader.cancel()
        #expect(await leader.value == "cancelled")
        await held.entered(2)  // the second send, with an earliest remaining caller's `next`
        held.release()
        #expect(await others[0].value == "success")
        #expect(await others[1].value == "success")
        #expect(mock.requests.count == 2)
    }

    @Test func cancellingEveryCallerCancelsTheCall() async throws {
        let dedup = DeduplicationBehavior()
        let entered = Stuck()
        let sawCancellation = Stuck()
        let mock = MockTransport(baseURL: apiURL)
        mock.stub(nil, "/movies", reply: .handler { _ in
            await withTaskCancellationHandler {
                Task { await entered.wait() }
                let never = AsyncStream<Never> { _ in }
                for await _ in never {}  // ends only when the call's task is cancelled
            } onCancel: {
                Task { await sawCancellation.wait() }
            }
            return .failure(CancellationError())
        })
        let client = NetworkClient(baseURL: apiURL, transport: mock) { dedup }
        let tasks = (0..<3).map { _ in Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } } }
        await dedup.calls.waitUntilWaiting(3)
        await entered.entered(1)
        tasks.forEach { $0.cancel() }
        for task in tasks { #expect(await task.value == "cancelled") }
        await sawCancellation.entered(1)  // the transport call's task was cancelled
        #expect(dedup.calls.count == 0 && dedup.calls.waiting == 0)
        #expect(mock.requests.count == 1)
    }

    /// The call runs with the leader's `next`; once the leader is cancelled, that `next` throws
    /// `.cancelled` without reaching the transport. The callers left must not get it: one of
    /// them sends again.
    @Test func whenTheLeaderIsCancelledBeforeTheCallIsSentTheOthersSendAgain() async throws {
        let door = Stuck()
        let held = Stuck()
        held.release()
        let dedup = DeduplicationBehavior()
        let (client, mock) = setUp(dedup, held: held) { Door(stuck: door) }
        let leader = Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } }
        await dedup.calls.waitUntilWaiting(1)
        let others = (0..<2).map { _ in Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } } }
        await dedup.calls.waitUntilWaiting(3)
        await door.entered(1)  // the call waits at the door, with the leader's `next`
        leader.cancel()
        #expect(await leader.value == "cancelled")
        door.release()  // the leader's `next` now throws `.cancelled`
        for task in others { #expect(await task.value == "success") }
        #expect(mock.requests.count == 1)
        #expect(dedup.calls.sends == 2)  // the first send never reached the transport
        #expect(door.enteredCount == 2)
    }

    @Test func whenTheLeaderTimesOutBeforeTheCallIsSentTheOthersSendAgain() async throws {
        let door = Stuck()
        let held = Stuck()
        held.release()
        let dedup = DeduplicationBehavior()
        let clock = ManualClock()
        let (client, mock) = setUp(
            dedup, held: held, configuration: .init(timeout: .seconds(5), clock: clock, timeoutClock: clock)
        ) { Door(stuck: door) }
        let leader = Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } }
        await dedup.calls.waitUntilWaiting(1)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(2))  // the others arrive later: their deadlines are 2 s after the leader's
        let others = (0..<2).map { _ in Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } } }
        await dedup.calls.waitUntilWaiting(3)
        await clock.waitForSleepers(3)
        await door.entered(1)
        clock.advance(by: .seconds(3))  // the leader's deadline
        #expect(await leader.value == "timedOut")
        door.release()
        for task in others { #expect(await task.value == "success") }
        #expect(mock.requests.count == 1)
        #expect(dedup.calls.sends == 2)
    }

    @Test func aTransportErrorReachesEveryCaller() async throws {
        for (error, expected) in [(URLError(.timedOut), "timedOut"), (URLError(.cannotConnectToHost), "connectionFailed")] {
            let held = Stuck()
            let dedup = DeduplicationBehavior()
            let (client, mock) = setUp(dedup, held: held, reply: .failure(error))
            let tasks = (0..<4).map { _ in Task { await outcome { _ = try await client.send(Request<String>(path: "/movies")) } } }
            await dedup.calls.waitUntilWaiting(4)
            held.release()
            for task in tasks { #expect(await task.value == expected) }
            #expect(mock.requests.count == 1)
        }
    }

    @Test func aFinishedCallIsNotACache() async throws {
        let held = Stuck()
        held.release()
        let dedup = DeduplicationBehavior()
        let (client, mock) = setUp(dedup, held: held)
        #expect(try await client.send(Request<String>(path: "/movies")) == "shared")
        #expect(dedup.calls.count == 0)
        #expect(try await client.send(Request<String>(path: "/movies")) == "shared")
        #expect(mock.requests.count == 2)
    }

    @Test func aRetryIsANewAttemptThatJoinsWhatIsInFlight() async throws {
        let held = Stuck()
        let dedup = DeduplicationBehavior()
        let mock = MockTransport(baseURL: apiURL)
        mock.enqueue(.handler { _ in
            await held.wait()
            return .status(503)
        })
        mock.stub(nil, "/movies", reply: .text("second"))
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: .init(clock: ImmediateClock())) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 2, jitter: .none))
            dedup
        }
        let tasks = (0..<5).map { _ in
            Task { try await client.response(for: Request<String>(path: "/movies")) }
        }
        await dedup.calls.waitUntilWaiting(5)
        held.release()
        for task in tasks {
            let response = try await task.value
            #expect(response.value == "second" && response.attempts == 2)
        }
        #expect(mock.requests.count >= 2 && mock.requests.count <= 6)  // one 503 shared, then retries join or not
    }

    /// Callers that shared one failed call each ask the retry budget for a retry, as they would
    /// without the behavior (Deduplication.md, "What each caller sees"): forty callers on one
    /// 503, in a window with nothing else, get the budget's floor of ten retries (a fifth of 40 is
    /// 8), which share one call again; the thirty refused end at once with the 503. The budget
    /// counts callers, not the calls that reach the server: stricter than its ratio here.
    @Test func callersOfASharedFailureEachAskTheBudgetForARetry() async throws {
        let failing = Stuck()
        let retried = Stuck()
        let dedup = DeduplicationBehavior()
        let mock = MockTransport(baseURL: apiURL)
        mock.enqueue(.handler { _ in
            await failing.wait()
            return .status(503)
        })
        mock.enqueue(.handler { _ in
            await retried.wait()
            return .text("second")
        })
        let clock = ManualClock()
        let configuration = NetworkClient.Configuration(clock: clock)
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            RetryBehavior(.exponentialBackoff(maxAttempts: 2, jitter: .none))
            dedup
        }
        let tasks = (0..<40).map { _ in
            Task { try await client.response(for: Request<String>(path: "/movies")) }
        }
        await dedup.calls.waitUntilWaiting(40)
        failing.release()
        await clock.waitForSleepers(10)  // the retries the budget let through, in their backoff
        clock.advance(by: .seconds(1))
        await dedup.calls.waitUntilWaiting(10)
        retried.release()
        var answered = 0
        var refused = 0
        for task in tasks {
            do {
                let response = try await task.value
                #expect(response.value == "second" && response.attempts == 2)
                answered += 1
            } catch NetworkError.status(503) {
                refused += 1
            }
        }
        #expect(answered == 10 && refused == 30)
        #expect(mock.requests.count == 2)  // the shared 503, then the ten retries' one call
        let origin = try #require(Origin(apiURL))
        let snapshot = try #require(configuration.retryBudget).snapshot(for: origin)
        #expect(snapshot.requests == 40 && snapshot.retries == 10 && snapshot.refused == 30)
    }

    @Test func noDescriptionShowsARequestOrACredential() async throws {
        let held = Stuck()
        let dedup = DeduplicationBehavior()
        let (client, _) = setUp(dedup, held: held)
        let task = Task {
            try await client.send(Request<String>(path: "/movies", query: ["q": "query-secret"], headers: ["Authorization": "Bearer token-secret"]))
        }
        await dedup.calls.waitUntilWaiting(1)
        var dumped = ""
        dump(dedup, to: &dumped)
        let texts = [
            dumped, String(describing: dedup), String(reflecting: dedup), "\(dedup.calls)",
            "\(CallKey(HTTPRequest(url: URL(string: "https://a.test/?k=query-secret")!, headers: ["Authorization": "token-secret"]), ignoring: []))",
        ]
        for text in texts { #expect(!text.contains("secret"), "\(text)") }
        #expect(dumped.contains("InFlightCalls"))  // the table shows its type, nothing inside
        held.release()
        _ = try await task.value
    }
}
