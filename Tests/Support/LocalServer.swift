public import Foundation

/// Starts `Tests/Server/server.py` on 127.0.0.1 with a free port, for integration tests.
///
/// ```swift
/// try await LocalServer.withServer { server in
///     let client = NetworkClient(baseURL: server.baseURL)
///     …
/// }
/// ```
/// The server exits when its stdin closes, so it never outlives the test process.
public final class LocalServer: @unchecked Sendable {
    // @unchecked: `process` and `stdin` are only used under `lock` after init.
    private let lock = NSLock()
    private let process: Process
    private let stdin: Pipe
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

    /// Starts the server and waits (at most 30 s) for it to report its port.
    ///
    /// The wait suspends instead of blocking: many tests start servers at once on a 2-core
    /// machine, and a blocked thread of Swift's small cooperative pool would delay every other
    /// test's timers (a 300 ms timeout once fired after 10 s that way).
    /// - Throws: ``StartError`` when Python is missing or the server does not come up.
    public static func start() async throws -> LocalServer {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Server/server.py")
        let process = Process()
        process.executableURL = python
        process.arguments = pythonArguments + [script.path, "--port", "0"]
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        do {
            try process.run()
        } catch {
            throw StartError(description: "could not run python3 \(script.path): \(error)")
        }

        // The first line is read on a thread of its own, and a second thread gives up after 30 s,
        // so a silent server cannot hang the tests; whichever comes first resumes the caller.
        let reader = stdout.fileHandleForReading
        let text: String? = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            let once = Locked(false)
            let finish: @Sendable (String?) -> Void = { value in
                let first = once.withLock { resumed in
                    defer { resumed = true }
                    return !resumed
                }
                if first { continuation.resume(returning: value) }
            }
            Thread.detachNewThread {
                var buffer = Data()
                while !buffer.contains(UInt8(ascii: "\n")) {
                    let chunk = reader.availableData
                    if chunk.isEmpty { break }
                    buffer.append(chunk)
                }
                finish(String(decoding: buffer, as: UTF8.self))
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + 30) { finish(nil) }
        }
        guard let text, text.hasPrefix("PORT "),
            let port = text.split(separator: "\n").first?.split(separator: " ").last.flatMap({ Int($0) })
        else {
            process.terminate()
            let errors = String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
            throw StartError(description: "the test server did not report its port within 30 s. stderr: \(errors)")
        }
        return LocalServer(process: process, stdin: stdin, port: port)
    }

    private init(process: Process, stdin: Pipe, port: Int) {
        self.process = process
        self.stdin = stdin
        self.port = port
    }

    /// Stops the server: closes its stdin (it exits when stdin closes) and terminates it. Returns
    /// at once; Foundation reaps the process. Safe to call more than once.
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        try? stdin.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
    }

    /// Stops the server and suspends until its process has exited (the port is closed then).
    public func stopAndWait() async {
        stop()
        let process = self.process
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                process.waitUntilExit()
                continuation.resume()
            }
        }
    }

    deinit { stop() }

    /// Starts a server, runs `body` with it, and always stops it.
    /// - Parameter body: The test code.
    /// - Returns: What `body` returns.
    public static func withServer<T>(_ body: (LocalServer) async throws -> T) async throws -> T {
        let server = try await start()
        defer { server.stop() }
        return try await body(server)
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
