public import ConveyorPipeline
public import Foundation

/// A transport that makes the transport it wraps misbehave, at seeded rates: it throws a fault,
/// waits before answering, or answers itself (a `503`, say) instead of sending. For testing your
/// own resilience settings (retries, the retry budget, a circuit breaker, timeouts) against a
/// misbehaving upstream in a unit test, as Polly's chaos strategies do.
///
/// ```swift
/// let upstream = MockTransport()
/// upstream.stub(.get, "/movies", reply: .rawJSON("[]"))
/// let chaos = ChaosTransport(
///     wrapping: upstream, seed: 42,
///     fault: .init(rate: 0.3),                                              // URLError(.networkConnectionLost)
///     latency: .init(rate: 0.1, delay: .seconds(2)),
///     answer: .init(rate: 0.1, reply: .status(503, headers: ["Retry-After": "1"])),
///     clock: ImmediateClock())
/// let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: chaos) { RetryBehavior() }
/// ```
///
/// Each attempt in scope (``isEnabled`` and the `scope` predicate) takes three numbers from a
/// generator seeded with `seed` (SplitMix64), one per kind of chaos, whatever the rates: the
/// same seed and the same order of attempts give the same chaos, and changing one rate never
/// moves the others'. An attempt then waits if its latency was drawn (on `clock`), and fails with
/// the fault if one was drawn, or else gets the answer if one was drawn, or else goes to the
/// wrapped transport. A fault or an answer is injected before the request's body is read, and the
/// wrapped transport is not called: the upstream really sees fewer requests. An attempt out of
/// scope goes straight through and takes no number.
///
/// Streaming stays streaming: a wrapped ``Conveyor/StreamingHTTPTransport`` gets the transfer; a
/// wrapped plain transport gets the body stream read into the body first and its response body
/// handed to the transfer afterwards (what the client does for it); an injected answer's body goes
/// to the transfer as ``MockTransport`` hands it over. ``counts`` says what was injected.
public final class ChaosTransport: StreamingHTTPTransport, Sendable {
    /// Faults: the attempt throws an error instead of being sent.
    public struct Fault: Sendable {
        /// The part of the attempts in scope that fail, 0...1.
        package let rate: Double
        package let error: any Error

        /// Creates a fault.
        /// - Parameters:
        ///   - rate: The part of the attempts that fail; clamped to 0...1 (NaN is 0).
        ///   - error: What they throw; a lost connection by default (a ``Conveyor/NetworkError/connectionFailed(_:)``
        ///     to the client, which retries it and counts it as a failure of the upstream).
        public init(rate: Double, error: any Error = URLError(.networkConnectionLost)) {
            self.rate = clampedRate(rate)
            self.error = error
        }
    }

    /// Latency: the attempt waits on the transport's clock, then goes on.
    public struct Latency: Sendable {
        /// The part of the attempts in scope that wait, 0...1.
        package let rate: Double
        package let delay: Duration

        /// Creates latency.
        /// - Parameters:
        ///   - rate: The part of the attempts that wait; clamped to 0...1 (NaN is 0).
        ///   - delay: How long they wait (a negative one waits for nothing).
        public init(rate: Double, delay: Duration) {
            self.rate = clampedRate(rate)
            self.delay = max(delay, .zero)
        }
    }

    /// Answers: the attempt gets a ``MockTransport/Reply`` instead of being sent.
    public struct Answer: Sendable {
        /// The part of the attempts in scope that get it, 0...1.
        package let rate: Double
        package let reply: MockTransport.Reply

        /// Creates an answer.
        /// - Parameters:
        ///   - rate: The part of the attempts that get it; clamped to 0...1 (NaN is 0).
        ///   - reply: What they get, answered as ``MockTransport`` answers it (its body handed to
        ///     a download or a stream in chunks, a `.delayed` reply waiting on the transport's
        ///     clock): a `503` with no body by default; `.status(503, headers: ["Retry-After": "2"])`,
        ///     `.status(429)` or `.text("…", status: 500)`, say.
        public init(rate: Double, reply: MockTransport.Reply = .status(503)) {
            self.rate = clampedRate(rate)
            self.reply = reply
        }
    }

    /// What the transport did, attempt by attempt, since it was made.
    public struct Counts: Sendable, Hashable, CustomStringConvertible {
        /// Every attempt it was given, in scope or not.
        public var attempts = 0
        /// Attempts it made wait.
        public var delayed = 0
        /// Attempts it failed with the fault.
        public var faults = 0
        /// Attempts it answered itself.
        public var answers = 0
        /// Attempts it handed to the wrapped transport: `attempts - faults - answers`.
        public var passedThrough = 0

        /// `attempts 10, delayed 1, faults 3, answers 2, passed through 5`.
        public var description: String {
            "attempts \(attempts), delayed \(delayed), faults \(faults), answers \(answers), passed through \(passedThrough)"
        }
    }

    private struct State {
        var generator: ChaosGenerator
        var enabled = true
        var counts = Counts()
    }

