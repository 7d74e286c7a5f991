import ConveyorTesting
import Foundation
import Testing

/// A store whose refresh is counted and can be held or made to fail.
final class FakeTokens: TokenProvider, TokenRefresher {
    let token: Locked<String?>
    let refreshes = Locked(0)
    let gate: Gate?
    let fails: Bool
    struct RefreshError: Error {}

    init(_ token: String?, gate: Gate? = nil, fails: Bool = false) {
        self.token = Locked(token)
        self.gate = gate
        self.fails = fails
    }
    func currentToken() async throws -> String? { token.withLock { $0 } }
    func refreshToken(replacing expiredToken: String?) async throws -> String {
        let count = refreshes.withLock { $0 += 1; return $0 }
        await gate?.wait()
        if fails { throw RefreshError() }
        let fresh = "fresh-\(count)"
        token.withLock { $0 = fresh }
        return fresh
    }
}

/// 200 for `Bearer <valid>`, 401 otherwise.
func authServer(valid: @escaping @Sendable () -> String, tally: Tally? = nil) -> MockTransport.Reply {
    .handler { request in
        if request.headers["Authorization"] == "Bearer \(valid())" { return .json(["ok": true]) }
        await tally?.add()
        return .status(401)
    }
}

@Suite struct AuthTokenBehaviorTests {
    @Test func sendsTheTokenAsABearerOrACustomHeader() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .status(200))
        let store = InMemoryTokenStore(token: "abc")
        try await makeClient(mock) { AuthTokenBehavior(tokens: store) }.send(Request<Void>(path: "/x"))
        try await makeClient(mock) { AuthTokenBehavior(tokens: store, header: .custom("X-Auth-Token")) }
            .send(Request<Void>(path: "/x"))
        store.setToken(nil)
        try await makeClient(mock) { AuthTokenBehavior(tokens: store) }.send(Request<Void>(path: "/x"))
        #expect(mock.requests[0].headers["Authorization"] == "Bearer abc")
        #expect(mock.requests[1].headers["X-Auth-Token"] == "abc")
        #expect(mock.requests[1].headers["Authorization"] == nil)
        #expect(mock.requests[2].headers["Authorization"] == nil)
    }

    @Test func a401IsRefreshedOnceAndRetriedWithTheNewToken() async {
        let tokens = FakeTokens("stale")
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: authServer(valid: { "fresh-1" }))
        let auth = AuthTokenBehavior(tokens: tokens, refresher: tokens)
        let result = await outcome { try await makeClient(mock) { auth }.send(Request<Void>(path: "/me")) }
        #expect(result == "success")
        #expect(mock.requests.map { $0.headers["Authorization"] } == ["Bearer stale", "Bearer fresh-1"])
        #expect(await auth.refreshCount == 1)
    }

    @Test func aSecond401AfterTheRefreshFailsWithoutALoop() async {
        let tokens = FakeTokens("stale")
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .status(401))  // rejects every token, forever
        let auth = AuthTokenBehavior(tokens: tokens, refresher: tokens)
        let result = await outcome { try await makeClient(mock) { auth }.send(Request<Void>(path: "/me")) }
        #expect(result == "unauthorized")
        #expect(mock.requests.count == 2)
        #expect(tokens.refreshes.withLock { $0 } == 1)
    }

    @Test func aHundredConcurrent401sShareExactlyOneRefresh() async throws {
        let gate = Gate()
        let tally = Tally(threshold: 100, gate: gate)
        let tokens = FakeTokens("stale", gate: gate)  // the refresh waits until all 100 got their 401
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: authServer(valid: { "fresh-1" }, tally: tally))
        // The gated refresh lasts as long as the burst takes to arrive: on a clock that is never
        // advanced, its 30 s timeout cannot fire however busy the machine is (it did, once in 20 runs).
        let auth = AuthTokenBehavior(tokens: tokens, refresher: tokens, clock: ManualClock())
        let client = makeClient(mock) { auth }
        let results = await withTaskGroup(of: String.self) { group in
            for _ in 0..<100 { group.addTask { await outcome { try await client.send(Request<Void>(path: "/me")) } } }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: "success", count: 100))
        #expect(tokens.refreshes.withLock { $0 } == 1)
        #expect(await tally.count == 100)
        let headers = mock.requests.map { $0.headers["Authorization"] ?? "" }
        #expect(headers.filter { $0 == "Bearer stale" }.count == 100)
        #expect(headers.filter { $0 == "Bearer fresh-1" }.count == 100)  // each retried exactly once
    }

    /// A request that got its 401 while a refresh ran shares that refresh's outcome even when it
    /// reaches the behavior after the refresh ended: a failed refresh is not run again for the
    /// same burst (it was, once in a few hundred runs of the test below). A request sent after
    /// the failure may refresh again.
    @Test func aLate401FromBeforeAFailedRefreshDoesNotRefreshAgain() async {
        let tokens = FakeTokens("stale", fails: true)
        let parked = Gate()
        let release = Gate()
        let mock = MockTransport()
        mock.stub(nil, "/v1/a", reply: .status(401))
        mock.stub(nil, "/v1/b", reply: .handler { _ in
            await parked.open()
            await release.wait()
            return .status(401)
        })
        mock.stub(nil, "/v1/c", reply: .status(401))
        let auth = AuthTokenBehavior(tokens: tokens, refresher: tokens)
        let client = makeClient(mock) { auth }
        func send(_ path: String) async -> NetworkError? {
            do throws(NetworkError) {
                try await client.send(Request<Void>(path: path))
                return nil
            } catch { return error }
        }
        // B is sent with the stale token and its 401 is held back; A's 401 runs the refresh, which fails.
        let late = Task { await send("/b") }
        await parked.wait()
        let first = await send("/a")
        #expect(first?.status == 401)
        #expect(tokens.refreshes.withLock { $0 } == 1)
        // B's 401 arrives now: it shares the failed refresh's outcome.
        await release.open()
        let second = await late.value
        guard case .unauthorized? = second else {
            Issue.record("expected unauthorized, got \(String(describing: second))")
            return
        }
        #expect(tokens.refreshes.withLock { $0 } == 1)
        #expect(mock.requests.filter { $0.url.path == "/v1/b" }.count == 1)
        // A request sent after the failure may try again (the failure may have been the network's).
        let third = await send("/c")
        #expect(third?.status == 401)
        #expect(tokens.refreshes.withLock { $0 } == 2)
    }

    /// An expired session (the refresher throws) reads as what it is: every waiter fails with
    /// `.unauthorized` and its own 401, and the refresher's error is kept on the behavior.
    @Test func aFailedRefreshFailsEveryWaiterAsUnauthorized() async {
        let gate = Gate()
        let tally = Tally(threshold: 20, gate: gate)
        let tokens = FakeTokens("stale", gate: gate, fails: true)
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: authServer(valid: { "never" }, tally: tally))
        // The gated refresh lasts as long as the burst takes to arrive: on a clock that is never
        // advanced, its 30 s timeout cannot fire however busy the machine is (it did, once in 20 runs).
        let auth = AuthTokenBehavior(tokens: tokens, refresher: tokens, clock: ManualClock())
        let client = makeClient(mock) { auth }
        let errors = await withTaskGroup(of: NetworkError?.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    do throws(NetworkError) {
                        try await client.send(Request<Void>(path: "/me"))
                        return nil
                    } catch { return error }
                }
            }
            return await group.reduce(into: [NetworkError?]()) { $0.append($1) }
        }
        #expect(tokens.refreshes.withLock { $0 } == 1)
        for error in errors {
            guard case .unauthorized? = error, let response = error?.response else {
                Issue.record("expected unauthorized, got \(String(describing: error))")
                continue
            }
            #expect(response.status == 401)
        }
        // Each request sent once: no retry after the refresh failed.
        #expect(mock.requests.count == 20)
        guard case .refreshFailed? = await auth.lastRefreshFailure else {
            Issue.record("expected lastRefreshFailure to be refreshFailed")
            return
        }
        #expect(await auth.lastRefreshFailure?.description.contains("token refresh failed") == true)
    }

    /// README's `catch .unauthorized` handles an expired session.
    @Test func theReadmesCatchHandlesAnExpiredSession() async {
        let tokens = FakeTokens("stale", fails: true)
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .status(401))
        let client = makeClient(mock) { AuthTokenBehavior(tokens: tokens, refresher: tokens) }
        var showedLogin = false
        do {
            try await client.send(Request<Void>(path: "/me"))
        } catch .unauthorized {
            showedLogin = true
        } catch {
            Issue.record("expected .unauthorized, got \(error)")
        }
        #expect(showedLogin)
    }

    @Test func withoutARefresherA401FailsAtOnce() async {
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .status(401))
        let result = await outcome {
            try await makeClient(mock) { AuthTokenBehavior(tokens: InMemoryTokenStore(token: "t")) }.send(Request<Void>(path: "/me"))
        }
        #expect(result == "unauthorized")
        #expect(mock.requests.count == 1)
    }

    @Test func aLoginRequestCanOptOut() async throws {
        let mock = MockTransport()
        mock.stub(.post, "/v1/login", reply: .status(200))
        let client = makeClient(mock) { AuthTokenBehavior(tokens: InMemoryTokenStore(token: "t")) }
        try await client.send(Request<Void>(method: .post, path: "/login").excluding(.type(AuthTokenBehavior.self)))
        #expect(mock.requests.first?.headers["Authorization"] == nil)
    }

    @Test func aProviderThatThrowsFailsTheRequestNamingTheBehavior() async {
        struct Locked: TokenProvider {
            struct KeychainLocked: Error {}
            func currentToken() async throws -> String? { throw KeychainLocked() }
        }
        let mock = MockTransport()
        let result = await outcome {
            try await makeClient(mock) { AuthTokenBehavior(tokens: Locked()) }.send(Request<Void>(path: "/me"))
        }
        #expect(result == "AuthTokenBehavior failed in additionalHeaders")
        #expect(mock.requests.isEmpty)
    }
}
