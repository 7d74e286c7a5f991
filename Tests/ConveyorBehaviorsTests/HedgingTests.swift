@testable import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Hedged requests (contract rule 20): what starts when, which answer wins, what each hook sees,
/// and a model of the race over generated schedules on a manual clock.
@Suite struct HedgingTests {
    /// A transport whose attempt number `n` (in the order sent) answers `script[n-1]` after its
    /// latency on the manual clock; it echoes the attempt's `X-Nonce` and says which attempt it was.
    final class ScriptedTransport: HTTPTransport {
        struct Answer: Sendable {
            var latency: Duration
            var status: Int
        }
        let clock: ManualClock
        let script: [Answer]
        private let state = Locked((sent: 0, cancelled: 0, answered: 0))

        init(clock: ManualClock, _ script: [Answer]) {
            self.clock = clock
            self.script = script
        }

        var sent: Int { state.withLock { $0.sent } }
        var cancelled: Int { state.withLock { $0.cancelled } }

        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            let number = state.withLock { $0.sent += 1; return $0.sent }
            let answer = number <= script.count ? script[number - 1] : Answer(latency: .zero, status: 500)
            do {
                try await clock.sleep(for: answer.latency)
            } catch {
                state.withLock { $0.cancelled += 1 }
                throw error
            }
            state.withLock { $0.answered += 1 }
            var headers: HTTPHeaders = ["X-Attempt": String(number)]
            if let nonce = request.headers["X-Nonce"] { headers["X-Nonce"] = nonce }
            return HTTPResponse(status: answer.status, headers: headers, body: Data(String(number).utf8), request: request)
        }
    }

    /// Counts every hook, and checks that each attempt's `validate` sees the nonce its own
    /// `modify` wrote (a per-attempt value in the context).
    final class Recorder: RequestModifying, SendObserving, AttemptIntercepting, ResponseValidating, SuccessObserving,
        FailureObserving
    {
        enum Nonce: RequestContextKey { static let defaultValue: String? = nil }
        let counts = Locked([String: Int]())
        let attemptsSeen = Locked([Int]())
        let successAttempt = Locked<Int?>(nil)
        let nonces = Locked(0)

        func bump(_ name: String) { counts.withLock { $0[name, default: 0] += 1 } }
        func count(_ name: String) -> Int { counts.withLock { $0[name] ?? 0 } }

        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
            bump("modify")
            attemptsSeen.withLock { $0.append(context.attempt) }
            let nonce = "n\(nonces.withLock { $0 += 1; return $0 })"
            context[Nonce.self] = nonce
            request.headers["X-Nonce"] = nonce
        }
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async { bump("beforeSend") }
        func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
            -> HTTPResponse
        {
            bump("interceptStart")
            defer { bump("interceptEnd") }
            return try await next(request)
        }
        func validate(_ response: HTTPResponse, context: RequestContext) async throws {
            bump("validate")
            if response.headers["X-Nonce"] != context[Nonce.self] { bump("nonceMismatch") }
        }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            bump("afterSuccess")
            successAttempt.withLock { $0 = context.attempt }
            if response.headers["X-Nonce"] != context[Nonce.self] { bump("nonceMismatch") }
        }
        func afterFailure(_ error: NetworkError, context: RequestContext) async { bump("afterFailure") }
    }

    struct Setup {
        let clock = ManualClock()
        let transport: ScriptedTransport
        let recorder = Recorder()
        let client: NetworkClient

        init(
            _ script: [ScriptedTransport.Answer], hedging: HedgingBehavior = HedgingBehavior(delay: .fixed(.milliseconds(100))),
            retry: Bool = false, budget: RetryBudget? = nil
        ) {
            transport = ScriptedTransport(clock: clock, script)
            var configuration = NetworkClient.Configuration(clock: clock)
            configuration.retryBudget = budget
            let recorder = self.recorder
            client = NetworkClient(baseURL: apiURL, transport: transport, configuration: configuration) {
                if retry { RetryBehavior(.exponentialBackoff(maxAttempts: 3, baseDelay: .milliseconds(1), jitter: .none)) }
                hedging
                recorder
            }
        }

        func start(_ method: HTTPMethod = .get) -> Task<Result<HTTPResponse, NetworkError>, Never> {
            HedgingTests.start(Request<HTTPResponse>(method: method, path: "/x"), on: client)
        }
    }

    /// Sends `request` in a task of its own; its result, whichever way it ends.
    static func start(_ request: Request<HTTPResponse>, on client: NetworkClient) -> Task<
        Result<HTTPResponse, NetworkError>, Never
    > {
        Task {
            do throws(NetworkError) {
                return .success(try await client.send(request))
            } catch {
                return .failure(error)
            }
        }
    }

    static func answer(_ milliseconds: Int, _ status: Int = 200) -> ScriptedTransport.Answer {
        .init(latency: .milliseconds(milliseconds), status: status)
    }

    /// Gives abandoned attempts a bounded number of turns to unwind (as `BehaviorContractCheck`
    /// does): they end in their own tasks, after the request returned.
    static func settle(_ done: () -> Bool) async {
        for _ in 0..<100_000 where !done() { await Task.yield() }
    }

    /// The attempt number an answer came from.
    static func attempt(of result: Result<HTTPResponse, NetworkError>) -> Int? {
        switch result {
        case .success(let response): Int(response.headers["X-Attempt"] ?? "")
        case .failure(let error): error.response.flatMap { Int($0.headers["X-Attempt"] ?? "") }
        }
    }

    @Test func aSlowAttemptIsHedgedAndTheFasterAnswerWins() async {
        let setup = Setup([Self.answer(1_000), Self.answer(50)])
        let task = setup.start()
        await setup.clock.waitForSleepers(2)  // the first attempt and the hedge timer
        setup.clock.advance(by: .milliseconds(100))
        await setup.clock.waitForSleepers(2)  // both attempts (no third: the limit is 2)
        setup.clock.advance(by: .milliseconds(50))
        let result = await task.value
        #expect(Self.attempt(of: result) == 2)
        #expect(setup.transport.sent == 2)
        let recorder = setup.recorder
        // The loser is cancelled and unwinds in its own task, after the request has its answer.
        await Self.settle { setup.transport.cancelled == 1 && recorder.count("interceptEnd") == 2 }
        #expect(setup.transport.cancelled == 1)
        #expect(recorder.count("modify") == 2 && recorder.count("interceptStart") == 2)
        #expect(recorder.count("interceptEnd") == 2)
        #expect(recorder.count("validate") == 1)  // the loser never got an answer to judge
        #expect(recorder.count("beforeSend") == 1 && recorder.count("afterSuccess") == 1)
        #expect(recorder.count("afterFailure") == 0 && recorder.count("nonceMismatch") == 0)
        #expect(recorder.successAttempt.withLock { $0 } == 2)
        #expect(recorder.attemptsSeen.withLock { $0 }.sorted() == [1, 2])
    }

    @Test func anAttemptAnsweredBeforeTheDelayIsNeverHedged() async {
        let setup = Setup([Self.answer(60), Self.answer(1)])
        let task = setup.start()
        await setup.clock.waitForSleepers(2)
        setup.clock.advance(by: .milliseconds(60))
        let result = await task.value
        #expect(Self.attempt(of: result) == 1)
        setup.clock.advance(by: .seconds(10))
        #expect(setup.transport.sent == 1)
        #expect(setup.clock.sleeperCount == 0)  // the timer was cancelled with the race
    }

    @Test func aRequestThatMustNotBeSentTwiceIsNeverHedged() async {
        let setup = Setup([Self.answer(1_000), Self.answer(1)])
        let task = setup.start(.post)
        await setup.clock.waitForSleepers(1)
        #expect(setup.clock.sleeps == [.milliseconds(1_000)])  // no hedge timer
        setup.clock.advance(by: .seconds(1))
        #expect(Self.attempt(of: await task.value) == 1)
        #expect(setup.transport.sent == 1)
    }

    /// A failed attempt starts no hedge: with nothing else in flight, the request ends with it
    /// (no retry behavior here) at once.
    @Test func aFailureWithNothingElseInFlightEndsTheRaceAtOnce() async {
        let setup = Setup([Self.answer(10, 503), Self.answer(1)])
        let task = setup.start()
        await setup.clock.waitForSleepers(2)
        setup.clock.advance(by: .milliseconds(10))
        let result = await task.value
        #expect(Self.attempt(of: result) == 1)
        #expect(result.failureStatus == 503)
        #expect(setup.transport.sent == 1)
        #expect(setup.recorder.count("afterFailure") == 1 && setup.recorder.count("beforeSend") == 1)
    }

    /// A failure while another attempt is in flight waits for it.
    @Test func aFailureWaitsForTheAttemptStillInFlight() async {
        let setup = Setup([Self.answer(150, 503), Self.answer(100)])
        let task = setup.start()
        await setup.clock.waitForSleepers(2)
        setup.clock.advance(by: .milliseconds(100))  // hedge sent
        await setup.clock.waitForSleepers(2)
        setup.clock.advance(by: .milliseconds(50))  // the first fails
        await setup.clock.waitForSleepers(1)
        setup.clock.advance(by: .milliseconds(50))  // the hedge answers
        let result = await task.value
        #expect(Self.attempt(of: result) == 2)
        #expect(result.failureStatus == nil)
        #expect(setup.recorder.count("afterSuccess") == 1 && setup.recorder.count("afterFailure") == 0)
        #expect(setup.recorder.count("nonceMismatch") == 0)
    }

    /// When every attempt fails, the retry decision takes the last failure and counts every
    /// attempt sent; the retry is a new race.
    @Test func whenAllFailTheRetryDecisionCountsEveryAttempt() async {
        let setup = Setup([Self.answer(150, 503), Self.answer(100, 503), Self.answer(5)], retry: true)
        let task = setup.start()
        await setup.clock.waitForSleepers(2)
        setup.clock.advance(by: .milliseconds(100))
        await setup.clock.waitForSleepers(2)
        setup.clock.advance(by: .milliseconds(50))  // the first fails: the hedge still in flight
        await setup.clock.waitForSleepers(1)
        setup.clock.advance(by: .milliseconds(50))  // the hedge fails: the retry waits its backoff
        await setup.clock.waitForSleepers(1)
        #expect(setup.clock.advanceToNextDeadline())
        await setup.clock.waitForSleepers(2)  // attempt 3 and its hedge timer
        setup.clock.advance(by: .milliseconds(5))
        let result = await task.value
        #expect(Self.attempt(of: result) == 3)
        #expect(setup.recorder.successAttempt.withLock { $0 } == 3)
        #expect(setup.transport.sent == 3)  // maxAttempts 3 of the retry policy: the hedge counted
    }

    @Test func upToTheLimitHedgesStartOneDelayApart() async {
        let setup = Setup(
            [Self.answer(1_000), Self.answer(1_000), Self.answer(30)],
            hedging: HedgingBehavior(maxAttempts: 3, delay: .fixed(.milliseconds(100))))
        let task = setup.start()
        await setup.clock.waitForSleepers(2)
        setup.clock.advance(by: .milliseconds(100))
        await setup.clock.waitForSleepers(3)  // two attempts and the next timer
        setup.clock.advance(by: .milliseconds(100))
        await setup.clock.waitForSleepers(3)  // three attempts, no timer
        setup.clock.advance(by: .milliseconds(30))
        let result = await task.value
        #expect(Self.attempt(of: result) == 3)
        await Self.settle { setup.transport.cancelled == 2 && setup.recorder.count("interceptEnd") == 3 }
        #expect(setup.transport.cancelled == 2)
        #expect(setup.recorder.count("interceptStart") == 3 && setup.recorder.count("interceptEnd") == 3)
    }

    /// Hedges spend the retry budget: an empty one sends none, and the request still gets the
    /// first attempt's answer.
    @Test func aHedgeTheBudgetRefusesIsNotSent() async {
        let budget = RetryBudget(ratio: 0, minimumPerSecond: 0, clock: ManualClock())
        let setup = Setup([Self.answer(1_000), Self.answer(1)], budget: budget)
        let task = setup.start()
        await setup.clock.waitForSleepers(2)
        setup.clock.advance(by: .milliseconds(100))
        await setup.clock.waitForSleepers(1)
        setup.clock.advance(by: .milliseconds(900))
        let result = await task.value
        #expect(Self.attempt(of: result) == 1)
        #expect(setup.transport.sent == 1)
        #expect(budget.snapshot(for: Origin(apiURL)!).refused == 1)
    }

    @Test func theCallerCancellingEndsEveryAttemptAndTheRequestOnce() async {
        let setup = Setup([Self.answer(1_000), Self.answer(1_000)])
        let task = setup.start()
        await setup.clock.waitForSleepers(2)
        setup.clock.advance(by: .milliseconds(100))
        await setup.clock.waitForSleepers(2)
        task.cancel()
        let result = await task.value
        #expect(result.isCancelled)
        // Both attempts unwind: their intercepts end, balanced.
        await Self.settle { setup.recorder.count("interceptEnd") == 2 }
        #expect(setup.recorder.count("interceptStart") == 2 && setup.recorder.count("interceptEnd") == 2)
        #expect(setup.recorder.count("afterFailure") == 1 && setup.recorder.count("afterSuccess") == 0)
    }

    /// A `PUT` is idempotent, but a body read from a file or a stream is sent once: not hedged.
    @Test func aRequestWithABodyStreamIsNeverHedged() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("hedge-\(UUID().uuidString)")
        try Data("hello".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let setup = Setup([Self.answer(1_000), Self.answer(1)])
        let request = Request<HTTPResponse>(method: .put, path: "/x", body: .file(file, contentType: "text/plain"))
        let task = Self.start(request, on: setup.client)
        await setup.clock.waitForSleepers(1)
        #expect(setup.clock.sleeps == [.milliseconds(1_000)])  // no hedge timer
        setup.clock.advance(by: .seconds(1))
        #expect(Self.attempt(of: await task.value) == 1)
        #expect(setup.transport.sent == 1)
    }

    /// The outcome's log line says how many hedges were sent, whether one won, and whether the
    /// budget refused one.
    @Test func theLogLineSaysWhatHedgingDid() async {
        for refuse in [false, true] {
            let clock = ManualClock()
            let transport = ScriptedTransport(clock: clock, [Self.answer(1_000), Self.answer(10)])
            let sink = CapturingLogSink()
            var configuration = NetworkClient.Configuration(clock: clock)
            configuration.retryBudget = refuse ? RetryBudget(ratio: 0, minimumPerSecond: 0, clock: ManualClock()) : nil
            let client = NetworkClient(baseURL: apiURL, transport: transport, configuration: configuration) {
                LoggingBehavior(sink: sink)
                HedgingBehavior(delay: .fixed(.milliseconds(100)))
            }
            let task = Task { try? await client.send(Request<Void>(path: "/x")) }
            await clock.waitForSleepers(2)
            clock.advance(by: .milliseconds(100))
            await clock.waitForSleepers(refuse ? 1 : 2)
            #expect(clock.advanceToNextDeadline())
            _ = await task.value
            let outcome = sink.entries.last?.metadata ?? [:]
            if refuse {
                #expect(outcome["conveyor.hedge.refused"] == "budget")
                #expect(outcome["conveyor.hedge.sent"] == "0" && outcome["conveyor.hedge.won"] == nil)
                #expect(outcome["conveyor.hedge.cancelled"] == nil)  // no attempt but the one that answered
                #expect(outcome["conveyor.attempt"] == "1")
            } else {
                #expect(outcome["conveyor.hedge.sent"] == "1" && outcome["conveyor.hedge.won"] == "true")
                #expect(outcome["conveyor.hedge.cancelled"] == "1")  // the slow first attempt
                #expect(outcome["conveyor.hedge.refused"] == nil)
                #expect(outcome["conveyor.attempt"] == "2")
            }
        }
    }

    /// Keeps the request's context, and makes it interruptible when asked.
    final class ContextKeeper: SendObserving {
        let interruptible: Bool
        let kept = Locked<RequestContext?>(nil)
        init(interruptible: Bool) { self.interruptible = interruptible }
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
            if interruptible { context.makeInterruptible() }
            kept.withLock { $0 = context }
        }
    }

    /// `cancel()` on an interruptible request ends the race at once, both attempts cancelled; on
    /// another, the attempts in flight go on (as a lone attempt does) and no hedge starts.
    @Test func cancelOnTheContextEndsTheRaceOfAnInterruptibleRequest() async {
        for interruptible in [true, false] {
            let clock = ManualClock()
            let transport = ScriptedTransport(clock: clock, [Self.answer(1_000), Self.answer(1_000), Self.answer(1)])
            let keeper = ContextKeeper(interruptible: interruptible)
            var configuration = NetworkClient.Configuration(clock: clock)
            configuration.retryBudget = nil
            let client = NetworkClient(baseURL: apiURL, transport: transport, configuration: configuration) {
                keeper
                HedgingBehavior(maxAttempts: 3, delay: .fixed(.milliseconds(100)))
            }
            let task = Self.start(Request<HTTPResponse>(path: "/x"), on: client)
            await clock.waitForSleepers(2)
            clock.advance(by: .milliseconds(100))
            await clock.waitForSleepers(3)  // two attempts and the next timer
            keeper.kept.withLock { $0 }?.cancel()
            if interruptible {
                #expect((await task.value).isCancelled)
                await Self.settle { transport.cancelled == 2 }
                #expect(transport.cancelled == 2)
            } else {
                clock.advance(by: .milliseconds(100))  // the timer fires: no third attempt
                clock.advance(by: .milliseconds(800))  // the first answers
                let result = await task.value
                #expect(Self.attempt(of: result) == 1)
            }
            #expect(transport.sent == 2)
        }
    }

    @Test func aRequestCanLeaveHedgingOut() async {
        let setup = Setup([Self.answer(1_000), Self.answer(1)])
        let task = Self.start(Request<HTTPResponse>(path: "/x").excluding(.type(HedgingBehavior.self)), on: setup.client)
        await setup.clock.waitForSleepers(1)
        #expect(setup.clock.sleeps == [.milliseconds(1_000)])
        setup.clock.advance(by: .seconds(1))
        #expect(Self.attempt(of: await task.value) == 1)
    }

    // MARK: The race, against a model

    /// What the model says a race does: when each attempt starts, which answer the request keeps.
    struct RaceModel {
        var delay: Int
        var limit: Int
        var answers: [(latency: Int, ok: Bool)]
        /// The clock's readings at which the driver must find each state, with the sleepers
        /// parked there; then the outcome (the winner, or nil when all failed) and how many
        /// attempts were sent and answered.
        func run() -> (steps: [(time: Int, sleepers: Int)], winner: Int?, sent: Int, answered: Int) {
            var inFlight: [Int: Int] = [1: answers[0].latency]  // attempt -> answer time
            var launched = 1
            var timer: Int? = limit > 1 ? delay : nil
            var steps: [(Int, Int)] = [(0, inFlight.count + (timer == nil ? 0 : 1))]
            var answered = 0
            while true {
                let nextAnswer = inFlight.min { $0.value < $1.value }
                if let timerAt = timer, nextAnswer.map({ timerAt < $0.value }) ?? true {
                    launched += 1
                    inFlight[launched] = timerAt + answers[launched - 1].latency
                    timer = launched < limit ? timerAt + delay : nil
                    steps.append((timerAt, inFlight.count + (timer == nil ? 0 : 1)))
                    continue
                }
                guard let (attempt, time) = nextAnswer else { return (steps, nil, launched, answered) }
                inFlight[attempt] = nil
                answered += 1
                if answers[attempt - 1].ok { return (steps, attempt, launched, answered) }
                if inFlight.isEmpty { return (steps, nil, launched, answered) }
                steps.append((time, inFlight.count + (timer == nil ? 0 : 1)))
            }
        }
    }

    /// Generated schedules (hedge limits 2–4, delays, latencies and failures), each on a manual
    /// clock stepped from one deadline to the next: the hedges start when the model says, the
    /// first acceptable answer wins, a failure waits for the others, every loser is cancelled
    /// and every attempt's hooks end balanced, with `beforeSend` and one `afterSuccess` or
    /// `afterFailure` per request. No two events share an instant (attempt n answers at a time
    /// ≡ n mod 8, timers fire at multiples of 8), so the order is the model's.
    @Test func generatedRacesFollowTheModel() async {
        var random = SplitMix64(state: 0x4ED6E)
        for run in 0..<60 {
            let limit = 2 + Int(random.next() % 3)
            let delay = 8 * (2 + Int(random.next() % 20))
            let answers = (1...limit).map { attempt in
                (latency: 8 * Int(random.next() % 60) + attempt, ok: random.next() % 5 >= 2)
            }
            let model = RaceModel(delay: delay, limit: limit, answers: answers).run()
            let setup = Setup(
                answers.map { Self.answer($0.latency, $0.ok ? 200 : 503) },
                hedging: HedgingBehavior(maxAttempts: limit, delay: .fixed(.milliseconds(delay))))
            let task = setup.start()
            let label = "run \(run): delay \(delay), answers \(answers)"
            for (index, step) in model.steps.enumerated() {
                if index > 0 { #expect(setup.clock.advanceToNextDeadline(), "\(label)") }
                #expect(setup.clock.now.offset == .milliseconds(step.time), "\(label)")
                await setup.clock.waitForSleepers(step.sleepers)
            }
            #expect(setup.clock.advanceToNextDeadline(), "\(label)")  // the answer that ends it
            let result = await task.value
            let recorder = setup.recorder
            await Self.settle {
                recorder.count("interceptEnd") == model.sent && setup.transport.cancelled == model.sent - model.answered
            }
            #expect(setup.transport.sent == model.sent, "\(label)")
            if let winner = model.winner {
                #expect(Self.attempt(of: result) == winner, "\(label)")
                #expect(recorder.successAttempt.withLock { $0 } == winner, "\(label)")
            } else {
                #expect(result.failureStatus == 503, "\(label)")
            }
            #expect(setup.transport.cancelled == model.sent - model.answered, "\(label)")
            #expect(recorder.count("interceptStart") == model.sent && recorder.count("interceptEnd") == model.sent)
            #expect(recorder.count("modify") == model.sent, "\(label)")
            #expect(recorder.count("beforeSend") == 1, "\(label)")
            #expect(recorder.count("afterSuccess") + recorder.count("afterFailure") == 1, "\(label)")
            #expect(recorder.count("nonceMismatch") == 0, "\(label)")
        }
    }

    // MARK: On the system clock

    /// A transport whose first attempt hangs until it is cancelled and whose later ones answer at
    /// once, each with its number.
    static func firstHangs() -> MockTransport {
        let mock = MockTransport()
        let sent = Locked(0)
        mock.stub(
            nil, "/v1/x",
            reply: .handler { _ in
                let number = sent.withLock { $0 += 1; return $0 }
                if number == 1 {
                    let (never, keep) = AsyncStream<Void>.makeStream()
                    for await _ in never {}  // ends when the attempt is cancelled
                    keep.finish()
                }
                return .text("attempt \(number)")
            })
        return mock
    }

    /// On the system clock, the hedge delay is an entry of the shared deadline timer (no task
    /// sleeps on it): the hedge goes when it comes and wins over the attempt that hangs.
    @Test func aHedgeDelayOnTheSystemClockComesThroughTheSharedTimer() async {
        let client = NetworkClient(baseURL: apiURL, transport: Self.firstHangs()) {
            HedgingBehavior(delay: .fixed(.milliseconds(10)))
        }
        let before = DeadlineTimer.shared.firedCount
        let text = await withinTimeLimit(seconds: hangBound) { () -> String in
            do throws(NetworkError) {
                return try await client.send(Request<String>(path: "/x"))
            } catch {
                return "\(error)"
            }
        }
        #expect(text == "attempt 2")
        #expect(DeadlineTimer.shared.firedCount > before)
    }

    /// Races that end before their hedge delay leave no timers behind: 2,000 requests answered
    /// at once under a 600 s delay leave the shared heap far below one entry per request. (With a
    /// task sleeping on each delay, a cancelled sleep stays in the runtime's timer queue on Linux
    /// until its deadline.)
    @Test func racesThatEndBeforeTheirDelayLeaveNoTimersBehind() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/v1/x", reply: .text("at once"))
        let client = NetworkClient(baseURL: apiURL, transport: mock) {
            HedgingBehavior(delay: .fixed(.seconds(600)))
        }
        for _ in 0..<2_000 { _ = try await client.send(Request<String>(path: "/x")) }
        // Other suites' steps share the heap; without the bound it would hold 2,000 or more.
        #expect(DeadlineTimer.shared.entryCount < 600)
    }

    // MARK: The percentile delay

    @Test func thePercentileDelayFollowsTheOriginsLatencies() {
        let hedging = HedgingBehavior(delay: .percentile(0.9, initial: .milliseconds(700), minimum: .milliseconds(2)))
        let origin = Origin(apiURL)
        #expect(hedging.hedgeDelay(for: origin) == .milliseconds(700))
        for milliseconds in 1...15 { hedging.recordLatency(.milliseconds(milliseconds * 10), origin: origin) }
        #expect(hedging.hedgeDelay(for: origin) == .milliseconds(700))  // 15 seen: not yet
        hedging.recordLatency(.milliseconds(160), origin: origin)
        #expect(hedging.hedgeDelay(for: origin) == .milliseconds(150))  // nearest rank: ceil(0.9·16) = 15th
        #expect(hedging.hedgeDelay(for: Origin(URL(string: "https://other.test")!)) == .milliseconds(700))
    }

    /// The window's percentile against a naive one over the last 128 samples, for generated
    /// latencies (it re-sorts every 8 records: checked right after a re-sort).
    @Test func theLatencyWindowMatchesANaivePercentile() {
        var random = SplitMix64(state: 0x4EDE)
        for run in 0..<30 {
            let windows = LatencyWindows()
            var all: [Duration] = []
            let count = 16 + Int(random.next() % 400)
            for _ in 0..<count {
                let latency = Duration.microseconds(Int64(random.next() % 5_000_000))
                all.append(latency)
                windows.record(latency, for: nil)
            }
            let recordsSinceSort = (count - LatencyWindows.seenBeforeUse) % 8
            let seen = Array(all.dropLast(recordsSinceSort).suffix(LatencyWindows.capacity)).sorted()
            for percentile in [0.5, 0.9, 0.95, 0.99] {
                let rank = Int((percentile * Double(seen.count)).rounded(.up))
                #expect(windows.percentile(percentile, of: nil) == seen[rank - 1], "run \(run), p\(percentile)")
            }
        }
    }
}

extension Result<HTTPResponse, NetworkError> {
    var failureStatus: Int? {
        guard case .failure(let error) = self else { return nil }
        return error.status
    }
    var isCancelled: Bool {
        guard case .failure(let error) = self else { return false }
        return error.isCancellation
    }
}
