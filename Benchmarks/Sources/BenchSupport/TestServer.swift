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

/// The SHA-256 of a file as `sha256sum` computes it (hex), to compare with what the test server
/// computed of an upload.
public func sha256(of file: URL) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["sha256sum", file.path]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0, let digest = String(decoding: data, as: UTF8.self).split(separator: " ").first
    else {
        throw SHA256Failed(description: "sha256sum \(file.path) failed")
    }
    return String(digest)
}

/// `sha256sum` did not give a digest.
public struct SHA256Failed: Error, CustomStringConvertible {
    public let description: String
}
