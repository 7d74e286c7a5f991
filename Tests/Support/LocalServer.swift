public import Foundation

/// Starts `Tests/Server/server.py` on 127.0.0.1 with a free port, for integration tests.
///
/// ```swift
/// try await LocalServer.withServer { server in
///     let client = NetworkClient(baseURL: server.baseURL)
///     …
/// }
/// ```
/// Each server is forked by one spawner process per test process (`server.py --spawner`): an
/// interpreter start with the script's imports costs about 0.1 s of CPU, and a test run starts
/// over a hundred servers. The spawner exits when the test process does (its stdin closes), and
/// every server it forked exits with it, so none outlives the tests.
public final class LocalServer: @unchecked Sendable {
    // @unchecked: `stopped` is only touched under `lock`.
    private let lock = NSLock()
    private let pid: Int32
    private var stopped = false

    /// The port the server listens on.
    public let port: Int

    /// `http://127.0.0.1:<port>`.
    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// A URL on the server.
    /// - Parameter pathAndQuery: For example `/echo?a=1`.
    public func url(_ pathAndQuery: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(pathAndQuery)")! }

    /// Why the server could not start.
    public struct StartError: Error, CustomStringConvertible {
        /// What went wrong, with the server's stderr.
        public let description: String
    }

    /// The Python 3 interpreter itself, found once: `python3` on `PATH` may be a version manager's
    /// shell script (pyenv's shims run a dozen processes each time), and the suite starts hundreds
    /// of servers. `/usr/bin/env python3` when the interpreter does not say where it is.
    private static let python: URL = {
        let fallback = URL(fileURLWithPath: "/usr/bin/env")
        let probe = Process()
        probe.executableURL = fallback
        probe.arguments = ["python3", "-c", "import sys; print(sys.executable)"]
        let output = Pipe()
        probe.standardOutput = output
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return fallback }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        probe.waitUntilExit()
        let path = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard probe.terminationStatus == 0, path.hasPrefix("/"), FileManager.default.isExecutableFile(atPath: path) else {
            return fallback
        }
        return URL(fileURLWithPath: path)
    }()

    /// The arguments before the script's: `python3` when the interpreter is found through `env`.
    private static var pythonArguments: [String] { python.path == "/usr/bin/env" ? ["python3"] : [] }

    /// Starts a server and waits (at most 30 s) for it to report its port.
    ///
    /// The wait suspends instead of blocking: many tests start servers at once on a 2-core
    /// machine, and a blocked thread of Swift's small cooperative pool would delay every other
    /// test's timers (a 300 ms timeout once fired after 10 s that way).
    /// - Throws: ``StartError`` when Python is missing or the server does not come up.
    public static func start() async throws -> LocalServer {
        let spawner = try Spawner.shared.get()
        let (port, pid) = try await spawner.start()
        return LocalServer(pid: pid, port: port)
    }

    private init(pid: Int32, port: Int) {
        self.pid = pid
        self.port = port
    }

