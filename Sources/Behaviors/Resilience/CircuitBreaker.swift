public import ConveyorPipeline

/// The state of every origin's circuit, shared by the ``CircuitBreakerBehavior``s given it.
///
/// A circuit is **closed** while its origin answers: requests go through and their outcomes are
/// counted over a sampling window. When an attempt fails, at least ``Options/minimumThroughput``
/// attempts in the window have ended and at least ``Options/failureRatio`` of them failed (by the judgment
/// ``RetryBehavior`` retries on: a timeout, a failed connection, 408, 429 or a 5xx gateway
/// status), it **opens**: for ``Options/breakDuration`` every request to the origin fails at once
/// with ``NetworkError/circuitOpen``, sending nothing. Then it is **half-open**: up to
/// ``Options/probes`` requests go through at a time; the first that succeeds closes the circuit,
/// one that fails opens it for another break. An operator can hold a circuit open
/// (``isolate(_:)``) or close it (``close(_:)``).
///
/// ```swift
/// let breaker = CircuitBreaker()
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     CircuitBreakerBehavior(breaker)
/// }
/// if case .open = breaker.state(of: Origin(api)!) { showDegradedBanner() }
/// ```
public final class CircuitBreaker: Sendable {
    /// When a circuit opens and for how long.
    public struct Options: Sendable, Hashable {
        /// The part of the window's attempts that must fail to open the circuit: 0.5.
        public var failureRatio: Double
        /// The fewest attempts in the window before the ratio is judged at all: 20.
        public var minimumThroughput: Int
        /// How far back outcomes count: 10 s.
        public var samplingDuration: Duration
        /// How long an open circuit refuses requests before it probes: 5 s.
        public var breakDuration: Duration
        /// How many requests a half-open circuit lets through at a time: 1.
        public var probes: Int

        /// Creates options (out-of-range values are clamped: a ratio to 0.01…1, counts to at least
        /// 1, durations to at least 10 ms and at most a year).
        /// - Parameters:
        ///   - failureRatio: The failing part of the window's attempts that opens the circuit.
        ///   - minimumThroughput: The fewest attempts in the window before the ratio counts.
        ///   - samplingDuration: How far back outcomes count.
        ///   - breakDuration: How long an open circuit refuses requests.
        ///   - probes: How many requests a half-open circuit lets through at a time.
        public init(
            failureRatio: Double = 0.5, minimumThroughput: Int = 20, samplingDuration: Duration = .seconds(10),
            breakDuration: Duration = .seconds(5), probes: Int = 1
        ) {
            self.failureRatio = failureRatio.isNaN ? 1 : min(max(0.01, failureRatio), 1)
            self.minimumThroughput = max(1, minimumThroughput)
            self.samplingDuration = Self.clamp(samplingDuration)
            self.breakDuration = Self.clamp(breakDuration)
            self.probes = max(1, probes)
        }

        private static func clamp(_ duration: Duration) -> Duration {
            min(max(duration, .milliseconds(10)), .seconds(86_400 * 365))
        }
    }

    /// What a circuit does with the next request.
    public enum State: Sendable, Hashable {
        /// Requests go through; outcomes are counted.
        case closed
        /// Requests fail at once for this much longer.
        case open(remaining: Duration)
        /// A few requests go through to see whether the origin is back.
        case halfOpen
        /// Held open by ``isolate(_:)`` until ``close(_:)``.
        case isolated
    }

    /// When a circuit opens and for how long.
    public let options: Options
    /// The most origins kept: 1,024 (one not used for a sampling window is forgotten first).
    public let maxOrigins: Int
    let elapsed: any Stopwatch
    /// The options' durations in nanoseconds, the unit the circuits count in.
    let breakNanoseconds: Int64
    let slotNanoseconds: Int64
    /// The circuits by origin, and the last one looked up (most clients talk to one origin:
    /// comparing it is cheaper than hashing an origin).
    let circuits = Locked<OriginRecords<Circuit>>(OriginRecords())
    let onChange: (@Sendable (Origin, State) -> Void)?

