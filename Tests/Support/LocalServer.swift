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

    /// Starts the server and waits (at most 10 s) for it to report its port.
    /// - Throws: ``StartError`` when Python is missing or the server does not come up.
    public static func start() throws -> LocalServer {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Server/server.py")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path, "--port", "0"]
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

        // Read the first line on a background thread so a silent server cannot hang the tests.
        let line = Locked<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let reader = stdout.fileHandleForReading
        Thread.detachNewThread {
            var buffer = Data()
            while !buffer.contains(UInt8(ascii: "\n")) {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
            }
            line.set(String(decoding: buffer, as: UTF8.self))
            done.signal()
        }
        let port: Int?
        if done.wait(timeout: .now() + 10) == .success, let text = line.get(),
            let value = text.split(separator: "\n").first?.split(separator: " ").last.flatMap({ Int($0) }),
            text.hasPrefix("PORT ")
        {
            port = value
        } else {
            port = nil
        }
        guard let port else {
            process.terminate()
            let errors = String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
            throw StartError(description: "the test server did not report its port within 10 s. stderr: \(errors)")
        }
        return LocalServer(process: process, stdin: stdin, port: port)
    }

    private init(process: Process, stdin: Pipe, port: Int) {
        self.process = process
        self.stdin = stdin
        self.port = port
    }

    /// Stops the server and waits for it to exit. Safe to call more than once.
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        try? stdin.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    deinit { stop() }

    /// Starts a server, runs `body` with it, and always stops it.
    /// - Parameter body: The test code.
    /// - Returns: What `body` returns.
    public static func withServer<T>(_ body: (LocalServer) async throws -> T) async throws -> T {
        let server = try start()
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