    /// Stops the server (killed and reaped by the spawner). Returns at once. Safe to
    /// call more than once.
    public func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        if first, let spawner = try? Spawner.shared.get() { spawner.send("stop \(pid)") }
    }

    /// Stops the server and suspends until its process has exited (the port is closed then).
    public func stopAndWait() async {
        stop()
        await (try? Spawner.shared.get())?.sync()
    }

    deinit { stop() }

    /// The script's path.
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Server/server.py")

    /// The one `server.py --spawner` of this process. Its commands (`start`, `stop <pid>`, `sync`)
    /// and their answers go through one serial queue, in order, on a thread of its own (never
    /// one of Swift's cooperative pool).
    final class Spawner: @unchecked Sendable {
        // @unchecked: `input`, `output` and `buffer` are only used on `queue`.
        private let queue = DispatchQueue(label: "LocalServer.spawner")
        private let process = Process()
        private let input: FileHandle
        private let output: FileHandle
        /// The end of what the spawner and its servers wrote to stderr, for a failure's message.
        /// It is read all the time: a full pipe would stop every server that writes to it (a
        /// handler's traceback when a client hangs up early).
        private let errors = Locked(Data())
        private var buffer = Data()

        static let shared: Result<Spawner, StartError> = Result { () throws(StartError) in try Spawner() }

        private init() throws(StartError) {
            let stdin = Pipe()
            let stdout = Pipe()
            let stderr = Pipe()
            process.executableURL = LocalServer.python
            process.arguments = LocalServer.pythonArguments + [LocalServer.script.path, "--spawner"]
            process.standardInput = stdin
            process.standardOutput = stdout
            process.standardError = stderr
            do {
                try process.run()
            } catch {
                throw StartError(description: "could not run python3 \(LocalServer.script.path): \(error)")
            }
            input = stdin.fileHandleForWriting
            output = stdout.fileHandleForReading
            let errors = self.errors
            let reader = stderr.fileHandleForReading
            Thread.detachNewThread {
                while true {
                    let chunk = reader.availableData
                    if chunk.isEmpty { return }
                    errors.withLock { kept in
                        kept.append(chunk)
                        if kept.count > 16_384 { kept = Data(kept.suffix(8_192)) }
                    }
                }
            }
        }

        /// A new server's port and process id; fails after 30 s without them.
        func start() async throws(StartError) -> (port: Int, pid: Int32) {
            let result = await ask("start") { (line: String) -> (port: Int, pid: Int32)? in
                let words = line.split(separator: " ")
                guard words.count == 3, words[0] == "PORT", let port = Int(words[1]), let pid = Int32(words[2]) else { return nil }
                return (port, pid)
            }
            return try result.get()
        }

        /// Waits until every command sent before is done (a stopped server has exited).
        func sync() async {
            _ = await ask("sync") { $0 == "SYNC" ? () : nil }
        }

        /// Sends `command`, which has no answer.
        func send(_ command: String) {
            queue.async { self.write(command) }
        }

        /// Sends `command` and reads its one-line answer, which `parse` must accept, within 30 s.
        private func ask<T: Sendable>(_ command: String, _ parse: @escaping @Sendable (String) -> T?) async
            -> Result<T, StartError>
        {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, StartError>, Never>) in
                let once = Locked(false)
                let finish: @Sendable (Result<T, StartError>) -> Void = { value in
                    let first = once.withLock { resumed in
                        defer { resumed = true }
                        return !resumed
                    }
                    if first { continuation.resume(returning: value) }
                }
                queue.async {
                    self.write(command)
                    let line = self.readLine()
                    if let line, let value = parse(line) {
                        finish(.success(value))
                    } else {
                        let problem = String(decoding: self.errors.get(), as: UTF8.self)
                        finish(.failure(StartError(description: "the test server's spawner answered \(line.map { "\"\($0)\"" } ?? "nothing") to \(command). stderr: \(problem)")))
                    }
                }
                DispatchQueue.global().asyncAfter(deadline: .now() + 30) {
                    finish(.failure(StartError(description: "the test server's spawner did not answer \(command) within 30 s")))
                }
            }
        }

        private func write(_ command: String) {
            try? input.write(contentsOf: Data((command + "\n").utf8))
        }

        /// The next line of the spawner's output, or `nil` once it has ended.
        private func readLine() -> String? {
            while true {
                if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<end], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...end)
                    return line
                }
                let chunk = output.availableData
                if chunk.isEmpty { return nil }
                buffer.append(chunk)
            }
        }
    }

    /// Starts a server, runs `body` with it, and always stops it. At most ``ServerGate/limit``
    /// tests are inside at once (see ``ServerGate``).
    /// - Parameter body: The test code.
    /// - Returns: What `body` returns.
    public static func withServer<T>(_ body: (LocalServer) async throws -> T) async throws -> T {
        try await ServerGate.withPlace {
            let server = try await start()
            defer { server.stop() }
            return try await body(server)
        }
    }
}

extension LocalServer {
    /// ``withServer(_:)`` with ``MemoryGate``'s turn taken first, for a test that measures memory
    /// or moves large bodies: it takes no place (``ServerGate``) while it waits for the turn.
    /// - Parameter body: The test code.
    /// - Returns: What `body` returns.
    public static func withServerInMemoryTurn<T>(_ body: (LocalServer) async throws -> T) async throws -> T {
        try await MemoryGate.withTurn { try await withServer(body) }
    }
}

/// How many tests use the loopback servers at once. On Linux, FoundationNetworking spins a core
/// while a request waits on a connection it has just opened (Docs/Reliability.md), and the
/// more tests wait at once, the longer each waits and spins: with every test let in at once, a
/// run took 62–67 s and 103–108 s of CPU (36 s of it in the kernel); with four at a time (and
/// the long generated runs in shards), a median of 57 s (Docs/Decisions.md). A test inside, or
/// one that has ``MemoryGate``'s turn, starts more servers without waiting, so no test waits for
/// a place held by a test that waits for it.
enum ServerGate {
    /// The number of places. `CONVEYOR_TEST_SERVER_PLACES` overrides it (at least 1).
    static let limit = ProcessInfo.processInfo.environment["CONVEYOR_TEST_SERVER_PLACES"].flatMap(Int.init) ?? 4

    /// Whether the current task holds a place.
    @TaskLocal static var holdsPlace = false

    private static let places = Places(limit)

    /// Runs `body` in a place: at once if the task holds one or has the memory turn, else once
    /// one is free.
    static func withPlace<T>(_ body: () async throws -> T) async throws -> T {
        if holdsPlace || MemoryGate.hasTurn { return try await body() }
        return try await places.inside { try await $holdsPlace.withValue(true) { try await body() } }
    }
}

/// A tiny locked box (this module depends on Foundation only).
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.lock(); defer { lock.unlock() }; return value }
    func set(_ newValue: Value) { lock.lock(); value = newValue; lock.unlock() }
    func withLock<T>(_ body: (inout Value) -> T) -> T { lock.lock(); defer { lock.unlock() }; return body(&value) }
}
