public import ConveyorPipeline

/// Hedges slow idempotent requests ("The Tail at Scale"; gRPC's hedging policy): when an attempt
/// has had no answer for the hedge delay, another attempt of the same request starts beside it;
/// the first acceptable answer wins and the others are cancelled.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     HedgingBehavior(delay: .percentile(0.95))
/// }
/// ```
///
/// - Only a request that can be sent twice at once is hedged: an idempotent method, or an
///   idempotency key (the rule ``RetryBehavior`` resends by), with no one-shot body stream and
///   no download or event stream (its body has one place to go). Other requests run as usual.
/// - Every hedge spends the client's retry budget (contract rule 19): a refused hedge is not
///   sent, and the attempts in flight go on. A hedge counts in the attempt cap like a retry.
/// - Each attempt runs its own per-attempt hooks (`additionalHeaders`, `modify`, `intercept`,
///   `validate`), balanced, with a view of the context of its own: the values one attempt's
///   hooks write are not seen by the others, and the request goes on with those of the attempt
///   whose answer it keeps. `beforeSend`, `afterSuccess` and `afterFailure` run once per request.
///   The attempts that lose end as cancelled attempts, never as the request's failure
///   (contract rule 20).
/// - A failed attempt does not start a hedge: the race waits for the attempts still in flight,
///   and when all have failed the retry decision takes the last failure, as after a lone attempt.
/// - Where several are in a chain, the last one hedges; a request's own replaces the client's.
///   Leave it out of a request with `.excluding(HedgingBehavior.self)`.
public struct HedgingBehavior: _RequestHookDeclaring, RequestHedging {
    /// How long an attempt may go unanswered before the next starts beside it.
    public struct Delay: Sendable, Hashable {
        enum Kind: Hashable {
            case fixed(Duration)
            case percentile(Double, initial: Duration, minimum: Duration)
        }
        let kind: Kind

        /// Always `delay` (clamped to 1 ms … 1 hour).
        /// - Parameter delay: The wait before each hedge.
        public static func fixed(_ delay: Duration) -> Delay {
            Delay(kind: .fixed(clamp(delay)))
        }

        /// The `percentile` of the origin's latest acceptable answers (up to the last 128), never
        /// below `minimum`; `initial` until 16 answers were seen. At 0.95, about one request in
        /// twenty is hedged while the origin answers as it did.
        /// - Parameters:
        ///   - percentile: Which percentile, 0.5…0.999 (clamped).
        ///   - initial: The delay before the origin has answered 16 times.
        ///   - minimum: The shortest delay, however fast the origin answers.
        public static func percentile(
            _ percentile: Double = 0.95, initial: Duration = .seconds(1), minimum: Duration = .milliseconds(5)
        ) -> Delay {
            let clamped = percentile.isNaN ? 0.95 : min(max(percentile, 0.5), 0.999)
            return Delay(kind: .percentile(clamped, initial: clamp(initial), minimum: clamp(minimum)))
        }

        private static func clamp(_ duration: Duration) -> Duration {
            min(max(duration, .milliseconds(1)), .seconds(3_600))
        }
    }

    /// The most attempts of one request in flight at once, the first included.
    public let maxAttempts: Int
    /// The wait before each hedge.
    public let delay: Delay
    private let latencies: LatencyWindows

    /// Creates a hedging behavior.
    /// - Parameters:
    ///   - maxAttempts: The most attempts in flight at once, the first included: 2 by default
    ///     (at least 2, at most 5).
    ///   - delay: The wait before each hedge: by default the origin's 95th-percentile latency.
    public init(maxAttempts: Int = 2, delay: Delay = .percentile()) {
        self.maxAttempts = min(max(2, maxAttempts), 5)
        self.delay = delay
        self.latencies = LatencyWindows()
    }

    /// The engine finds this behavior by this bit (it declares no hook of the hook protocols).
    public static var _declaredHooks: UInt16 { HookBits.hedges }

    package var hedgingLimit: Int { maxAttempts }

    package func mayHedge(_ request: HTTPRequest, context: RequestContext) -> Bool {
        IdempotencyKey.allowsResending(request, context: context)
    }

    package func hedgeDelay(for origin: Origin?) -> Duration {
        switch delay.kind {
        case .fixed(let delay): return delay
        case .percentile(let percentile, let initial, let minimum):
            guard let observed = latencies.percentile(percentile, of: origin) else { return initial }
            return max(observed, minimum)
        }
    }

    package func recordLatency(_ latency: Duration, origin: Origin?) {
        guard case .percentile = delay.kind else { return }
        latencies.record(latency, for: origin)
    }
}

/// The latest acceptable-answer latencies of each origin, for ``HedgingBehavior/Delay/percentile(_:initial:minimum:)``:
/// up to 128 per origin and 256 origins (the origin recorded least recently is forgotten first).
final class LatencyWindows: Sendable {
    static let capacity = 128
    static let seenBeforeUse = 16
    static let origins = 256

    private struct Window {
        var samples: [Duration] = []
        var next = 0
        var lastUse: UInt64 = 0
        /// The samples sorted, made again after every 8 records.
        var sorted: [Duration] = []
        var recordsSinceSort = 0
    }

    private struct State {
        var windows: [Origin?: Window] = [:]
        var tick: UInt64 = 0
    }

    private let state = Locked(State())

    func record(_ latency: Duration, for origin: Origin?) {
        state.withLock { state in
            state.tick += 1
            if state.windows[origin] == nil, state.windows.count >= Self.origins,
                let oldest = state.windows.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
            {
                state.windows[oldest] = nil
            }
            var window = state.windows[origin] ?? Window()
            state.windows[origin] = nil  // no copy while it changes
            window.lastUse = state.tick
            if window.samples.count < Self.capacity {
                window.samples.append(latency)
            } else {
                window.samples[window.next] = latency
            }
            window.next = (window.next + 1) % Self.capacity
            window.recordsSinceSort += 1
            if window.recordsSinceSort >= 8 || window.sorted.count < Self.seenBeforeUse {
                window.sorted = window.samples.sorted()
                window.recordsSinceSort = 0
            }
            state.windows[origin] = window
        }
    }

    /// The `percentile` of `origin`'s samples (nearest rank), or `nil` before 16 were seen.
    func percentile(_ percentile: Double, of origin: Origin?) -> Duration? {
        state.withLock { state in
            guard let sorted = state.windows[origin]?.sorted, sorted.count >= Self.seenBeforeUse else { return nil }
            let rank = Int((percentile * Double(sorted.count)).rounded(.up))
            return sorted[min(max(rank, 1), sorted.count) - 1]
        }
    }
}
