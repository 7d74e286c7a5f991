import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

/// Calls to a database that each end within `timeout`: what ``PostgresCacheStorage`` and
/// ``PostgresTokenStore`` send goes through one of these, so a database that is down, slow or
/// gone costs their caller at most `timeout`, and after a failure nothing at all for a cool-down.
///
/// - Every call ends within `timeout` (on `clock`), everything its body does included: its value,
///   or `nil` (or what the body kept) when the database failed or did not answer in time.
/// - A call that runs out of time closes its connection (PostgresNIO does not abandon a running
///   query; the pool opens another), so a database that never answers (a network partition)
///   holds no place after the timeout.
/// - After a failure the database is left alone for ``cooldown`` (four times `timeout`, at least
///   a second): calls return `nil` at once. One warning is logged per failure (not per call), and
///   one notice when the database answers again.
/// - At most ``maxWaiting`` calls wait on the database at once, and at most ``maxAbandoned``
///   calls that ran out of time may be still ending; more calls return `nil` at once.
/// - `prepare` (creating the schema) runs on the connection of the first call, once it
///   succeeded never again (``prepareIfNeeded(on:)``, ``prepare(on:)``).
final class BoundedCalls: Sendable {
    /// What the logs say when the database fails and when it answers again; the metadata's keys
    /// are `namespace` followed by `.table`, `.operation`, `.reason` and `.cooldown`.
    struct Messages: Sendable {
        /// The warning when the database stops answering: what is unavailable and what that
        /// means for the caller until the cool-down has passed.
        let unavailable: String
        /// The notice when it answers again.
        let answersAgain: String
        /// The metadata keys' prefix (`cache`, `tokens`).
        let namespace: String
        /// The table's name, for the metadata.
        let table: String
    }

    /// What a call's body gets: the connection it runs on and the time left before its deadline.
    struct Session<T: Sendable>: Sendable {
        let connection: PostgresConnection
        let remaining: @Sendable () -> Duration
        fileprivate let race: Race<T>

        /// The call's answer should its remaining statements fail or run out of time.
        func keep(_ value: T) { race.keep(value) }
    }

    /// The most calls that may wait on the database at once.
    static let maxWaiting = 64
    /// The most calls that ran out of time and are still ending: waiting for a connection of the
    /// pool (they end as soon as the pool answers their cancellation), or on a connection whose
    /// closing has not finished; at this many, calls return `nil` at once.
    static let maxAbandoned = 64

    /// How long one call may take.
    let timeout: Duration

    private let client: PostgresClient
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let messages: Messages
    private let prepare: @Sendable (PostgresConnection) async throws -> Void
    private let state = NIOLockedValueBox(State())

    private struct State {
        var prepared = false
        var waiting = 0
        var abandoned = 0
        /// No call reaches the database before this instant of `clock` (after a failure).
        var coolingUntil: (any InstantProtocol)?
        var failing = false
    }

    /// Calls to the database of `client`; nothing is sent until the first call.
    /// - Parameters:
    ///   - client: The database's client.
    ///   - timeout: How long one call may take.
    ///   - clock: The clock `timeout` and the cool-down are measured on.
    ///   - logger: Where failures and recoveries are logged (with `messages`).
    ///   - messages: What the logs say.
    ///   - prepare: Creates what the calls need (the schema), on the first call's connection; run
    ///     again by the next call until it succeeds. It must not hold the calls' owner strongly.
    init(
        client: PostgresClient, timeout: Duration, clock: any Clock<Duration>, logger: Logger, messages: Messages,
        prepare: @escaping @Sendable (PostgresConnection) async throws -> Void
    ) {
        self.client = client
        self.timeout = timeout
        self.clock = clock
        self.logger = logger
        self.messages = messages
        self.prepare = prepare
    }

