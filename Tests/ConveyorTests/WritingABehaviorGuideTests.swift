// Runs the behaviors of Docs/WritingABehavior.md and checks that they do what the guide says. The
// types below are this file's own copies of the guide's, and nothing keeps them identical to the
// text: the guide's blocks themselves are type-checked by DocSnippetTests.
import ConveyorTesting
import Foundation
import Testing

struct APIKeyBehavior: HeaderAdding {
    let key: String
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        ["X-API-Key": key]
    }
}

struct AttemptHeaderBehavior: HeaderAdding {
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        ["X-Attempt": "\(context.attempt)"]
    }
}

actor Timings {
    private(set) var durations: [Duration] = []
    func record(_ duration: Duration) { durations.append(duration) }
}

struct TimingBehavior: SendObserving, SuccessObserving, FailureObserving {
    enum Start: RequestContextKey { static let defaultValue: ContinuousClock.Instant? = nil }
    let timings: Timings

    func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        context[Start.self] = .now
    }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        await finish(context)
    }
    func afterFailure(_ error: NetworkError, context: RequestContext) async {
        await finish(context)
    }
    private func finish(_ context: RequestContext) async {
        if let start = context[Start.self] { await timings.record(.now - start) }
    }
}

struct RequireJSONBehavior: ResponseValidating {
    struct NotJSON: Error {}
    func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        guard response.status == 204 || response.headers["Content-Type"]?.hasPrefix("application/json") == true else {
            throw NotJSON()
        }
    }
}

struct RetryOnceOn503: RetryDeciding {
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        response?.status == 503 && context.attempt == 1 ? .retry(after: .seconds(1)) : .doNotRetry
    }
}

@Suite struct WritingABehaviorGuideTests {
    let base = URL(string: "https://api.test")!

    @Test func headersAttemptsRetriesAndOptOut() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(503), .json(["ok": true]), .status(204))
        let clock = ImmediateClock()
        let client = NetworkClient(baseURL: base, transport: mock, configuration: .init(clock: clock)) {
            APIKeyBehavior(key: "k-1")
            AttemptHeaderBehavior()
            RequireJSONBehavior()
            RetryOnceOn503()
        }
        let result: [String: Bool] = try await client.get("/status")
        #expect(result == ["ok": true])
        #expect(mock.requests.map { $0.headers["X-Attempt"] } == ["1", "2"])
        #expect(mock.requests.allSatisfy { $0.headers["X-API-Key"] == "k-1" })
        #expect(clock.sleeps == [.seconds(1)])

        let login = Request<Void>(method: .post, path: "/login").excluding(.type(APIKeyBehavior.self))
        try await client.send(login)
        #expect(mock.requests.last?.headers["X-API-Key"] == nil)
    }

    @Test func validateTurnsANonJSONSuccessIntoANamedFailure() async {
        let mock = MockTransport()
        mock.enqueue(.text("<html>captive portal</html>"))
        let client = NetworkClient(baseURL: base, transport: mock) { RequireJSONBehavior() }
        do throws(NetworkError) {
            let _: [String: Bool] = try await client.get("/status")
            Issue.record("expected a failure")
        } catch {
            guard case .behaviorFailed = error, error.behavior == "RequireJSONBehavior", error.hook == .validate, let underlying = error.underlying else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(underlying is RequireJSONBehavior.NotJSON)
        }
    }

    @Test func timingBehaviorRecordsOncePerRequest() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(503), .status(200), .status(500))
        let timings = Timings()
        let client = NetworkClient(baseURL: base, transport: mock, configuration: .init(clock: ImmediateClock())) {
            TimingBehavior(timings: timings)
            RetryOnceOn503()
        }
        try await client.send(Request<Void>(path: "/a"))
        try? await client.send(Request<Void>(path: "/b"))
        #expect(await timings.durations.count == 2)  // one per request, retries included
    }
}
