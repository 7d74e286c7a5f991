import AsyncHTTPClient
import BenchSupport
import Conveyor
import ConveyorAsyncHTTPClient
import Foundation

/// What `/upload` answers.
struct UploadReply: Codable, Sendable {
    var bytes: Int
    var sha256: String
}

/// What a Conveyor scenario reports to the parent, as one JSON line on its standard output.
struct ChildReport: Codable {
    /// The transfer's wall time.
    var seconds: Double
    /// Resident memory just before the transfer (after a warm-up transfer of one byte).
    var residentBefore: Int
    /// Peak resident memory from then to the end of the transfer.
    var peakAfter: Int
    /// The server's answer to an upload.
    var reply: UploadReply?
}

/// Downloads `/blob?bytes=N` to `file` with `NetworkClient.download(_:to:)`: the body is written
/// to disk as it arrives and moved into place at the end.
func conveyorDownload(_ client: NetworkClient, bytes: Int, to file: URL) async throws(NetworkError) {
    _ = try await client.download(Request<Data>(path: "/blob", query: ["bytes": bytes]), to: file)
}

/// Uploads `file` to `/upload` as a `.file` body, read from disk while it is sent.
func conveyorUpload(_ client: NetworkClient, from file: URL) async throws(NetworkError) -> UploadReply {
    try await client.send(
        Request<UploadReply>(
            method: .post, path: "/upload", body: .file(file, contentType: "application/octet-stream")))
}

/// Runs one Conveyor scenario in this (child) process and prints its report.
///
/// A transfer of one byte first brings in the code, the URLSession and the connection, so what
/// is measured is what the size of the transfer costs; the peak is then reset to the current
/// resident size (`/proc/self/clear_refs`), read before and after the transfer.
/// - Parameters:
///   - direction: `download` or `upload`.
///   - base: The server's URL.
///   - bytes: The size of the transfer.
///   - file: Where to download to, or the file to upload.
///   - transport: `urlsession` (the default transport) or `ahc` (AsyncHTTPClientTransport).
func runChild(direction: String, base: URL, bytes: Int, file: URL, transport: String) async throws {
    var http: HTTPClient?
    let client: NetworkClient
    if transport == "ahc" {
        let created = HTTPClient(eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())
        http = created
        // The transfer's own deadline: long enough for a gigabyte on a slow machine.
        client = NetworkClient(
            baseURL: base, transport: try AsyncHTTPClientTransport(client: created, defaultTimeout: .seconds(600)))
    } else {
        client = NetworkClient(baseURL: base)
    }
    let warmUp = file.deletingLastPathComponent().appendingPathComponent("warm-up-\(UUID())")
    defer { try? FileManager.default.removeItem(at: warmUp) }
    var reply: UploadReply?
    let transfer: () async throws -> Void
    switch direction {
    case "download":
        try await conveyorDownload(client, bytes: 1, to: warmUp)
        transfer = { try await conveyorDownload(client, bytes: bytes, to: file) }
    case "upload":
        try Data([0]).write(to: warmUp)
        _ = try await conveyorUpload(client, from: warmUp)
        transfer = { reply = try await conveyorUpload(client, from: file) }
    default:
        throw BenchError("unknown direction \(direction)")
    }
    Memory.resetPeak()
    let before = Memory.resident
    let start = ContinuousClock.now
    try await transfer()
    let elapsed = ContinuousClock.now - start
    let report = ChildReport(
        seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
        residentBefore: before, peakAfter: max(Memory.peak, Memory.resident), reply: reply)
    print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
    try await http?.shutdown()
}