    /// Runs `body` on a connection of the pool within `timeout`, one deadline for everything the
    /// body does: its value, or `nil` (or what the body kept) when the database failed, did not
    /// answer in time, is cooling down after a failure, or already has ``maxWaiting`` calls
    /// waiting. A call that runs out of time closes its connection (a query PostgresNIO would not
    /// abandon otherwise; the pool opens another) and frees its place at once; at most
    /// ``maxAbandoned`` such calls may be still ending. A caller that is cancelled gets the same
    /// at once (nothing logged, no cool-down). Never throws, never waits longer than `timeout`.
    /// - Parameter operation: What the call does, for the warning (`lookup`, `store`, …).
    func run<T: Sendable>(
        _ operation: String, _ body: @escaping @Sendable (Session<T>) async throws -> T
    ) async -> T? {
        let admitted: Bool = state.withLockedValue { state in
            if let until = state.coolingUntil {
                guard clock.hasPassed(until) else { return false }
                state.coolingUntil = nil
            }
            guard state.waiting < Self.maxWaiting, state.abandoned < Self.maxAbandoned else { return false }
            state.waiting += 1
            return true
        }
        guard admitted else { return nil }
        let deadline = clock.deadline(after: timeout)
        let call = Call()
        let race = Race<T>()
        let remaining: @Sendable () -> Duration = { [clock] in clock.remaining(until: deadline) }
        let work = Task {
            do {
                let value = try await self.leased(body, call: call, race: race, remaining: remaining)
                race.finish(.value(value))
            } catch {
                race.finish(.failed(error))
            }
            let ending = call.end()
            self.state.withLockedValue { state in
                if !ending.abandoned {
                    state.waiting -= 1
                } else if ending.counted {
                    state.abandoned -= 1
                }
            }
        }
        let timer = Task { [clock] in
            try? await clock.sleep(untilInstant: deadline)
            race.finish(.timedOut)
        }
        let outcome = await withTaskCancellationHandler {
            await race.outcome()
        } onCancel: {
            race.finish(.cancelled)
        }
        timer.cancel()
        let kept = outcome.1
        switch outcome.0 {
        case .value(let value):
            recovered()
            return value
        case .failed(let error):
            failed(operation, reason: Self.describe(error))
        case .timedOut:
            abandon(work, call)
            failed(operation, reason: "no answer within \(timeout)")
        case .cancelled:
            abandon(work, call)
        }
        return kept
    }

    /// Runs `prepare` on the connection unless it succeeded before.
    func prepareIfNeeded(on connection: PostgresConnection) async throws {
        guard !state.withLockedValue({ $0.prepared }) else { return }
        try await prepare(on: connection)
    }

    /// Runs `prepare` on the connection (again, if it succeeded before); once it succeeds, calls
    /// no longer run it.
    func prepare(on connection: PostgresConnection) async throws {
        try await prepare(connection)
        state.withLockedValue { $0.prepared = true }
    }

    /// The body of a call on a leased connection, which the call can close.
    private func leased<T: Sendable>(
        _ body: @Sendable (Session<T>) async throws -> T, call: Call, race: Race<T>,
        remaining: @escaping @Sendable () -> Duration
    ) async throws -> T {
        let lease = Lease(client: client)
        return try await lease.run { connection in
            try call.attach(connection)
            defer { call.detach() }
            try await self.prepareIfNeeded(on: connection)
            return try await body(Session(connection: connection, remaining: remaining, race: race))
        }
    }

    /// Gives up a call that is still running: its place is free at once; it counts among the
    /// abandoned until it ends or its connection has closed, whichever comes first. Closing the
    /// connection ends the call at once in nearly every run; but a query PostgresNIO (1.33.2)
    /// writes to a connection whose closing is under way can wait forever (seen in
    /// `SharedCachePartitionTests`, about 1 run in 5), and such a call holds nothing of the
    /// database any more: its connection is closed and the pool has dropped it.
    private func abandon(_ work: Task<Void, Never>, _ call: Call) {
        work.cancel()
        let (counted, closing) = call.abandon()
        if counted {
            state.withLockedValue { state in
                state.waiting -= 1
                state.abandoned += 1
            }
        }
        closing?.whenComplete { [state] _ in
            if call.closed() { state.withLockedValue { $0.abandoned -= 1 } }
        }
    }

    /// How many calls wait on the database now, and how many ran out of time and have not ended
    /// (for the tests: a call that ran out of time must end at once, its place free).
    var load: (waiting: Int, abandoned: Int) { state.withLockedValue { ($0.waiting, $0.abandoned) } }

    /// After a failure the database is left alone for this long: four timeouts, at least a second.
    var cooldown: Duration { max(timeout * 4, .seconds(1)) }

    private func failed(_ operation: String, reason: String) {
        let cooldown = cooldown
        // Calls that were waiting when the database went away fail together: one line for them.
        let first: Bool = state.withLockedValue { state in
            defer {
                state.coolingUntil = clock.deadline(after: cooldown)
                state.failing = true
            }
            return state.coolingUntil == nil
        }
        guard first else { return }
        let namespace = messages.namespace
        logger.warning(
            "\(messages.unavailable)",
            metadata: [
                "\(namespace).table": "\(messages.table)", "\(namespace).operation": "\(operation)",
                "\(namespace).reason": "\(reason)", "\(namespace).cooldown": "\(cooldown)",
            ])
    }

