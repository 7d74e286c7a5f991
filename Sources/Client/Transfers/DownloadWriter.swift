import ConveyorBehaviors
import ConveyorPipeline
import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Writes a download's body to a partial file next to its destination, resumes it with `Range`
/// where the server allows, and moves it into place at the end, in one `rename`, so the
/// destination never holds part of a body.
///
/// Files, for a destination `movie.mp4`:
/// - `.movie.mp4.conveyor-partial`: the bytes so far;
/// - `.movie.mp4.conveyor-partial-info`: what a later download needs to resume: a SHA-256 of
///   the URL (never the URL, which may carry a token) and the validator (`ETag` or
///   `Last-Modified`), written only when the server supports ranges.
final class DownloadWriter: ResponseBodyTaker {
    /// Writes bytes to a file descriptor; replaced in tests to simulate a full disk.
    typealias WriteBytes = @Sendable (Int32, UnsafeRawBufferPointer) -> Int

    let destination: URL
    let partial: URL
    let info: URL
    private let acceptable: Set<Int>
    private let maxSize: Int64?
    private let writeBytes: WriteBytes

    private struct State {
        var fd: Int32 = -1
        /// Bytes in the partial file.
        var offset: Int64 = 0
        /// Bytes the current attempt started from (its progress origin).
        var start: Int64 = 0
        /// The resource's validator, once a response gave one.
        var validator: String?
        /// Whether the server supports resuming (ranges and a validator).
        var resumable = false
        /// The URL's key, to match a partial file with its download.
        var key = ""
        /// The current attempt's body went to the file.
        var took = false
        /// The caller set its own `Range`: no resuming.
        var callerRange = false
        /// The length the file must reach: the representation's complete length (a `206`'s
        /// `Content-Range`, a `200`'s `Content-Length` without content coding), when known.
        var expectedTotal: Int64?
        /// A resume was answered by something else than the rest of the same body: the request
        /// is to be sent again from zero (once per call).
        var restartPending = false
        var restarted = false
        /// Bytes of the partial file whose write-back to disk has been started.
        var flushedTo: Int64 = 0
    }

    /// How many written bytes wait before their write-back to disk is started.
    static let writeBackEvery: Int64 = 8 << 20

    private let state = Locked(State())

    init(destination: URL, acceptable: Set<Int>, maxSize: Int64?, writeBytes: WriteBytes? = nil) {
        self.destination = destination
        let directory = destination.deletingLastPathComponent()
        let name = destination.lastPathComponent
        partial = directory.appendingPathComponent(".\(name).conveyor-partial")
        info = directory.appendingPathComponent(".\(name).conveyor-partial-info")
        self.acceptable = acceptable
        self.maxSize = maxSize
        self.writeBytes = writeBytes ?? { fd, buffer in buffer.baseAddress.map { write(fd, $0, buffer.count) } ?? 0 }
    }

    private var fileName: String { destination.lastPathComponent }

    /// Opens the partial file for `request`, keeping the bytes of an earlier download of the same
    /// URL that can be resumed.
    /// - Throws: ``NetworkError/fileFailed(file:underlying:)`` when the destination's directory
    ///   cannot hold the file.
    func open(for request: HTTPRequest) throws(NetworkError) {
        let key = SHA256.hex(request.url.absoluteString)
        let saved = (try? Data(contentsOf: info)).flatMap { try? JSONDecoder().decode(SavedInfo.self, from: $0) }
        let flags = O_WRONLY | O_CREAT
        let fd = partial.withUnsafeFileSystemRepresentation { path in path.map { Foundation.open($0, flags, 0o644) } ?? -1 }
        guard fd >= 0 else { throw failure(errno) }
        var offset: Int64 = 0
        var validator: String?
        if let saved, saved.version == 1, saved.key == key {
            offset = Int64(lseek(fd, 0, SEEK_END))
            validator = saved.validator
        } else {
            _ = ftruncate(fd, 0)
            try? FileManager.default.removeItem(at: info)
        }
        let callerRange = request.headers.contains("Range")
        state.withLock { state in
            state.fd = fd
            state.offset = max(0, offset)
            state.flushedTo = state.offset
            state.validator = validator
            state.resumable = validator != nil && offset > 0
            state.key = key
            state.callerRange = callerRange
        }
    }

    /// The headers that ask for the rest of the body, for an attempt about to be sent.
    func resumeHeaders() -> (range: String, ifRange: String)? {
        state.withLock { state in
            state.took = false
            guard !state.callerRange, state.resumable, state.offset > 0, let validator = state.validator else { return nil }
            return ("bytes=\(state.offset)-", validator)
        }
    }

