import Conveyor
import ConveyorPipeline
import ConveyorTesting
import Foundation

/// The transfer checks: a resumed download is whole or absent, an abandoned stream ends, and
/// bodies stream both ways. They go through a ``Conveyor/NetworkClient`` on the transport under
/// test, since resuming and streaming are the client's, on the transport's responses.
extension ConformanceProbe {
    /// A client on the transport: retries (backoff on a clock that does not wait), and `behaviors`.
    func client(maxResponseSize: Int? = NetworkClient.Configuration.defaultMaxResponseSize, _ behaviors: [any RequestBehavior] = [])
        -> NetworkClient
    {
        let all: [any RequestBehavior] = [RetryBehavior(.exponentialBackoff(maxAttempts: 4, jitter: .none))] + behaviors
        return NetworkClient(
            baseURL: server.url("/"), transport: transport,
            configuration: .init(clock: ImmediateClock(), maxResponseSize: maxResponseSize)
        ) { all }
    }

    static func scratchFile(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-conformance-\(UUID().uuidString)-\(name)")
    }

    /// The first offset where `file` differs from `expected(offset, count)`, its size when it is
    /// shorter or longer than `size`, or `nil` when it holds exactly those bytes.
    private static func mismatch(in file: URL, size: Int, expected: (Int, Int) -> Data) -> String? {
        guard let handle = try? FileHandle(forReadingFrom: file) else { return "the file cannot be read" }
        defer { try? handle.close() }
        var offset = 0
        while true {
            guard let piece = try? handle.read(upToCount: 1 << 20), !piece.isEmpty else { break }
            guard offset + piece.count <= size else { return "the file is longer than \(size) bytes" }
            if piece != expected(offset, piece.count) {
                let at = zip(piece, expected(offset, piece.count)).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? 0
                return "byte \(offset + at) is not the expected version's"
            }
            offset += piece.count
        }
        return offset == size ? nil : "the file has \(offset) of \(size) bytes"
    }

    /// `/resumable` in `mode`: the file must be the version the server holds now, whole, or absent
    /// with an error.
    func resume(mode: String, expectedVersion: Int, what: String) async throws(ConformanceFailure) -> String? {
        let size = 3 << 20
        let file = Self.scratchFile("resumed.bin")
        defer { try? FileManager.default.removeItem(at: file) }
        let client = client()
        let request = Request<Data>(path: "/resumable", query: ["bytes": size, "mode": mode])
        let ended = await Self.bounded(hangLimit) { try await client.download(request, to: file) }
        let ranged = server.events.contains {
            $0.kind == .requestReceived && $0.path == "/resumable" && $0.request?.headers["Range"] != nil
        }
        let note = ranged ? "the retry asked for the rest with Range" : "the retry started over without Range"
        switch ended {
        case nil:
            throw ConformanceFailure("\(what): the download did not end within \(hangLimit) (a hang)")
        case .success:
            if let problem = Self.mismatch(in: file, size: size, expected: { offset, count in
                ConformancePattern.resumable(version: expectedVersion, from: offset, count: count)
            }) {
                throw ConformanceFailure(
                    "\(what): the download succeeded, but \(problem): the file is not version \(expectedVersion) whole "
                        + "(\(note))")
            }
            return "whole version \(expectedVersion); \(note)"
        case .failure(let error):
            guard !FileManager.default.fileExists(atPath: file.path) else {
                throw ConformanceFailure("\(what): the download failed (\(error)), but left a file at the destination")
            }
            return "failed with \(ConformanceResult.name(NetworkError(transportError: error))), no file; \(note)"
        }
    }

    /// Leaving the loop over a streamed body after its first chunk, the response still held.
    func earlyStreamExit() async throws(ConformanceFailure) -> String? {
        guard transport is any StreamingHTTPTransport else {
            return "not a StreamingHTTPTransport: the client holds its bodies whole, so there is no transfer to leave"
        }
        let endings = Endings()
        let client = client([EndingReporter(endings: endings)])
        let kept = Kept()
        let what = "GET /bytes (1 GiB) through NetworkClient.stream, left after the first chunk"
        let read = await Self.bounded(hangLimit) { () async throws -> Int in
            let streamed = try await client.stream(Request<Data>(path: "/bytes", query: ["count": 1 << 30]))
            kept.keep(streamed)  // the app still holds the response
            for try await chunk in streamed.body { return chunk.count }
            return 0
        }
        defer { kept.release() }
        guard case .success(let bytes)? = read, bytes > 0 else {
            throw ConformanceFailure("\(what): no first chunk (\(read.map { "\($0)" } ?? "a hang"))")
        }
        guard let ending = await endings.first(within: options.promptness) else {
            throw ConformanceFailure("\(what): the behaviors' ending hook did not run within \(options.promptness)")
        }
        guard ending == "cancelled" else {
            throw ConformanceFailure("\(what): the ending hook ran with .\(ending), not .cancelled")
        }
        guard let connection = server.events.first(where: { $0.path == "/bytes" })?.connection else {
            throw ConformanceFailure("\(what): the server never received it")
        }
        try await expectClosed(connection: connection, after: "\(what): the ending hook ran with .cancelled")
        return nil
    }