    private func recovered() {
        let wasFailing = state.withLockedValue { state in
            defer { state.failing = false }
            return state.failing
        }
        if wasFailing {
            logger.notice("\(messages.answersAgain)", metadata: ["\(messages.namespace).table": "\(messages.table)"])
        }
    }

    /// What an error says, without anything of the query: PostgresNIO's errors describe only
    /// their kind (details need `String(reflecting:)`, which is never used here).
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            var text = "PostgreSQL: \(error.code)"
            if let state = error.serverInfo?[.sqlState] { text += " (SQLSTATE \(state))" }
            return text
        }
        return "\(type(of: error))"
    }
}

extension Clock {
    func deadline(after duration: Duration) -> any InstantProtocol where Duration == Swift.Duration {
        now.advanced(by: duration)
    }

    func hasPassed(_ instant: any InstantProtocol) -> Bool where Duration == Swift.Duration {
        guard let instant = instant as? Instant else { return true }
        return now >= instant
    }

    func remaining(until instant: any InstantProtocol) -> Swift.Duration where Duration == Swift.Duration {
        guard let instant = instant as? Instant else { return .zero }
        return max(.zero, now.duration(to: instant))
    }

    fileprivate func sleep(untilInstant instant: any InstantProtocol) async throws where Duration == Swift.Duration {
        guard let instant = instant as? Instant else { return }
        try await sleep(until: instant, tolerance: nil)
    }
}

/// The first of a call's endings (its value or error, the timeout, the caller's cancellation),
/// delivered once to the one waiter, with the value the call kept should it end otherwise.
private final class Race<T: Sendable>: Sendable {
    enum Ending: Sendable {
        case value(T)
        case failed(any Error)
        case timedOut
        case cancelled
    }

    private struct State {
        var ending: Ending?
        var kept: T?
        var waiter: CheckedContinuation<(Ending, T?), Never>?
    }

    private let state = NIOLockedValueBox(State())

    func keep(_ value: T) { state.withLockedValue { $0.kept = value } }

    func finish(_ ending: Ending) {
        let (waiter, kept): (CheckedContinuation<(Ending, T?), Never>?, T?) = state.withLockedValue { state in
            guard state.ending == nil else { return (nil, nil) }
            state.ending = ending
            defer { state.waiter = nil }
            return (state.waiter, state.kept)
        }
        waiter?.resume(returning: (ending, kept))
    }

    func outcome() async -> (Ending, T?) {
        await withCheckedContinuation { continuation in
            let ready: (Ending, T?)? = state.withLockedValue { state in
                if let ending = state.ending { return (ending, state.kept) }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// `PostgresClient.withConnection` for a body of a generic result (one place for the call).
private struct Lease {
    let client: PostgresClient

    func run<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await client.withConnection { connection in try await body(connection) }
    }
}

/// One call's hold on a connection, so that a call that ran out of time can close it.
private final class Call: Sendable {
    private struct State {
        var connection: PostgresConnection?
        var abandoned = false
        var ended = false
        /// Whether the call counts among the abandoned calls.
        var counted = false
    }

    private let state = NIOLockedValueBox(State())

    /// The call got its connection; throws when the call was abandoned before.
    func attach(_ connection: PostgresConnection) throws {
        let abandoned = state.withLockedValue { state in
            if !state.abandoned { state.connection = connection }
            return state.abandoned
        }
        if abandoned { throw CancellationError() }
    }

    func detach() { state.withLockedValue { $0.connection = nil } }

    /// Gives the call up and closes its connection. Returns whether the call was still running
    /// (it now counts among the abandoned, until ``end()`` or ``closed()`` says otherwise) and
    /// the closing of its connection, if it had one.
    func abandon() -> (counted: Bool, closing: EventLoopFuture<Void>?) {
        let (connection, counted) = state.withLockedValue { state in
            state.abandoned = true
            state.counted = !state.ended
            defer { state.connection = nil }
            return (state.connection, state.counted)
        }
        // Closing fails the query that waits on it (PostgresNIO does not cancel a running query);
        // the pool replaces the connection. At once, before the call's lease can hand the
        // connection to another call.
        return (counted, connection?.close())
    }

    /// The call ended. Returns whether it had been abandoned, and whether it still counted among
    /// the abandoned (it no longer does).
    func end() -> (abandoned: Bool, counted: Bool) {
        state.withLockedValue { state in
            state.ended = true
            defer { state.counted = false }
            return (state.abandoned, state.counted)
        }
    }

    /// The abandoned call's connection has closed; returns whether the call still counted among
    /// the abandoned (it no longer does).
    func closed() -> Bool {
        state.withLockedValue { state in
            defer { state.counted = false }
            return state.counted
        }
    }
}
