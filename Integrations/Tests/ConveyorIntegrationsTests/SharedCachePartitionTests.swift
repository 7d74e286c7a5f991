import Conveyor
import ConveyorTesting
import Foundation
import InMemoryLogging
import IntegrationsTestSupport
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@testable import ConveyorPostgres

extension FleetLoadTests {
/// `PostgresCacheStorage` across a network partition: the storage reaches the real PostgreSQL
/// through `Tests/Server/partition_proxy.py`, which the test cuts (no byte goes through, no
/// socket is closed: the database never answers and TCP never says so) and heals.
///
/// The storage's deadlines and cool-down are on a `ManualClock`: the test moves it to the
/// timeout and past the cool-down instead of waiting for them. What is real network waiting (the
/// calls ending once their deadline came, the pool connecting again after the heal) is measured
/// on `ContinuousClock` against ``margin``.
@Suite(.timeLimit(.minutes(2))) struct SharedCachePartitionTests {
    /// The scheduling margin every real-time bound allows: generous for a shared 2-core machine
    /// (the steps it bounds take milliseconds); a step that hangs fails at it, not at the suite's
    /// time limit.
    static let margin = Duration.seconds(2)

    /// How many calls each storm makes at once: more than the 64 that may wait.
    static let stormSize = 100

    @Test func aPartitionCostsMissesWithinTheTimeoutAndTheCacheAnswersAgainAfterTheCoolDown() async throws {
        let server = try await TestPostgres.shared()
        let proxy = try await PartitionProxy.start(to: server)
        defer { proxy.stop() }
        var configuration = SharedCacheTests.configuration(server, port: proxy.port)
        // As Docs/Caching.md asks: a connection attempt made into the partition (accepted, never
        // answered) gives up with the storage's timeout, not PostgresNIO's default 10 s, during
        // which it holds one of the pool's places (1 run in 6 with the default: the pool had no
        // place left for a connection after the heal, and the first lookup waited past the margin).
        configuration.options.connectTimeout = .milliseconds(250)
        let database = PostgresClient(configuration: configuration, backgroundLogger: SharedCacheTests.quiet)
        let runner = Task { await database.run() }
        defer { runner.cancel() }
        let clock = ManualClock()
        let logs = InMemoryLogHandler()
        // The default timeout (250 ms) and cool-down (1 s), on the manual clock.
        let storage = try PostgresCacheStorage(
            client: database, table: SharedCacheTests.uniqueTable(), logger: Logger(label: "cache") { _ in logs },
            clock: clock)
        #expect(storage.timeout == .milliseconds(250) && storage.cooldown == .seconds(1))
        let entry = try await SharedCacheTests.sampleEntry()
        let keys = (0..<8).map { "https://api.test/partition/\($0)" }

        // (a) Healed: stored entries are hits (eight at once, so the pool holds several
        // connections when the partition comes).
        try await storage.prepare()
        try await Self.within("the stores and lookups before the partition") {
            await withTaskGroup(of: Void.self) { group in
                for key in keys { group.addTask { await storage.store(entry, for: key) } }
            }
            let found = await withTaskGroup(of: Bool.self) { group in
                for key in keys { group.addTask { await storage.entry(for: key) != nil } }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(found == keys.count)
        }

        // (b) Partitioned: of 100 calls at once, 64 wait and end at their deadline, the 36 past
        // 64 end at once; every lookup is a miss, and every call that ran out of time has ended
        // or its connection has closed, so no place stays taken.
        try await proxy.partition()
        let first = try await Self.storm(storage, clock: clock, keys: keys, entry: entry)
        #expect(first.hits == 0)
        #expect(logs.entries.filter { $0.level == .warning }.count == 1)

        // (c) Still partitioned. During the cool-down, calls are misses without waiting at all;
        // after it, 64 calls wait again (the places were freed, not held until TCP gives up) and
        // end at their deadline. The proxy heals while they wait: the database answers again.
        for key in keys { #expect(await storage.entry(for: key) == nil) }
        #expect(clock.sleeperCount == 0 && storage.load == (0, 0))
        clock.advance(by: storage.cooldown)
        let second = try await Self.storm(storage, clock: clock, keys: keys, entry: entry) {
            try await proxy.heal()
        }

        // (d) Healed since the second storm began: a timeout (that storm's) and a cool-down after
        // the heal, on the storage's clock, the cache answers hits again.
        clock.advance(by: storage.cooldown)
        let started = ContinuousClock.now
        let found = try await Self.within("the first lookup after the heal") {
            await storage.entry(for: keys[0]) != nil
        }
        let elapsed = started.duration(to: .now)
        #expect(found, "\(logs.entries.map { "\($0.message) \($0.metadata)" })")
        #expect(await storage.entry(for: keys[1]) != nil)
        // One notice says the database answers again (two if a call of the second storm got an
        // answer between the heal and its deadline).
        #expect((1...2).contains(logs.entries.filter { $0.level == .notice }.count))
        let connections = try await proxy.connections()
        print(
            """
            partition: storm 1 ended \(first.ended) and freed its places \(first.freed) after its deadline, \
            storm 2 \(second.ended) and \(second.freed) (\(second.hits) hits); first hit after the heal and cool-down in \(elapsed); \
            the proxy accepted \(connections.accepted) connections and cut \(connections.cut)
            """)
    }

    // MARK: - Helpers

    /// What a storm measured: real time from its deadline on the clock until its calls returned
    /// and until their places were free, and the hits it got.
    struct Storm {
        let ended: Duration
        let freed: Duration
        let hits: Int
    }

    /// ``stormSize`` calls at once (lookups of `keys` and stores, alternately) on a database that
    /// does not answer: checks that 64 wait, each with its deadline on `clock`, and the others
    /// end at once; runs `whileWaiting`; moves the clock to the deadline; and checks that every
    /// call returns and every place is free within ``margin``.
    static func storm(
        _ storage: PostgresCacheStorage, clock: ManualClock, keys: [String], entry: CachedResponse,
        whileWaiting: () async throws -> Void = {}
    ) async throws -> Storm {
        let finished = NIOLockedValueBox(0)
        let hits = NIOLockedValueBox(0)
        let calls = Task {
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<Self.stormSize {
                    group.addTask {
                        if index.isMultiple(of: 2) {
                            if await storage.entry(for: keys[index / 2 % keys.count]) != nil {
                                hits.withLockedValue { $0 += 1 }
                            }
                        } else {
                            await storage.store(entry, for: "https://api.test/partition/new/\(index)")
                        }
                        finished.withLockedValue { $0 += 1 }
                    }
                }
            }
        }
        let waiting = PostgresCacheStorage.maxWaiting
        try await within("\(waiting) calls waiting on the database") { await clock.waitForSleepers(waiting) }
        try await until("the \(Self.stormSize - waiting) calls past \(waiting) to end") {
            finished.withLockedValue { $0 } == Self.stormSize - waiting
        }
        #expect(clock.sleeperCount == waiting && storage.load == (waiting, 0))
        try await whileWaiting()
        let deadline = ContinuousClock.now
        clock.advance(by: storage.timeout)
        try await within("the calls at their deadline") { await calls.value }
        let ended = deadline.duration(to: .now)
        try await until("the calls that ran out of time to end or their connections to close: \(storage.load)") {
            storage.load == (0, 0)
        }
        let freed = deadline.duration(to: .now)
        #expect(finished.withLockedValue { $0 } == Self.stormSize)
        return Storm(ended: ended, freed: freed, hits: hits.withLockedValue { $0 })
    }

    /// Runs `body`, failing the test if it does not end within ``margin`` of real time.
    static func within<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async -> T) async throws -> T {
        let seconds = Int(margin.components.seconds)
        guard let value = await withinTimeLimit(seconds: seconds, body) else {
            Issue.record("\(what): not within \(margin)")
            throw CancellationError()
        }
        return value
    }

    /// Yields until `condition` holds, failing the test if it does not within ``margin`` of real
    /// time (a bound on an ending, measured, not a wait for time to pass).
    static func until(_ what: @autoclosure () -> String, _ condition: () -> Bool) async throws {
        let started = ContinuousClock.now
        while !condition() {
            guard started.duration(to: .now) < margin else {
                Issue.record("\(what()): not within \(margin)")
                throw CancellationError()
            }
            await Task.yield()
        }
    }
}
}

