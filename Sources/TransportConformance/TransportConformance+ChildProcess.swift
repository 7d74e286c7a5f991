public import Conveyor
public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Checks in a child process: a transport that ends the process (a platform `fatalError`) fails
/// one check instead of the test run.
///
/// The child is a small executable of yours that builds the transport and hands it to
/// ``TransportConformance/runChildProcess(on:arguments:)``:
///
/// ```swift
/// // Sources/MyTransportConformance/main.swift, an executable target
/// import ConveyorTesting
///
/// await TransportConformance.runChildProcess(on: MyTransport())
/// ```
///
/// The tests start it once per check:
///
/// ```swift
/// @Test(arguments: TransportConformance.Check.allCases)
/// func myTransportConforms(_ check: TransportConformance.Check) async {
///     let child = URL(fileURLWithPath: "/path/to/.build/debug/MyTransportConformance")
///     let outcome = await TransportConformance.runInChildProcess(check, executable: child)
///     #expect(outcome.isConforming, "\(outcome)")
/// }
/// ```
///
/// A child that ends with a signal fails its check with the signal and the fatal error it
/// printed, unless the check's ``KnownIssue`` names that trap (``KnownIssue/trap``); a marked
/// trap that no longer happens is reported as ``Outcome/Status/knownIssueFixed(_:)``.
extension TransportConformance {
    /// The prefix of the line a child process writes its finding on.
    static let childOutcomeMarker = "conveyor-conformance-outcome"

    /// Runs one check in a child process, the executable you give, which calls
    /// ``runChildProcess(on:arguments:)``.
    ///
    /// - Parameters:
    ///   - check: The check.
    ///   - executable: The child executable.
    ///   - arguments: Arguments for the child before the kit's own (to choose a transport, for
    ///     example).
    ///   - options: Redirect limit, time bound and known issues (applied here, in the parent).
    /// - Returns: What the check found; ``Outcome/Status/skipped(_:)`` where processes cannot be
    ///   started (iOS, tvOS, watchOS, visionOS) or the executable does not start.
    public static func runInChildProcess(
        _ check: Check, executable: URL, arguments: [String] = [], options: Options = .init()
    ) async -> Outcome {
        #if os(macOS) || os(Linux)
            let flags = [
                "--conformance-check", check.rawValue,
                "--conformance-promptness-ms", "\(Int(options.promptness.conformanceSeconds * 1000))",
                "--conformance-maximum-redirects", "\(options.maximumRedirects)",
                "--conformance-hang-limit-ms", "\(Int(options.hangLimit.conformanceSeconds * 1000))",
            ]
            let bound = Duration.seconds(600) + options.promptness * 4 + options.hangLimit
            let ended: ChildProcess.Ended
            do {
                ended = try await ChildProcess.run(executable, arguments: arguments + flags, within: bound)
            } catch {
                return Outcome(check: check, status: .skipped("could not start \(executable.path): \(error)"), detail: nil)
            }
            return outcome(of: check, ended: ended, within: bound, options: options)
        #else
            return Outcome(check: check, status: .skipped("this platform cannot start a child process"), detail: nil)
        #endif
    }

    /// The entry point of a child process: runs the check named in `arguments` against
    /// `transport`, writes what it found on standard output, and exits (status 0 when the check
    /// ran, whatever it found; 64 when the arguments name no check).
    ///
    /// - Parameters:
    ///   - transport: The transport under test, configured as your app uses it.
    ///   - arguments: The process's arguments; the kit's own follow any of yours.
    public static func runChildProcess(
        on transport: some HTTPTransport, arguments: [String] = CommandLine.arguments
    ) async -> Never {
        func value(_ flag: String) -> String? {
            guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
            return arguments[index + 1]
        }
        guard let name = value("--conformance-check"), let check = Check(rawValue: name) else {
            FileHandle.standardError.write(Data("usage: <child> --conformance-check <check> [...]\n".utf8))
            exit(64)
        }
        let promptness = value("--conformance-promptness-ms").flatMap(Int.init).map(Duration.milliseconds)
        let redirects = value("--conformance-maximum-redirects").flatMap(Int.init)
        let hangLimit = value("--conformance-hang-limit-ms").flatMap(Int.init).map(Duration.milliseconds)
        var options = Options(
            maximumRedirects: redirects ?? 10, promptness: promptness ?? .seconds(5), hangLimit: hangLimit ?? .seconds(60))
        options.measuresMemory = true
        let found = await ConformanceCheck.run(check, on: transport, options: options)
        let (status, message): (String, String) =
            switch found.status {
            case .passed: ("passed", "")
            case .failed(let message): ("failed", message)
            case .skipped(let reason): ("skipped", reason)
            case .knownIssue(_, let observed): ("failed", observed)
            case .knownIssueFixed: ("passed", "")
            }
        let line = [
            childOutcomeMarker, status, Data(message.utf8).base64EncodedString(),
            Data((found.detail ?? "").utf8).base64EncodedString(),
        ].joined(separator: " ")
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
        exit(0)
    }