    /// What one attempt in scope drew.
    private struct Draw {
        var delay: Bool
        var fault: Bool
        var answer: Bool
    }

    private let wrapped: any HTTPTransport
    private let fault: Fault?
    private let latency: Latency?
    private let answer: Answer?
    private let clock: any Clock<Duration>
    private let scope: @Sendable (HTTPRequest) -> Bool
    private let state: Locked<State>
    /// Answers injected replies as the mock does (it records nothing: only its `send` does).
    private let answerer: MockTransport

    /// Wraps a transport.
    /// - Parameters:
    ///   - wrapped: The transport that sends: a real one or a ``MockTransport``.
    ///   - seed: The seed of the generator that decides each attempt's chaos.
    ///   - fault: Faults to inject, or `nil` for none.
    ///   - latency: Latency to inject, or `nil` for none.
    ///   - answer: An answer to inject, or `nil` for none.
    ///   - clock: The clock latency waits on; tests pass an ``ImmediateClock`` or a ``ManualClock``.
    ///   - scope: Which requests chaos touches (a host, a path); every request by default.
    public init(
        wrapping wrapped: any HTTPTransport, seed: UInt64, fault: Fault? = nil, latency: Latency? = nil,
        answer: Answer? = nil, clock: any Clock<Duration> = ContinuousClock(),
        scope: @escaping @Sendable (HTTPRequest) -> Bool = { _ in true }
    ) {
        self.wrapped = wrapped
        self.fault = fault
        self.latency = latency
        self.answer = answer
        self.clock = clock
        self.scope = scope
        self.state = Locked(State(generator: ChaosGenerator(seed: seed)))
        self.answerer = MockTransport(clock: clock)
    }

    /// Whether chaos is on (it is at first). Off, every attempt goes straight through and takes
    /// no number from the generator. Safe to change from any task while requests run.
    public var isEnabled: Bool {
        get { state.withLock { $0.enabled } }
        set { state.withLock { $0.enabled = newValue } }
    }

    /// What the transport did so far.
    public var counts: Counts { state.withLock { $0.counts } }

    /// The wrapped transport's (an injected wait ends with `CancellationError` when cancelled).
    public var honorsCancellation: Bool { wrapped.honorsCancellation }

    /// Sends one attempt, with the chaos it draws.
    /// - Parameters:
    ///   - request: The attempt.
    ///   - transfer: Where the response body goes and who hears of progress.
    /// - Returns: The injected answer, or the wrapped transport's response.
    /// - Throws: The injected fault, `CancellationError` during an injected wait, or what the
    ///   wrapped transport throws.
    public func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        let inScope = scope(request)
        let draw = state.withLock { state -> Draw? in
            state.counts.attempts += 1
            guard state.enabled, inScope else {
                state.counts.passedThrough += 1
                return nil
            }
            let draw = Draw(
                delay: state.generator.chance(latency?.rate ?? 0),
                fault: state.generator.chance(fault?.rate ?? 0),
                answer: state.generator.chance(answer?.rate ?? 0))
            if draw.delay { state.counts.delayed += 1 }
            if draw.fault {
                state.counts.faults += 1
            } else if draw.answer {
                state.counts.answers += 1
            } else {
                state.counts.passedThrough += 1
            }
            return draw
        }
        if let draw {
            if draw.delay, let latency { try await clock.sleep(for: latency.delay) }
            if draw.fault, let fault { throw fault.error }
            if draw.answer, let answer {
                return try await answerer.answer(answer.reply, to: request, transfer: transfer)
            }
        }
        return try await pass(request, transfer: transfer)
    }

    /// Hands the attempt to the wrapped transport: as it is to a streaming one; to a plain one the
    /// way the client does (the body stream read first, the response body handed over after).
    private func pass(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        if let streaming = wrapped as? any StreamingHTTPTransport {
            return try await streaming.send(request, transfer: transfer)
        }
        var buffered = request
        if let stream = request.bodyStream {
            var sent: Int64 = 0
            var bytes = Data()
            try await stream.forEachChunk { chunk in
                bytes.append(chunk)
                sent += Int64(chunk.count)
                transfer?.sent(sent, of: stream.length)
            }
            buffered.body = bytes
        }
        var response = try await wrapped.send(buffered)
        response.request = request
        guard let transfer else { return response }
        return try await transfer.deliver(response)
    }
}

/// A rate clamped to 0...1, NaN to 0.
private func clampedRate(_ rate: Double) -> Double {
    rate.isNaN ? 0 : min(max(rate, 0), 1)
}

/// SplitMix64 (Steele, Lea and Flood): small, fast, and the same numbers on every platform.
struct ChaosGenerator: Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Takes one number and says whether it falls under `rate`: a uniform value in [0, 1) with
    /// 53 bits, so a rate of 0 is never and 1 is always.
    mutating func chance(_ rate: Double) -> Bool {
        Double(next() >> 11) * 0x1.0p-53 < rate
    }
}
