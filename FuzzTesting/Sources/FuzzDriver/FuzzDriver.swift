import ConveyorFuzzChecks

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// libFuzzer's driver, linked in by `-sanitize=fuzzer`.
@_silgen_name("LLVMFuzzerRunDriver")
private func runDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The check this process fuzzes: set once, before the driver starts, and only read after.
nonisolated(unsafe) private var currentCheck: (name: String, check: @Sendable ([UInt8]) -> String?)?

/// Runs libFuzzer with the command line's options over the check named `name`; a failed oracle
/// traps, so that libFuzzer keeps the input as `crash-…`.
///
/// Each target's `@main` calls this (SwiftPM names an executable's entry point after its
/// target, so libFuzzer's own `main` cannot be the entry point: `LLVMFuzzerRunDriver` is).
public func runFuzzer(check name: String) -> Never {
    guard let check = FuzzChecks.check(named: name) else { fatalError("no check named \(name)") }
    currentCheck = (name, check)
    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    exit(runDriver(&argc, &argv) { start, count in
        let bytes = start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
        if let (name, check) = currentCheck, let failure = check(bytes) { fatalError("\(name): \(failure)") }
        return 0
    })
}
