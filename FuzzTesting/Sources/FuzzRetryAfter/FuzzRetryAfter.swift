import ConveyorFuzzChecks

/// libFuzzer's entry point: runs the "retry-after" check on one input and traps when its oracle fails,
/// so that libFuzzer keeps the input (see FuzzTesting/README.md).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    if let failure = FuzzChecks.check(named: "retry-after")?(bytes) { fatalError("retry-after: \(failure)") }
    return 0
}
