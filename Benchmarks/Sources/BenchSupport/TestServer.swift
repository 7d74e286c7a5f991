import Foundation

/// Starts `Tests/Server/server.py` on 127.0.0.1 with a free port, for the loopback benchmarks.
/// The server exits when its stdin (a pipe held by the returned process object) closes, so it
/// never outlives the benchmark.
/// - Returns: The server's process and its port.
public func startTestServer() throws -> (process: Process, port: Int) {
    let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Server/server.py")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", script.path]
    let output = Pipe()
    process.standardOutput = output
    process.standardInput = Pipe()  // the server exits when this closes
    try process.run()
    var line = Data()
    while !line.contains(UInt8(ascii: "\n")) {
        let chunk = output.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        line.append(chunk)
    }
    let text = String(decoding: line, as: UTF8.self)
    guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5).prefix { $0.isNumber }) else {
        throw CocoaError(.fileReadCorruptFile)
    }
    return (process, port)
}