/// `Tests/Server/partition_proxy.py` in front of a database: ``partition()`` cuts every
/// connection without closing one (the database is silent, as across a network partition),
/// ``heal()`` lets new connections through again. It exits when ``stop()`` closes its stdin.
final class PartitionProxy: Sendable {
    /// The port the proxy listens on (127.0.0.1).
    let port: Int
    private let process: Process
    private let input: FileHandle
    private let lines: LineReader

    /// The script's path.
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Server/partition_proxy.py")

    private init(port: Int, process: Process, input: FileHandle, lines: LineReader) {
        self.port = port
        self.process = process
        self.input = input
        self.lines = lines
    }

    /// Starts a proxy to `server` and waits for its port.
    static func start(to server: TestPostgres) async throws -> PartitionProxy {
        let process = Process()
        let stdin = Pipe()
        let stdout = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path, "127.0.0.1", "\(server.port)"]
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        let lines = LineReader(stdout.fileHandleForReading)
        let first = await lines.next()
        let words = first?.split(separator: " ") ?? []
        guard words.count == 2, words[0] == "PORT", let port = Int(words[1]) else {
            process.terminate()
            throw TestPostgres.Unavailable(description: "partition_proxy.py printed \(first ?? "nothing")")
        }
        return PartitionProxy(port: port, process: process, input: stdin.fileHandleForWriting, lines: lines)
    }

    /// Cuts every connection, now and new; returns once it is in force.
    func partition() async throws { try await ask("partition", expecting: "PARTITIONED") }

    /// Lets new connections through again; returns once it is in force.
    func heal() async throws { try await ask("heal", expecting: "HEALED") }

    /// How many connections the proxy accepted, and how many of them it cut.
    func connections() async throws -> (accepted: Int, cut: Int) {
        try input.write(contentsOf: Data("count\n".utf8))
        let words = (await lines.next() ?? "").split(separator: " ")
        guard words.count == 3, words[0] == "CONNECTIONS", let accepted = Int(words[1]), let cut = Int(words[2]) else {
            throw TestPostgres.Unavailable(description: "partition_proxy.py did not answer count")
        }
        return (accepted, cut)
    }

    /// Ends the proxy (its stdin closes) and every connection through it.
    func stop() {
        try? input.close()
        process.waitUntilExit()
    }

    private func ask(_ command: String, expecting answer: String) async throws {
        try input.write(contentsOf: Data((command + "\n").utf8))
        let line = await lines.next()
        guard line == answer else {
            throw TestPostgres.Unavailable(
                description: "partition_proxy.py answered \(line ?? "nothing") to \(command)")
        }
    }

    /// The lines of a pipe, each read on a thread of its own (never one of Swift's cooperative
    /// pool, whose two threads the storage's calls need).
    final class LineReader: Sendable {
        private let handle: FileHandle
        private let buffer = NIOLockedValueBox(Data())

        init(_ handle: FileHandle) { self.handle = handle }

        /// The next line, or `nil` once the pipe has ended.
        func next() async -> String? {
            await withCheckedContinuation { continuation in
                Thread.detachNewThread { continuation.resume(returning: self.readLine()) }
            }
        }

        private func readLine() -> String? {
            while true {
                let line: String? = buffer.withLockedValue { buffer in
                    guard let end = buffer.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
                    defer { buffer.removeSubrange(buffer.startIndex...end) }
                    return String(decoding: buffer[buffer.startIndex..<end], as: UTF8.self)
                }
                if let line { return line }
                let chunk = handle.availableData
                if chunk.isEmpty { return nil }
                buffer.withLockedValue { $0.append(chunk) }
            }
        }
    }
}