    /// Creates a breaker with no open circuit.
    /// - Parameters:
    ///   - options: When a circuit opens and for how long.
    ///   - maxOrigins: The most origins kept.
    ///   - clock: The clock windows and breaks are measured on; tests inject a `ManualClock`.
    ///   - onChange: Told of every change of a circuit's state (opened, half-open, closed,
    ///     isolated), after it happened, outside the breaker's lock: for a log line or a metric.
    public init(
        options: Options = Options(), maxOrigins: Int = 1_024, clock: any Clock<Duration> = ContinuousClock(),
        onChange: (@Sendable (Origin, State) -> Void)? = nil
    ) {
        self.options = options
        self.maxOrigins = max(1, maxOrigins)
        self.elapsed = startStopwatch(on: clock)
        self.breakNanoseconds = options.breakDuration.nanoseconds
        self.slotNanoseconds = max(1, (options.samplingDuration / 10).nanoseconds)
        self.onChange = onChange
    }

    /// The state of `origin`'s circuit now.
    /// - Parameter origin: The origin.
    public func state(of origin: Origin) -> State {
        let now = elapsed.nanoseconds()
        return circuits.withLock { $0[origin]?.state(at: now) } ?? .closed
    }

    /// Holds `origin`'s circuit open until ``close(_:)``: every request to it fails at once with
    /// ``NetworkError/circuitOpen`` (an operator's switch for an upstream known to be down).
    /// - Parameter origin: The origin.
    public func isolate(_ origin: Origin) {
        change(origin) { $0.phase = .isolated }
    }

    /// Closes `origin`'s circuit and forgets its counts, whatever its state.
    /// - Parameter origin: The origin.
    public func close(_ origin: Origin) {
        change(origin) { $0.reset() }
    }

    private func change(_ origin: Origin, _ body: (Circuit) -> Void) {
        let now = elapsed.nanoseconds()
        let new: State = circuits.withLock { circuits in
            let circuit = circuits[origin] ?? Circuit(origin)
            body(circuit)
            circuits[origin] = circuit
            return circuit.state(at: now)
        }
        onChange?(origin, new)
    }

    /// Whether a request to `origin` may be sent now (as a probe when half-open), and the circuit
    /// its outcome is to be counted in.
    package func admit(_ origin: Origin) -> (Admission, Circuit) {
        // An origin always gives a circuit.
        admit(context: nil, origin: origin) ?? (.send(probe: false), Circuit(origin))
    }

    /// ``admit(_:)`` for the request of `context` (found by its client's scope, else its origin),
    /// or without one for `origin`; `nil` for a request with no origin.
    @inline(__always)
    func admit(context: RequestContext?, origin: Origin? = nil) -> (Admission, Circuit)? {
        var changed: State?
        let result: (Admission, Circuit)? = circuits.withLock { circuits in
            let circuit: Circuit
            switch circuits.find(context: context, origin: origin) {
            case .found(let found):
                circuit = found
            case .missing(let origin):
                if circuits.count >= maxOrigins { evict(&circuits, now: elapsed.nanoseconds()) }
                circuit = Circuit(origin)
                circuit.lastUsed = elapsed.nanoseconds()
                circuits.insert(circuit, for: origin, context: context)
            case .noOrigin:
                return nil
            }
            // A closed circuit lets the request through without the time: its use is noted when
            // its outcome is counted.
            if case .closed = circuit.phase { return (.send(probe: false), circuit) }
            return (circuit.admit(at: elapsed.nanoseconds(), breaker: self, changed: &changed), circuit)
        }
        if let changed, let result { onChange?(result.1.origin, changed) }
        return result
    }

    /// Counts the outcome of a request ``admit(_:)`` let through, in the circuit it returned.
    package func record(_ outcome: Outcome, probe: Bool, in circuit: Circuit) {
        let now = elapsed.nanoseconds()
        var changed: State?
        circuits.withLock { _ in circuit.record(outcome, probe: probe, at: now, breaker: self, changed: &changed) }
        if let changed { onChange?(circuit.origin, changed) }
    }

    /// Counts an outcome for `origin` (tests: an admission and its outcome in two calls).
    package func record(_ origin: Origin, _ outcome: Outcome, probe: Bool) {
        guard let circuit = circuits.withLock({ $0[origin] }) else { return }
        record(outcome, probe: probe, in: circuit)
    }