    #if os(macOS) || os(Linux)
        /// The outcome of a child that ended: its line if it wrote one, the signal if it trapped.
        static func outcome(of check: Check, ended: ChildProcess.Ended, within bound: Duration, options: Options)
            -> Outcome
        {
            let stderr = String(decoding: ended.standardError, as: UTF8.self)
            switch ended.how {
            case .signal(let signal):
                let message =
                    ended.timedOut
                    ? "the child process did not end within \(bound) and was killed (a hang)"
                    : "the child process ended with signal \(signal)\(ChildProcess.signalName(signal)): "
                        + ChildProcess.fatalLine(in: stderr)
                return outcome(
                    of: check, ConformanceCheck.Found(status: .failed(message)), trapped: ended.timedOut ? nil : stderr,
                    options: options)
            case .exit(let code):
                let stdout = String(decoding: ended.standardOutput, as: UTF8.self)
                guard
                    let line = stdout.split(separator: "\n").last(where: { $0.hasPrefix(childOutcomeMarker + " ") }),
                    let found = Self.found(in: line)
                else {
                    let message =
                        "the child process exited with status \(code) without an outcome: "
                        + ChildProcess.fatalLine(in: stderr)
                    return outcome(of: check, ConformanceCheck.Found(status: .failed(message)), trapped: nil, options: options)
                }
                return outcome(of: check, found, trapped: nil, options: options)
            }
        }

        /// Reads a child's outcome line.
        static func found(in line: Substring) -> ConformanceCheck.Found? {
            let parts = line.split(separator: " ", omittingEmptySubsequences: false)
            guard parts.count == 4, let message = Data(base64Encoded: String(parts[2])),
                let detail = Data(base64Encoded: String(parts[3]))
            else { return nil }
            let text = String(decoding: message, as: UTF8.self)
            let detailText = detail.isEmpty ? nil : String(decoding: detail, as: UTF8.self)
            switch parts[1] {
            case "passed": return ConformanceCheck.Found(status: .passed, detail: detailText)
            case "failed": return ConformanceCheck.Found(status: .failed(text), detail: detailText)
            case "skipped": return ConformanceCheck.Found(status: .skipped(text), detail: detailText)
            default: return nil
            }
        }
    #endif
}

#if os(macOS) || os(Linux)
    /// Starts an executable, collects its output, and kills it past a bound. `package`: the test
    /// suite runs its own child processes with it.
    package enum ChildProcess {
        package enum How: Sendable {
            case exit(Int32)
            case signal(Int32)
        }

        package struct Ended: Sendable {
            package var how: How
            package var standardOutput: Data
            package var standardError: Data
            /// Whether the bound passed and the kit killed it.
            package var timedOut: Bool
        }

        package static func run(_ executable: URL, arguments: [String], within bound: Duration) async throws -> Ended {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            var environment = ProcessInfo.processInfo.environment
            // The runtime's backtracer would spend seconds symbolicating a trap we only need the
            // message of.
            environment["SWIFT_BACKTRACE"] = "enable=no"
            process.environment = environment
            let output = Pipe()
            let errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            process.standardInput = FileHandle.nullDevice
            let killed = Locked(false)
            let (endings, ending) = AsyncStream.makeStream(of: How.self)
            process.terminationHandler = { process in
                let status = process.terminationStatus
                ending.yield(process.terminationReason == .uncaughtSignal ? .signal(status) : .exit(status))
                ending.finish()
            }
            try process.run()
            let pid = process.processIdentifier
            let timer = DispatchWorkItem {
                killed.withLock { $0 = true }
                kill(pid, SIGKILL)
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + bound.conformanceSeconds, execute: timer)
            async let standardOutput = readToEnd(output.fileHandleForReading)
            async let standardError = readToEnd(errors.fileHandleForReading)
            let (out, err) = await (standardOutput, standardError)
            var how = How.signal(SIGKILL)
            for await ended in endings { how = ended }
            timer.cancel()
            return Ended(how: how, standardOutput: out, standardError: err, timedOut: killed.withLock { $0 })
        }

        /// Reads until the other end closes, on a thread that may block.
        private static func readToEnd(_ handle: FileHandle) async -> Data {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: handle.readDataToEndOfFile()) }
            }
        }

        /// ` (SIGILL)` for the usual trap signals.
        package static func signalName(_ signal: Int32) -> String {
            switch signal {
            case SIGILL: " (SIGILL)"
            case SIGTRAP: " (SIGTRAP)"
            case SIGABRT: " (SIGABRT)"
            case SIGSEGV: " (SIGSEGV)"
            case SIGBUS: " (SIGBUS)"
            case SIGKILL: " (SIGKILL)"
            default: ""
            }
        }

        /// The line with `Fatal error`, or the last line of standard error, at most 300 characters.
        package static func fatalLine(in text: String) -> String {
            let lines = text.split(whereSeparator: \.isNewline)
            let line = lines.first(where: { $0.contains("Fatal error") }) ?? lines.last ?? "(nothing on standard error)"
            return String(line.prefix(300))
        }
    }
#endif
