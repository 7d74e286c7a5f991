import ConveyorFuzzChecks

/// libFuzzer's entry point: runs the "http-date" check on one input and traps when its oracle fails,
/// so that libFuzzer keeps the input (see FuzzTesting/README.md).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    if let failure = FuzzChecks.check(named: "http-date")?(bytes) { fatalError("http-date: \(failure)") }
    return 0
}