    /// Makes room for one circuit: closed ones idle for a window go; if none did, the one idle
    /// longest that is not open.
    private func evict(_ circuits: inout OriginRecords<Circuit>, now: Int64) {
        let window = slotNanoseconds * 10
        var oldest: (Origin, Int64)?
        for (origin, circuit) in circuits.all where circuit.phase == .closed && circuit.inFlightProbes == 0 {
            if now - circuit.lastUsed >= window {
                circuits[origin] = nil
            } else if oldest.map({ circuit.lastUsed < $0.1 }) ?? true {
                oldest = (origin, circuit.lastUsed)
            }
        }
        if circuits.count >= maxOrigins, let (origin, _) = oldest { circuits[origin] = nil }
        if circuits.count >= maxOrigins, let any = circuits.all.keys.first { circuits[any] = nil }
    }

    /// What ``admit(_:)`` decided.
    package enum Admission: Equatable {
        /// Send it; `probe` when the circuit is half-open (its outcome decides the circuit).
        case send(probe: Bool)
        /// Fail it at once: the circuit lets requests through again after this long.
        case refuse(retryAfter: Duration)
    }

    /// How a request the breaker let through ended.
    package enum Outcome {
        /// The origin answered (whatever the status, unless it is one of the failures).
        case success
        /// The origin or the way to it failed.
        case failure
        /// It ended without an answer that says anything about the origin (cancelled).
        case abandoned
    }

    /// One origin's circuit. Its fields are read and written only under the breaker's lock.
    package final class Circuit: @unchecked Sendable {
        // @unchecked: every field is only touched under the owning breaker's `circuits` lock.
        enum Phase: Equatable {
            case closed
            case open(until: Int64)
            case halfOpen
            case isolated
        }

        /// The origin whose circuit this is.
        let origin: Origin
        /// `origin.description`, made once: a refusal names it, and formatting it per refused
        /// request cost the failing-fast path 700 instructions.
        let originText: String
        /// The mutable fields, in storage of their own (see ``LockedFields``).
        private let fields = LockedFields(Fields())
        struct Fields {
            var phase = Phase.closed
            /// Outcomes in the sampling window, in ten slots: (slot index, attempts, failures).
            var slots = [(index: Int64, attempts: Int, failures: Int)](repeating: (-1, 0, 0), count: 10)
            var inFlightProbes = 0
            var lastUsed: Int64 = 0
        }
        var phase: Phase {
            get { fields.pointer.pointee.phase }
            _modify { yield &fields.pointer.pointee.phase }
        }
        var slots: [(index: Int64, attempts: Int, failures: Int)] {
            get { fields.pointer.pointee.slots }
            _modify { yield &fields.pointer.pointee.slots }
        }
        var inFlightProbes: Int {
            get { fields.pointer.pointee.inFlightProbes }
            _modify { yield &fields.pointer.pointee.inFlightProbes }
        }
        var lastUsed: Int64 {
            get { fields.pointer.pointee.lastUsed }
            _modify { yield &fields.pointer.pointee.lastUsed }
        }

        init(_ origin: Origin) {
            self.origin = origin
            self.originText = origin.description
        }

        func reset() {
            phase = .closed
            slots = [(index: Int64, attempts: Int, failures: Int)](repeating: (-1, 0, 0), count: 10)
            inFlightProbes = 0
        }

        func state(at now: Int64) -> State {
            switch phase {
            case .closed: .closed
            case .open(let until): now < until ? .open(remaining: .nanoseconds(until - now)) : .halfOpen
            case .halfOpen: .halfOpen
            case .isolated: .isolated
            }
        }

        func admit(at now: Int64, breaker: CircuitBreaker, changed: inout State?) -> Admission {
            lastUsed = max(lastUsed, now)
            switch phase {
            case .closed:
                return .send(probe: false)
            case .isolated:
                return .refuse(retryAfter: .zero)
            case .open(let until):
                if now < until { return .refuse(retryAfter: .nanoseconds(until - now)) }
                phase = .halfOpen
                changed = .halfOpen
                inFlightProbes = 0
                fallthrough
            case .halfOpen:
                guard inFlightProbes < breaker.options.probes else { return .refuse(retryAfter: .zero) }
                inFlightProbes += 1
                return .send(probe: true)
            }
        }

        func record(_ outcome: Outcome, probe: Bool, at now: Int64, breaker: CircuitBreaker, changed: inout State?) {
            lastUsed = max(lastUsed, now)
            if probe {
                inFlightProbes = max(0, inFlightProbes - 1)
                guard phase == .halfOpen else { return }  // an operator changed it meanwhile
                switch outcome {
                case .success:
                    reset()
                    changed = .closed
                case .failure:
                    phase = .open(until: now + breaker.breakNanoseconds)
                    changed = .open(remaining: .nanoseconds(breaker.breakNanoseconds))
                case .abandoned:
                    break
                }
                return
            }
            guard phase == .closed, outcome != .abandoned else { return }
            let slot = now / breaker.slotNanoseconds
            let position = Int(slot % 10)
            if slots[position].index != slot { slots[position] = (slot, 0, 0) }
            slots[position].attempts += 1
            if outcome == .failure { slots[position].failures += 1 }
            guard outcome == .failure else { return }  // only a failure can open a circuit
            var attempts = 0
            var failures = 0
            for entry in slots where entry.index >= 0 && slot - entry.index < 10 {
                attempts += entry.attempts
                failures += entry.failures
            }
            let options = breaker.options
            if attempts >= options.minimumThroughput && Double(failures) >= options.failureRatio * Double(attempts) {
                phase = .open(until: now + breaker.breakNanoseconds)
                slots = [(index: Int64, attempts: Int, failures: Int)](repeating: (-1, 0, 0), count: 10)
                changed = .open(remaining: .nanoseconds(breaker.breakNanoseconds))
            }
        }
    }
}