    /// `/events` over three connections: split line ends, a drop mid-event, silence, a 204.
    func eventStreamReconnect() async throws(ConformanceFailure) -> String? {
        guard transport is any StreamingHTTPTransport else {
            return "not a StreamingHTTPTransport: no byte of a body arrives before it ends, so an event stream cannot work"
        }
        let endings = Endings()
        let client = client([EndingReporter(endings: endings)])
        var streamOptions = EventStreamOptions()
        streamOptions.idleTimeout = .seconds(1)
        let options = streamOptions
        let what = "GET /events (CR and LF in separate writes, a drop mid-event, then silence, then 204)"
        let read = await Self.bounded(hangLimit) { () async throws -> [String] in
            var seen: [String] = []
            for try await event in client.events(Request<Data>(path: "/events"), options: options) {
                seen.append("\(event.id ?? "-"):\(event.data)")
            }
            return seen
        }
        switch read {
        case nil: throw ConformanceFailure("\(what): the stream did not end within \(hangLimit) (a hang)")
        case .failure(let error): throw ConformanceFailure("\(what): the stream ended with \(error)")
        case .success(let seen):
            guard seen == ["1:a", "2:b", "3:c"] else {
                throw ConformanceFailure("\(what): the events were \(seen) (id:data), not [1:a, 2:b, 3:c]")
            }
        }
        let sent = server.events.filter { $0.kind == .requestReceived && $0.path == "/events" }.map {
            $0.request?.headers["Last-Event-ID"] ?? "none"
        }
        // On a loaded machine the idle timeout may end a connection before its head or its next
        // event arrives: the reconnect then repeats the same id, which is right. What must hold is
        // the order, with each id the last complete event's (never 3 before event 3 was whole).
        var distinct: [String] = []
        for id in sent where distinct.last != id { distinct.append(id) }
        guard distinct == ["none", "2", "3"] else {
            throw ConformanceFailure("\(what): the connections sent Last-Event-ID \(sent), not none, then 2, then 3")
        }
        // The stream has ended, so its ending hook must run; waiting for it only as long as the
        // idle timeout (1 s) failed on a busy machine (1 run in 20) although the hook ran. How
        // soon a hook runs is `promptness`'s check, on the streams left early.
        guard let ending = await endings.first(within: hangLimit), ending == "success" else {
            throw ConformanceFailure("\(what): the ending hook did not run with afterSuccess")
        }
        return nil
    }

    /// Leaving an event stream after its first event while the server is silent.
    func eventStreamExit() async throws(ConformanceFailure) -> String? {
        guard transport is any StreamingHTTPTransport else {
            return "not a StreamingHTTPTransport: no byte of a body arrives before it ends, so there is nothing to leave"
        }
        let endings = Endings()
        let client = client([EndingReporter(endings: endings)])
        let what = "GET /events?hold=1 through NetworkClient.events, left after the first event"
        let read = await Self.bounded(hangLimit) { () async throws -> String in
            for try await event in client.events(Request<Data>(path: "/events", query: ["hold": 1])) { return event.data }
            return ""
        }
        guard case .success("a")? = read else {
            throw ConformanceFailure("\(what): no first event (\(read.map { "\($0)" } ?? "a hang"))")
        }
        guard let ending = await endings.first(within: options.promptness) else {
            throw ConformanceFailure("\(what): the behaviors' ending hook did not run within \(options.promptness)")
        }
        guard ending == "cancelled" else {
            throw ConformanceFailure("\(what): the ending hook ran with .\(ending), not .cancelled")
        }
        guard let connection = server.events.first(where: { $0.path == "/events" })?.connection else {
            throw ConformanceFailure("\(what): the server never received it")
        }
        try await expectClosed(connection: connection, after: "\(what): the ending hook ran with .cancelled")
        return nil
    }