    func takesBody(of head: HTTPResponse, attempt: Int) throws(NetworkError) -> Bool {
        guard acceptable.contains(head.status) else { return false }
        let headers = head.headers
        let etag = headers["ETag"].flatMap { $0.hasPrefix("W/") ? nil : $0 }
        let validator = etag ?? headers["Last-Modified"]
        let ranges = headers.values(for: "Accept-Ranges").contains { value in
            HeaderBytes.listMembers(Array(value.utf8)[...]).contains { HeaderBytes.equalsIgnoringCase($0, "bytes") }
        }
        let range = headers["Content-Range"].flatMap(ContentRange.init)
        // Bytes on the wire differ from bytes written when the body is content-coded (a session
        // inflates gzip): only an identity body's Content-Length says how long the file gets.
        let coded = headers["Content-Encoding"].map { $0.trimmingCharacters(in: .whitespaces).lowercased() != "identity" } ?? false
        let declared = coded ? nil : headers["Content-Length"].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
        let result = state.withLock { state -> Result<Bool, NetworkError> in
            do throws(NetworkError) {
                var expected: Int64?
                if head.status == 206 && !state.callerRange {
                    // The rest of *the same* representation, from where the file ends, to its end:
                    // anything else would splice two versions or finish short.
                    // A content-coded 206 is never one: the file counts inflated bytes, the
                    // server's range counts coded ones.
                    guard let range, range.first == state.offset, let complete = range.completeLength,
                        range.last == complete - 1, state.offset == 0 || (validator != nil && validator == state.validator),
                        state.offset == 0 || !coded
                    else {
                        try truncate(&state)
                        state.resumable = false
                        state.validator = nil
                        saveInfo(state)
                        // Sent again without Range, once: a server that answers that with such a
                        // 206 too fails the download.
                        state.restartPending = !state.restarted
                        throw .transportFailed(
                            FileProblem("the server's 206 does not continue the same body from the offset; it starts over"))
                    }
                    expected = complete
                } else {
                    try truncate(&state)
                    if head.status == 206, let range { expected = range.last - range.first + 1 } else { expected = declared }
                }
                if let maxSize, let expected, expected > maxSize {
                    try truncate(&state)
                    throw .responseTooLarge(limit: Int(clamping: maxSize))
                }
                guard lseek(state.fd, 0, SEEK_END) >= 0 else { throw failure(errno) }
                state.start = state.offset
                state.took = true
                state.expectedTotal = expected
                state.validator = validator
                // Only an identity body resumes: a transport that inflates a coded one (URLSession
                // does) writes more bytes than the server sent, so no Range from the file's
                // length names the bytes that follow.
                state.resumable = validator != nil && (ranges || head.status == 206) && !state.callerRange && !coded
                saveInfo(state)
                return .success(true)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    func receive(_ chunk: Data) async throws(NetworkError) {
        let problem = state.withLock { state -> NetworkError? in
            // Every byte of the destination counts, across attempts.
            if let maxSize, state.offset + Int64(chunk.count) > maxSize {
                return .responseTooLarge(limit: Int(clamping: maxSize))
            }
            if let expected = state.expectedTotal, state.offset + Int64(chunk.count) > expected {
                return .transportFailed(FileProblem("the body is longer than the server declared"))
            }
            if let code = writeAll(chunk, to: state.fd) { return failure(code) }
            state.offset += Int64(chunk.count)
            if state.offset - state.flushedTo >= Self.writeBackEvery { Self.startWriteBack(&state) }
            return nil
        }
        if let problem { throw problem }
    }

    /// Starts writing the bytes written since the last call back to disk, without waiting for
    /// them: the `fsync` that ends a download then has little left to do (it took 0.44–0.76 s of
    /// a 1 GiB download when the whole file waited for it). On Linux `POSIX_FADV_DONTNEED` starts
    /// the write-back of the range's dirty pages (and drops the clean ones from the page cache: a
    /// large download does not crowd out the rest); elsewhere the final `fsync` does it all.
    private static func startWriteBack(_ state: inout State) {
        #if os(Linux)
            _ = posix_fadvise(state.fd, off_t(state.flushedTo), off_t(state.offset - state.flushedTo), POSIX_FADV_DONTNEED)
        #endif
        state.flushedTo = state.offset
    }

    /// Writes all of `data`; returns the `errno` of a failure.
    private func writeAll(_ data: Data, to fd: Int32) -> Int32? {
        data.withUnsafeBytes { raw -> Int32? in
            var written = 0
            while written < raw.count {
                let count = writeBytes(fd, UnsafeRawBufferPointer(rebasing: raw[written...]))
                if count < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if count == 0 { return ENOSPC }
                written += count
            }
            return nil
        }
    }

    func retryForbiddenReason(for request: HTTPRequest, context: RequestContext) -> String? { nil }

    /// After a resume answered by something else than the rest of the same body: send the
    /// request again, from zero, at once (a new run of attempts). Otherwise the behaviors decide.
    func decision(after failure: NetworkError) async -> TakerDecision? {
        state.withLock { state -> TakerDecision? in
            guard state.restartPending else { return nil }
            state.restartPending = false
            state.restarted = true
            return .reconnect(after: .zero)
        }
    }

    var resumedBytes: Int64 { state.withLock { $0.start } }

    /// A file's bytes are read by no one while they arrive: they may wait for a batch.
    var takesBytesInBatches: Bool { true }

    /// The download succeeded with `response`: writes its body if a behavior answered in memory,
    /// then moves the file into place.
    func finish(with response: HTTPResponse) throws(NetworkError) {
        let (fd, took, offset, expected) = state.withLock { ($0.fd, $0.took, $0.offset, $0.expectedTotal) }
        if took, let expected, offset != expected {
            // A body that ended short of the representation's length is never moved into place.
            throw .transportFailed(FileProblem("the body ended at \(offset) of \(expected) bytes"))
        }
        if !took {
            if let maxSize, Int64(response.body.count) > maxSize { throw .responseTooLarge(limit: Int(clamping: maxSize)) }
            let problem = state.withLock { state -> NetworkError? in
                do throws(NetworkError) {
                    try truncate(&state)
                    return nil
                } catch {
                    return error
                }
            }
            if let problem { throw problem }
            if let code = writeAll(response.body, to: fd) { throw failure(code) }
        }
        guard fsync(fd) == 0 || errno == EINVAL else { throw failure(errno) }
        close()
        let moved = partial.withUnsafeFileSystemRepresentation { from in
            destination.withUnsafeFileSystemRepresentation { to in
                guard let from, let to else { return Int32(-1) }
                return rename(from, to)
            }
        }
        guard moved == 0 else {
            let code = errno
            discard()
            throw failure(code)
        }
        try? FileManager.default.removeItem(at: info)
    }

    /// The download failed with `error`: keeps the partial file when a later call can resume
    /// it, removes it otherwise (always after a file error).
    func abandon(after error: NetworkError) {
        let keep = state.withLock { state -> Bool in
            if case .fileFailed = error { return false }
            return state.resumable && state.offset > 0 && !state.callerRange
        }
        close()
        if !keep { discard() }
    }

    private func close() {
        let fd = state.withLock { state -> Int32 in
            defer { state.fd = -1 }
            return state.fd
        }
        if fd >= 0 { _ = Foundation.close(fd) }
    }

    private func discard() {
        try? FileManager.default.removeItem(at: partial)
        try? FileManager.default.removeItem(at: info)
    }

    private func truncate(_ state: inout State) throws(NetworkError) {
        guard ftruncate(state.fd, 0) == 0, lseek(state.fd, 0, SEEK_SET) == 0 else { throw failure(errno) }
        state.offset = 0
        state.start = 0
        state.flushedTo = 0
    }

    private func saveInfo(_ state: State) {
        if state.resumable, let validator = state.validator,
            let data = try? JSONEncoder().encode(SavedInfo(version: 1, key: state.key, validator: validator))
        {
            try? data.write(to: info, options: .atomic)
        } else {
            try? FileManager.default.removeItem(at: info)
        }
    }

    private func failure(_ code: Int32) -> NetworkError {
        .fileFailed(file: fileName, underlying: POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO))
    }

    /// The first byte's offset in a `Content-Range: bytes a-b/n` header.
    static func rangeStart(_ header: String?) -> Int64? {
        header.flatMap(ContentRange.init)?.first
    }

    private struct SavedInfo: Codable {
        let version: Int
        let key: String
        let validator: String
    }
}

/// Asks for the rest of a partly downloaded body on every attempt: `Range` and `If-Range` (so a
/// changed resource comes back whole). Added by ``NetworkClient/download(_:to:maxSize:)``.
struct ResumeDownloadBehavior: RequestModifying {
    let writer: DownloadWriter

    var name: String { "ResumeDownload" }

    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        guard let (range, ifRange) = writer.resumeHeaders() else { return }
        request.headers["Range"] = range
        request.headers["If-Range"] = ifRange
    }
}
