import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// The request's total timeout (contract rule 18: one model with the attempt's timeout). Time is
/// a `ManualClock` that the upstream moves as it answers; the retry waits sleep on an immediate
/// clock, so the only time that passes is what an attempt took.
@Suite struct TotalTimeoutTests {
    /// Decides each retry with the next of `delays` (a retry waits that long), and no more.
    struct ScriptedRetries: RetryDeciding {
        let delays: [Duration]
        func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
            -> RetryDecision
        {
            context.attempt <= delays.count ? .retry(after: delays[context.attempt - 1]) : .doNotRetry
        }
    }

    /// Counts the once-per-request hooks.
    final class Balance: SuccessObserving, FailureObserving, SendObserving, Sendable {
        let counts = Locked((began: 0, ended: 0))
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async { counts.withLock { $0.began += 1 } }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { counts.withLock { $0.ended += 1 } }
        func afterFailure(_ error: NetworkError, context: RequestContext) async { counts.withLock { $0.ended += 1 } }
    }

    func client(_ mock: MockTransport, clock: ManualClock, total: Duration?, delays: [Duration], balance: Balance)
        -> NetworkClient
    {
        var configuration = NetworkClient.Configuration(clock: ImmediateClock(), timeoutClock: clock)
        configuration.totalTimeout = total
        configuration.attemptLimit = 100
        configuration.retryBudget = nil
        return NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock, configuration: configuration) {
            balance
            ScriptedRetries(delays: delays)
        }
    }

    /// An upstream that takes `durations[i]` of the clock to answer attempt `i` with a 503; one
    /// that would still be working when `deadline` passes moves the clock past it and never
    /// answers (so the engine's deadline, not the answer, decides how the attempt ends).
    func upstream(_ mock: MockTransport, clock: ManualClock, durations: [Duration], deadline: Duration?) {
        let started = clock.now
        let index = Locked(0)
        mock.stub(nil, "/x", reply: .handler { _ in
            let i = index.withLock { value -> Int in
                defer { value += 1 }
                return value
            }
            let took = durations[min(i, durations.count - 1)]
            let end = started.duration(to: clock.now) + took
            clock.advance(by: took)
            if let deadline, end >= deadline {
                try? await Task.sleep(for: .seconds(60))  // ended at once by the deadline; 60 s: a regression fails, never hangs
            }
            return .status(503)
        })
    }

    func send(_ client: NetworkClient) async -> NetworkError? {
        do throws(NetworkError) {
            try await client.send(Request<Void>(path: "/x"))
            return nil
        } catch {
            return error
        }
    }

    @Test func anAttemptInFlightWhenTheTotalPassesTimesOut() async {
        let clock = ManualClock()
        let mock = MockTransport()
        upstream(mock, clock: clock, durations: [.seconds(1)], deadline: .milliseconds(2_500))
        let balance = Balance()
        let client = client(mock, clock: clock, total: .milliseconds(2_500), delays: Array(repeating: .zero, count: 10), balance: balance)
        let error = await send(client)
        #expect(error == .timedOut)
        #expect(mock.requests.count == 3)  // 0-1 s, 1-2 s, and the third cut at 2.5 s
        #expect(balance.counts.withLock { $0 } == (1, 1))
    }

    @Test func aRetryThatCouldNotStartBeforeTheTotalIsNotMadeAndTheAnswerStands() async {
        let clock = ManualClock()
        let mock = MockTransport()
        upstream(mock, clock: clock, durations: [.seconds(1)], deadline: nil)
        let balance = Balance()
        // After the first answer (at 1 s) 1.5 s are left: a wait of 1.5 s could not start in time.
        let client = client(mock, clock: clock, total: .milliseconds(2_500), delays: [.milliseconds(1_500)], balance: balance)
        let error = await send(client)
        #expect(error?.status == 503 && error != .timedOut)
        #expect(mock.requests.count == 1)
        #expect(balance.counts.withLock { $0 } == (1, 1))

        // Without a total timeout the same request is retried.
        let again = MockTransport()
        upstream(again, clock: clock, durations: [.seconds(1)], deadline: nil)
        let unlimited = self.client(again, clock: clock, total: nil, delays: [.milliseconds(1_500)], balance: Balance())
        #expect(await send(unlimited)?.status == 503)
        #expect(again.requests.count == 2)
    }

    @Test func aTotalOfZeroSendsNothingAndRunsNoHook() async {
        let clock = ManualClock()
        let mock = MockTransport()
        upstream(mock, clock: clock, durations: [.seconds(1)], deadline: nil)
        let balance = Balance()
        let client = client(mock, clock: clock, total: .zero, delays: [], balance: balance)
        #expect(await send(client) == .timedOut)
        #expect(mock.requests.isEmpty)
        #expect(balance.counts.withLock { $0 } == (0, 0))
    }

    /// A request's own total timeout wins over the client's.
    @Test func aRequestsOwnTotalWinsOverTheClients() async {
        let clock = ManualClock()
        let mock = MockTransport()
        upstream(mock, clock: clock, durations: [.seconds(1)], deadline: .milliseconds(1_500))
        let client = client(mock, clock: clock, total: .seconds(60), delays: Array(repeating: .zero, count: 10), balance: Balance())
        var request = Request<Void>(path: "/x")
        request.totalTimeout = .milliseconds(1_500)
        do throws(NetworkError) {
            try await client.send(request)
            Issue.record("succeeded")
        } catch {
            #expect(error == .timedOut)
        }
        #expect(mock.requests.count == 2)
    }

    /// Sends a credential header of its own and declares it (as a request's own credential
    /// behavior does): the request's sensitive names change after its total timeout was set.
    struct DeclaresASecret: HeaderAdding, SensitiveHeaderDeclaring {
        var sensitiveHeaderNames: [String] { ["X-Own-Secret"] }
        func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
            ["X-Own-Secret": "s3cr3t"]
        }
    }

    /// The total timeout holds whatever else the request carries beside its message: names its
    /// client adds to the sensitive headers, and names its own behaviors declare.
    @Test func theTotalHoldsWithSensitiveNamesFromTheClientAndTheRequest() async {
        for (clientNames, ownBehavior) in [(false, true), (true, false), (true, true)] {
            let clock = ManualClock()
            let mock = MockTransport()
            upstream(mock, clock: clock, durations: [.seconds(1)], deadline: .milliseconds(2_500))
            var configuration = NetworkClient.Configuration(clock: ImmediateClock(), timeoutClock: clock)
            configuration.totalTimeout = .milliseconds(2_500)
            configuration.retryBudget = nil
            if clientNames { configuration.sensitiveHeaders = configuration.sensitiveHeaders.adding(["X-Client-Secret"]) }
            let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock, configuration: configuration) {
                ScriptedRetries(delays: Array(repeating: .zero, count: 10))
            }
            var request = Request<Void>(path: "/x")
            if ownBehavior { request.behaviors = [DeclaresASecret()] }
            do throws(NetworkError) {
                try await client.send(request)
                Issue.record("succeeded")
            } catch {
                #expect(error == .timedOut, "client names \(clientNames), own behavior \(ownBehavior)")
            }
            #expect(mock.requests.count == 3, "client names \(clientNames), own behavior \(ownBehavior)")
        }
    }

    /// Generated schedules (how long each attempt takes, how long each retry waits, the total)
    /// against a model of the rule: an attempt that would end at or past the total is cut there
    /// with `.timedOut`; a retry whose wait is not shorter than what is left is not made, and the
    /// 503 stands; otherwise every scripted retry is made.
    @Test func generatedSchedulesEndAsTheModelSays() async {
        var random = SplitMix64(state: 58)
        for round in 0..<60 {
            let count = Int(random.next() % 6) + 1
            let durations = (0..<8).map { _ in Duration.milliseconds(Int64(random.next() % 900) + 50) }
            let delays = (0..<count).map { _ in Duration.milliseconds(Int64(random.next() % 1_200)) }
            let total = Duration.milliseconds(Int64(random.next() % 4_000) + 1)

            var now = Duration.zero
            var sent = 0
            var timesOut = true
            while true {
                sent += 1
                now += durations[min(sent - 1, durations.count - 1)]
                if now >= total {
                    timesOut = true
                    break
                }
                if sent > delays.count || delays[sent - 1] >= total - now {
                    timesOut = false
                    break
                }
            }

            let clock = ManualClock()
            let mock = MockTransport()
            upstream(mock, clock: clock, durations: durations, deadline: total)
            let balance = Balance()
            let client = client(mock, clock: clock, total: total, delays: delays, balance: balance)
            let error = await send(client)
            #expect(timesOut ? error == .timedOut : error?.status == 503, "round \(round): \(String(describing: error))")
            #expect(mock.requests.count == sent, "round \(round)")
            #expect(balance.counts.withLock { $0 } == (1, 1), "round \(round)")
        }
    }
}
