public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real PostgreSQL server on 127.0.0.1 for the shared-cache tests, through
/// `Tests/Server/postgres.sh` (Debian's `postgresql` package; a throwaway cluster in a
/// temporary directory).
///
/// ``shared()`` is the one every test of a process may use: the server `.ci/run` started
/// (`CONVEYOR_POSTGRES_URL`), else one started for this process and stopped when it exits.
/// ``start()`` starts one of a test's own, for a test that kills it.
public final class TestPostgres: Sendable {
    /// `postgres://user:password@127.0.0.1:port/database`.
    public let url: URL
    /// The host (always 127.0.0.1).
    public let host: String
    /// The port.
    public let port: Int
    /// The user.
    public let username: String
    /// The user's password.
    public let password: String
    /// The database.
    public let database: String
    /// The cluster's directory, when this process started it (`nil` for `.ci/run`'s).
    private let directory: String?

    /// Why no server is available.
    public struct Unavailable: Error, CustomStringConvertible {
        /// What went wrong, with the script's output.
        public let description: String
        /// An error that says `description`.
        public init(description: String) { self.description = description }
    }

    init(url: URL, directory: String?) throws(Unavailable) {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false), let host = parts.host,
            let port = parts.port, let user = parts.user
        else { throw Unavailable(description: "not a postgres:// URL with a host, port and user: \(url.host ?? "?")") }
        guard host == "127.0.0.1" || host == "localhost" else {
            throw Unavailable(description: "the tests only reach 127.0.0.1, not \(host)")
        }
        self.url = url
        self.host = host
        self.port = port
        username = user
        password = parts.password ?? ""
        database = String(parts.path.dropFirst())
        self.directory = directory
    }

    /// The server every test of this process shares.
    /// - Throws: ``Unavailable`` when neither `CONVEYOR_POSTGRES_URL` is set nor PostgreSQL's
    ///   server installed (`apt-get install postgresql`).
    public static func shared() async throws -> TestPostgres {
        try await Shared.instance.value.get()
    }

    /// A server of the caller's own; stop it with ``stop()``.
    public static func start() async throws -> TestPostgres {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-pg-\(UUID().uuidString)").path
        let output = try await script("start", directory)
        guard let url = URL(string: output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw Unavailable(description: "postgres.sh printed no URL")
        }
        return try TestPostgres(url: url, directory: directory)
    }

    /// Kills the server with SIGKILL, as a crash would (only one this process started).
    public func kill() async throws {
        guard let directory else { throw Unavailable(description: "not started by this process") }
        _ = try await Self.script("kill", directory)
    }

    /// Stops the server and deletes its directory (only one this process started).
    public func stop() async {
        guard let directory else { return }
        _ = try? await Self.script("stop", directory)
    }

    private enum Shared {
        static let instance = Task<Result<TestPostgres, any Error>, Never> {
            if let given = ProcessInfo.processInfo.environment["CONVEYOR_POSTGRES_URL"], let url = URL(string: given) {
                return Result { try TestPostgres(url: url, directory: nil) }
            }
            do {
                let server = try await TestPostgres.start()
                atexit(stopSharedAtExit)
                sharedDirectory.withLock { $0 = server.directory }
                return .success(server)
            } catch {
                return .failure(error)
            }
        }
    }

    /// postgres.sh beside server.py.
    static let scriptPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Server/postgres.sh").path

    /// Runs postgres.sh and returns what it printed; its wait is on a thread of its own, not one
    /// of Swift's cooperative pool.
    static func script(_ arguments: String...) async throws(Unavailable) -> String {
        let result: Result<String, Unavailable> = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: runScript(arguments))
            }
        }
        return try result.get()
    }

    static func runScript(_ arguments: [String]) -> Result<String, Unavailable> {
        // posix_spawn and waitpid, not Foundation's Process: the server the script starts
        // inherits the descriptor FoundationNetworking's Process watches to learn that its child
        // exited, so Process never saw the script end (its bash stayed a zombie). Output goes to
        // files for the same reason: a pipe held open by the server would never reach its end.
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("postgres-sh-\(UUID().uuidString)")
        let errorFile = outputFile.appendingPathExtension("err")
        defer {
            try? FileManager.default.removeItem(at: outputFile)
            try? FileManager.default.removeItem(at: errorFile)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputFile.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errorFile.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ["/bin/bash", scriptPath] + arguments
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, &cArguments, environ)
        guard spawned == 0 else { return .failure(Unavailable(description: "could not run postgres.sh: errno \(spawned)")) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let printed = (try? Data(contentsOf: outputFile)) ?? Data()
        let complaint = (try? Data(contentsOf: errorFile)) ?? Data()
        // Exited normally with status 0 (WIFEXITED and WEXITSTATUS, which Swift does not import).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            return .failure(Unavailable(description: "postgres.sh \(arguments.joined(separator: " ")) failed: "
                + String(decoding: complaint.suffix(2_000), as: UTF8.self)))
        }
        return .success(String(decoding: printed, as: UTF8.self))
    }
}

private let sharedDirectory = Locked<String?>(nil)

private func stopSharedAtExit() {
    guard let directory = sharedDirectory.withLock({ $0 }) else { return }
    _ = TestPostgres.runScript(["stop", directory])
}