    /// 64 MiB down to a file under a 1 MiB in-memory limit, and 64 MiB up from a one-shot stream.
    func streamedTransfers() async throws(ConformanceFailure) -> String? {
        guard transport is any StreamingHTTPTransport else {
            return "not a StreamingHTTPTransport: the client holds its bodies whole, by design"
        }
        let size = 64 << 20
        let measures = options.measuresMemory && ResidentMemory.isAvailable
        var notes: [String] = []

        let file = Self.scratchFile("streamed.bin")
        defer { try? FileManager.default.removeItem(at: file) }
        let downloader = client(maxResponseSize: 1 << 20)
        let down = "a 64 MiB download to a file with maxResponseSize of 1 MiB"
        let before = measures ? ResidentMemory.resetPeak() : nil
        let downloaded = await Self.bounded(hangLimit) {
            try await downloader.download(Request<Data>(path: "/bytes", query: ["count": size]), to: file)
        }
        let downGrowth = before.flatMap { ResidentMemory.growth(since: $0) }
        switch downloaded {
        case nil: throw ConformanceFailure("\(down) did not end within \(hangLimit) (a hang)")
        case .failure(let error):
            throw ConformanceFailure(
                "\(down) failed with \(ConformanceResult.name(NetworkError(transportError: error))): the body was not "
                    + "handed to the transfer as it arrived")
        case .success:
            if let problem = Self.mismatch(in: file, size: size, expected: ConformancePattern.slice) {
                throw ConformanceFailure("\(down): \(problem)")
            }
        }
        try? FileManager.default.removeItem(at: file)

        let up = "a 64 MiB upload from a one-shot stream"
        let chunks = AsyncStream<Data> { continuation in
            var offset = 0
            while offset < size {
                continuation.yield(ConformancePattern.slice(from: offset, count: 256 << 10))
                offset += 256 << 10
            }
            continuation.finish()
        }
        // The stream makes its chunks up front; they are one-shot, the transport reads them once.
        let uploader = client()
        let beforeUpload = measures ? ResidentMemory.resetPeak() : nil
        let uploaded = await Self.bounded(hangLimit) {
            try await uploader.send(
                Request<String>(method: .post, path: "/upload", query: ["from": "stream"], body: .stream(chunks, length: Int64(size))))
        }
        let upGrowth = beforeUpload.flatMap { ResidentMemory.growth(since: $0) }
        switch uploaded {
        case nil: throw ConformanceFailure("\(up) did not end within \(hangLimit) (a hang)")
        case .failure(let error):
            throw ConformanceFailure("\(up) failed with \(ConformanceResult.name(NetworkError(transportError: error)))")
        case .success(let answer):
            guard answer == "bytes=\(size) intact=1" else {
                throw ConformanceFailure("\(up): the server received \(answer)")
            }
        }
        try await checkUploadFraming("/upload?from=stream", length: size, up, notes: &notes)

        // A file body, framed as it went out (the transport may read a file its own way).
        let source = Self.scratchFile("upload.bin")
        defer { try? FileManager.default.removeItem(at: source) }
        let fileSize = 1 << 20
        let fromFile = "a 1 MiB upload from a file"
        do {
            try ConformancePattern.bytes(count: fileSize).write(to: source)
        } catch {
            throw ConformanceFailure("\(fromFile): the kit could not write its file (\(error))")
        }
        let fileUploaded = await Self.bounded(hangLimit) {
            try await uploader.send(
                Request<String>(method: .put, path: "/upload", query: ["from": "file"], body: .file(source, contentType: nil)))
        }
        switch fileUploaded {
        case nil: throw ConformanceFailure("\(fromFile) did not end within \(hangLimit) (a hang)")
        case .failure(let error):
            throw ConformanceFailure("\(fromFile) failed with \(ConformanceResult.name(NetworkError(transportError: error)))")
        case .success(let answer):
            guard answer == "bytes=\(fileSize) intact=1" else {
                throw ConformanceFailure("\(fromFile): the server received \(answer)")
            }
        }
        try await checkUploadFraming("/upload?from=file", length: fileSize, fromFile, notes: &notes)

        if let downGrowth, let upGrowth {
            let bound = 32 << 20
            for (name, growth) in [("download", downGrowth), ("upload", upGrowth)] where growth > bound {
                throw ConformanceFailure(
                    "the 64 MiB \(name) grew the process's peak resident memory by \(growth >> 20) MiB (bound: 32 MiB): "
                        + "the body was held in memory")
            }
            notes.append("peak resident growth: download \(downGrowth >> 20) MiB, upload \(upGrowth >> 20) MiB")
        } else {
            notes.append(
                "memory not measured (it is in a child process on Linux, runInChildProcess, without a sanitizer)")
        }
        return notes.joined(separator: "; ")
    }