/// Fails requests to an origin at once while its ``CircuitBreaker`` circuit is open, and counts
/// the outcome of every attempt it lets through.
///
/// Put it **last** in the chain, after a cache, de-duplication and ``RetryBehavior``, so that it
/// counts what the upstream said and each retry is judged (and refused) on its own. A refused
/// attempt fails with ``NetworkError/circuitOpen``, which no ``RetryBehavior`` retries; a
/// cancelled attempt (the caller left) counts neither way; an attempt its timeout ended counts as
/// a failure. The origin is the request's as the caller made it.
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     RetryBehavior()
///     CircuitBreakerBehavior()
/// }
/// ```
public struct CircuitBreakerBehavior: AttemptIntercepting, AttemptGating {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String
    /// The circuits this behavior reads and counts in.
    public let breaker: CircuitBreaker
    /// What counts as a failure: ``RetryPolicy/retryableStatuses`` and transport failures.
    let policy: RetryPolicy

    /// Creates the behavior.
    /// - Parameters:
    ///   - breaker: The circuits; pass one instance to several clients to share them.
    ///   - policy: Whose ``RetryPolicy/retryableStatuses`` count as failures (the same statuses
    ///     ``RetryBehavior`` retries); the default policy's by default.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions.
    public init(_ breaker: CircuitBreaker = CircuitBreaker(), policy: RetryPolicy = RetryPolicy(), name: String? = nil) {
        self.name = name ?? String(describing: Self.self)
        self.breaker = breaker
        self.policy = policy
    }

    /// The engine runs this behavior at the transport's door (a gate), next to the transport.
    public static var _declaredHooks: UInt16 { HookBits.gates | HookBits.intercept }

    /// Refuses the attempt while the circuit is open; otherwise sends it and counts its outcome.
    /// (The engine does the same without calling this: a client's chain admits and counts each
    /// exchange at the transport's door.)
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await exchange(request, context: context, next: next)
    }

    package func admit(_ request: HTTPRequest, context: RequestContext) throws(NetworkError) -> GatePass {
        guard let (admission, circuit) = breaker.admit(context: context)
        else { return .uncounted }
        switch admission {
        case .send(let probe): return GatePass(record: circuit, flag: probe)
        case .refuse(let wait): throw .circuitOpen(origin: circuit.originText, retryAfter: wait)
        }
    }

    package func waitForTurn(_ pass: GatePass, context: RequestContext) async throws(NetworkError) -> GatePass { pass }

    package func release(_ pass: GatePass, answered response: HTTPResponse, context: RequestContext) {
        guard let circuit = pass.record as? CircuitBreaker.Circuit else { return }
        let failed = policy.isUpstreamFailure(nil, status: response.status)
        breaker.record(failed ? .failure : .success, probe: pass.flag, in: circuit)
    }

    package func release(_ pass: GatePass, failed failure: NetworkError, context: RequestContext) {
        guard let circuit = pass.record as? CircuitBreaker.Circuit else { return }
        let failed = policy.upstreamFailed(failure) { context.attemptDeadlineHasPassed } ?? false
        breaker.record(failed ? .failure : .abandoned, probe: pass.flag, in: circuit)
    }
}
