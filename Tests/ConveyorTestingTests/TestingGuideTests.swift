// Runs the scenarios of Docs/Testing.md and checks what the guide says they do. The types below are
// this file's own copies of the guide's, and nothing keeps them identical to the text: the guide's
// blocks themselves are type-checked by DocSnippetTests (Tests/ConveyorTests).
import ConveyorTesting
import Foundation
import Testing

enum TestingGuide {
    struct Movie: Codable, Equatable, Sendable { var id: Int; var title: String }

    @MainActor final class MoviesViewModel {
        private let client: any NetworkClientProtocol
        private(set) var titles: [String] = []
        private(set) var message: String?

        init(client: any NetworkClientProtocol) { self.client = client }

        func load() async {
            do throws(NetworkError) {
                let movies: [Movie] = try await client.get("/movies", query: ["page": 1])
                titles = movies.map(\.title)
            } catch .unauthorized {
                message = "Please sign in again."
            } catch {
                message = "Could not load movies."
            }
        }
    }

    struct RequestIDBehavior: HeaderAdding {
        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            ["X-Request-ID": "req-\(context.requestID.rawValue)"]
        }
    }

    actor Spinner {
        private(set) var visible = 0
        func show() { visible += 1 }
        func hide() { visible -= 1 }
    }

    struct SpinnerBehavior: SendObserving, SuccessObserving, FailureObserving {
        let spinner: Spinner
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async { await spinner.show() }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { await spinner.hide() }
        func afterFailure(_ error: NetworkError, context: RequestContext) async { await spinner.hide() }
    }

    struct LeakySpinnerBehavior: SendObserving, SuccessObserving {
        let spinner: Spinner
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async { await spinner.show() }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { await spinner.hide() }
    }
}

@Suite struct TestingGuideTests {
    typealias Movie = TestingGuide.Movie

    @Test @MainActor func showsTitles() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/v1/movies", query: ["page": "1"], reply: .json([Movie(id: 1, title: "Alien")]))
        let model = TestingGuide.MoviesViewModel(
            client: NetworkClient(baseURL: URL(string: "https://api.test/v1")!, transport: mock))

        await model.load()

        #expect(model.titles == ["Alien"])
        #expect(mock.requests.count == 1)
    }

    @Test @MainActor func asksToSignInAgainOn401() async {
        let mock = MockTransport()
        mock.enqueue(.status(401))
        let model = TestingGuide.MoviesViewModel(
            client: NetworkClient(baseURL: URL(string: "https://api.test/v1")!, transport: mock))
        await model.load()
        #expect(model.message == "Please sign in again.")
    }

    @Test func addsTheSameRequestIDOnEveryAttempt() async throws {
        let mock = MockTransport()
        mock.enqueue(.status(503), .status(200))
        let recorder = HookRecorder()
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock) {
            TestingGuide.RequestIDBehavior()
            RecordingBehavior("spy", recorder: recorder, retry: { _, context in context.attempt == 1 ? .retryNow : .doNotRetry })
        }

        try await client.send(Request<Void>(path: "/ping"))

        let ids = mock.requests.map { $0.headers["X-Request-ID"] }
        #expect(ids.count == 2 && ids[0] == ids[1])
        #expect(
            recorder.hooks(of: "spy") == [
                .additionalHeaders, .modify, .beforeSend, .retryDecision,
                .additionalHeaders, .modify, .validate, .afterSuccess,
            ])
    }

    @Test func spinnerBehaviorKeepsTheContract() async {
        let spinner = TestingGuide.Spinner()
        let violations = await BehaviorContractCheck(TestingGuide.SpinnerBehavior(spinner: spinner)) { await spinner.visible }.run()
        #expect(violations.isEmpty, "\(violations)")
    }

    @Test func theGuidesLeakyVariantIsReportedAsTheGuideSays() async {
        let spinner = TestingGuide.Spinner()
        let violations = await BehaviorContractCheck(TestingGuide.LeakySpinnerBehavior(spinner: spinner)) { await spinner.visible }.run()
        #expect(violations.first?.description == "error status 500: state not restored after the request ended: before 0, after 1 (unbalanced hooks, or per-request state kept on the instance)")
    }

    @Test func retriesWithExponentialBackoff() async throws {
        let clock = ImmediateClock()
        let mock = MockTransport()
        mock.enqueue(.status(503), .status(503), .status(503), .json(["ok": true]))
        let client = NetworkClient(
            baseURL: URL(string: "https://api.test")!, transport: mock, configuration: .init(clock: clock)
        ) {
            RetryBehavior(RetryPolicy(maxAttempts: 4, baseDelay: .seconds(1), multiplier: 2, jitter: .none))
        }

        let result: [String: Bool] = try await client.get("/flaky")

        #expect(result == ["ok": true])
        #expect(clock.sleeps == [.seconds(1), .seconds(2), .seconds(4)])
    }

    @Test func timesOutOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.hang)
        let client = NetworkClient(
            baseURL: URL(string: "https://api.test")!, transport: mock, configuration: .init(timeoutClock: clock))

        let task = Task { () async throws -> Void in try await client.send(Request<Void>(path: "/slow", timeout: .seconds(10))) }
        await clock.waitForSleepers(1)  // the timeout timer is parked
        clock.advance(by: .seconds(10))

        await #expect(throws: NetworkError.self) { try await task.value }
    }
}