    /// An upload of known length went out framed validly: by its `Content-Length` (or chunked,
    /// noted), never both.
    private func checkUploadFraming(_ target: String, length: Int, _ what: String, notes: inout [String])
        async throws(ConformanceFailure)
    {
        let request = try await arrived(target, what)
        if let problem = Self.framingProblem(request, what) { throw problem }
        switch request.framing {
        case .contentLength(let sent) where sent == length: break
        case .chunked: notes.append("\(what) was sent chunked although its length was known")
        case .contentLength(let sent): throw ConformanceFailure("\(what): Content-Length \(sent) for \(length) bytes")
        case .none: throw ConformanceFailure("\(what): sent with neither Content-Length nor chunked framing")
        }
    }

    /// `work`'s result, or `nil` when it has not ended within `limit` (it is then left to finish).
    static func bounded<T: Sendable>(_ limit: Duration, _ work: @escaping @Sendable () async throws -> T) async
        -> Result<T, any Error>?
    {
        let first = FirstOf<Result<T, any Error>?>()
        let task = Task {
            do { first.offer(.success(try await work())) } catch { first.offer(.failure(error)) }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + limit.conformanceSeconds) { first.offer(nil) }
        let result = await first.value()
        if result == nil { task.cancel() }
        return result
    }
}

/// The first of several offered values, handed to one waiter.
final class FirstOf<Value: Sendable>: Sendable {
    private let state = Locked<(offered: Bool, value: Value?, waiter: CheckedContinuation<Value, Never>?)>((false, nil, nil))

    func offer(_ value: Value) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, Never>? in
            guard !state.offered else { return nil }
            state.offered = true
            state.value = value
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: value)
    }

    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> (Bool, Value?) in
                if state.offered { return (true, state.value) }
                state.waiter = continuation
                return (false, nil)
            }
            if ready.0, let value = ready.1 { continuation.resume(returning: value) }
        }
    }
}

/// The names of the ending hooks that ran (`success` or the error's name), in order.
final class Endings: Sendable {
    private let first = FirstOf<String>()
    func record(_ name: String) { first.offer(name) }
    /// The first ending, or `nil` when none came within `limit`.
    func first(within limit: Duration) async -> String? {
        let bounded = FirstOf<String?>()
        Task { bounded.offer(await first.value()) }
        DispatchQueue.global().asyncAfter(deadline: .now() + limit.conformanceSeconds) { bounded.offer(nil) }
        return await bounded.value()
    }
}

/// Reports each request's ending to ``Endings``.
struct EndingReporter: SuccessObserving, FailureObserving {
    let endings: Endings
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { endings.record("success") }
    func afterFailure(_ error: NetworkError, context: RequestContext) async { endings.record(error.name) }
}

/// Holds a value, as an app holds a response it no longer reads.
final class Kept: Sendable {
    private let value = Locked<(any Sendable)?>(nil)
    func keep(_ kept: any Sendable) { value.withLock { $0 = kept } }
    func release() { value.withLock { $0 = nil } }
}

/// The process's resident memory (Linux: `/proc/self/status`). `package`: the test suite's child
/// process measures itself with it too.
package enum ResidentMemory {
    /// Whether this process's memory can be measured: on Linux, and not under a sanitizer, whose
    /// shadow memory grows with every allocation (the thread sanitizer's roughly quadruples it).
    package static var isAvailable: Bool {
        #if os(Linux)
            FileManager.default.isWritableFile(atPath: "/proc/self/clear_refs") && !underSanitizer
        #else
            false
        #endif
    }

    /// Whether the thread or address sanitizer's runtime is in this process.
    static let underSanitizer: Bool = {
        #if canImport(Glibc)
            dlsym(nil, "__tsan_init") != nil || dlsym(nil, "__asan_init") != nil
        #else
            false
        #endif
    }()

    /// Resets the peak to the current resident size; returns that size in bytes.
    package static func resetPeak() -> Int? {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return nil }
        try? handle.write(contentsOf: Data("5".utf8))
        try? handle.close()
        return field("VmRSS")
    }

    /// The peak since the last reset, less `before`.
    package static func growth(since before: Int) -> Int? { field("VmHWM").map { max(0, $0 - before) } }

    /// The resident size now, in bytes.
    package static func current() -> Int? { field("VmRSS") }

    private static func field(_ name: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
            return kilobytes.map { $0 * 1024 }
        }
        return nil
    }
}
