import ConveyorPipeline

#if canImport(FoundationNetworking)
    import Foundation
    import FoundationNetworking
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#elseif canImport(Musl)
    import Musl
#endif

/// One data task whose response body goes to the request's ``TransferHandler`` as it arrives
/// (a download to a file, a streamed response), in bounded memory.
///
/// Chunks queue here and the caller's task hands them on, awaiting the receiver (which waits for
/// its reader: that is the backpressure the caller sees). Up to ``memoryLimit`` bytes wait in
/// memory; beyond that, while the receiver is behind, chunks wait in a temporary file
/// (``SpillFile``) and are read back in order. The excess is written there on the session's
/// delegate queue, as it arrives: while the disk is slower than the network, the delegate queue
/// falls behind and ``DelegateQueue`` holds FoundationNetworking back, so the bytes wait in the
/// sender's socket, not here. (Spilling on a queue of its own instead let a 4 GB download queue
/// 250 MB in memory behind a disk busy writing back.) The delegate queue never waits for the
/// reader: a slow reader would stall every request of the session.
///
/// Why not pause the transfer? FoundationNetworking's `suspend()` takes effect only when the
/// session's work queue is free, and while a fast transfer is arriving it is not: measured over
/// loopback, 90 of 96 MiB had arrived before a suspend ran. And a suspend that lands just as the
/// task completes traps in FoundationNetworking ("NativeProtocol.swift: Fatal error", seen while
/// writing `aSlowReaderHoldsTheTransferBack`). A temporary file bounds memory whatever the
/// speeds, and costs nothing when the reader keeps up.
package final class StreamingExchange: TaskExchange {
    static let memoryLimit = 2 << 20
    /// Bytes at the head of the queue that stay in memory when the rest is spilled.
    static let keptInMemory = 512 << 10
    /// Consecutive chunks are handed on joined, up to this many bytes: fewer, larger writes.
    static let batch = 256 << 10
    /// The most FoundationNetworking hands over in one chunk (libcurl's `CURL_MAX_WRITE_SIZE`):
    /// a shorter chunk ends what one read of the socket returned.
    static let fullChunk = 16 << 10

    private enum Event {
        case head(URLResponse)
        case chunk(Data)
        /// This many bytes wait in the spill file, next in order.
        case spilled(Int)
        /// Chunks being moved to the spill file: the reader waits for them.
        case spilling
        case end((any Error)?)
    }

    private struct State {
        var events: [Event] = []
        var next = 0
        /// Bytes waiting in memory.
        var queued = 0
        var ended = false
        var waiter: CheckedContinuation<Void, Never>?
        var task: URLSessionDataTask?
        var tooManyRedirects = false
        var manualRedirect: ManualRedirect?
        var requestSent: Duration?
        var spill: SpillFile?
        /// Bytes in the spill file not read yet.
        var spilledUnread = 0
        /// A ``spillExcess()`` run is scheduled or running.
        var spillScheduled = false
    }

    let request: HTTPRequest
    /// The request the pipeline sent, before any redirect this transport followed itself.
    private let asked: HTTPRequest
    let redirectsBefore: Int
    private let transfer: TransferHandler
    private let session: URLSession
    private let state = Locked(State())
    private let completing = Locked(false)
    /// Whether the caller, waiting for bytes, is woken once per batch rather than per chunk
    /// (``TransferHandler/takesBytesInBatches``: a download to a file).
    private let wakesPerBatch: Bool
    private let started = ContinuousClock.now

    /// The transport's count of bytes that ever waited in a spill file.
    private let spilled: Locked<Int64>

    init(
        request: HTTPRequest, asked: HTTPRequest, transfer: TransferHandler, session: URLSession,
        redirectsBefore: Int, spilled: Locked<Int64>
    ) {
        self.request = request
        self.asked = asked
        self.spilled = spilled
        self.transfer = transfer
        self.session = session
        self.redirectsBefore = redirectsBefore
        self.wakesPerBatch = transfer.takesBytesInBatches
    }

    // MARK: The delegate's side (the session's delegate queue)

    func followManually(to next: HTTPRequest, redirectsSoFar: Int) {
        state.withLock { $0.manualRedirect = ManualRedirect(next: next, redirectsSoFar: redirectsSoFar) }
    }

    func stopRedirecting() { state.withLock { $0.tooManyRedirects = true } }

    func collected(_ timings: TransferTimings) {}

    func sentBody(_ bytes: Int64, of expected: Int64) {
        transfer.sent(bytes, of: expected >= 0 ? expected : request.bodyStream?.length)
        guard expected < 0 || bytes >= expected else { return }
        let now = ContinuousClock.now
        state.withLock { $0.requestSent = started.duration(to: now) }
    }

    func receivedHead(_ response: URLResponse) { push(.head(response)) }

    func receive(_ data: Data) {
        // O(1) on the delegate queue unless memory is full, when the excess goes to disk here.
        // A caller waiting for a download's bytes is woken when a batch waits, or when a chunk
        // shorter than a full one says the socket had no more for now; while full chunks arrive
        // back to back, the next is on its way. (Woken for every chunk, it was 57,000 wake-ups
        // a GiB.) Anything else that arrives (the end, a spilled region) wakes it at once.
        let (waiter, spill) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Bool) in
            guard !state.ended else { return (nil, false) }
            state.events.append(.chunk(data))
            state.queued += data.count
            let spill = state.queued > Self.memoryLimit && !state.spillScheduled
            if spill { state.spillScheduled = true }
            let wake = Self.wakes(afterChunkOf: data.count, queued: state.queued, perBatch: wakesPerBatch)
            return (wake ? state.waiter.take() : nil, spill)
        }
        waiter?.resume()
        if spill { spillExcess() }
    }

    /// Whether a chunk of `size` bytes, with `queued` bytes now waiting, wakes a caller waiting for
    /// bytes: always, unless it takes them ``perBatch``; then when a batch waits or the chunk is
    /// shorter than a full one.
    static func wakes(afterChunkOf size: Int, queued: Int, perBatch: Bool) -> Bool {
        !perBatch || size < fullChunk || queued >= batch
    }

    /// Moves the newest queued chunks to the spill file until at most ``memoryLimit`` bytes wait
    /// in memory. Runs on the delegate queue; the chunks moved become one `.spilled` event, in place,
    /// so the order of the body is kept.
    private func spillExcess() {
        while true {
            // Take the chunks after the last spilled region (and after the first
            // ``keptInMemory`` bytes, which the reader gets next), leaving a placeholder.
            let taken = state.withLock { state -> (SpillFile, [Data])? in
                guard !state.ended, state.queued > Self.memoryLimit else {
                    state.spillScheduled = false
                    return nil
                }
                if state.spill == nil {
                    do {
                        state.spill = try SpillFile()
                    } catch {
                        state.events.append(.end(error))
                        state.ended = true
                        state.spillScheduled = false
                        return nil
                    }
                }
                var start = state.next
                var kept = 0
                for index in state.next..<state.events.count {
                    switch state.events[index] {
                    case .spilled, .spilling: start = index + 1  // after the last spilled region
                    case .head: if index == start { start = index + 1 }
                    case .chunk(let data):
                        if index == start && kept < Self.keptInMemory {
                            kept += data.count
                            start = index + 1
                        }
                    case .end: break
                    }
                }
                var chunks: [Data] = []
                var end = start
                while end < state.events.count, case .chunk(let data) = state.events[end] {
                    chunks.append(data)
                    end += 1
                }
                guard !chunks.isEmpty, let spill = state.spill else {
                    state.spillScheduled = false
                    return nil
                }
                state.events.replaceSubrange(start..<end, with: [.spilling])
                state.queued -= chunks.reduce(0) { $0 + $1.count }
                return (spill, chunks)
            }
            guard let (spill, chunks) = taken else { return }
            var failure: NetworkError?
            var count = 0
            for chunk in chunks where failure == nil {
                failure = spill.write(chunk, at: spill.reserve(chunk.count))
                count += chunk.count
            }
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard !state.ended, let index = state.events.lastIndex(where: { if case .spilling = $0 { true } else { false } })
                else { return nil }
                if let failure {
                    state.events[index] = .end(failure)
                    state.ended = true
                } else {
                    state.events[index] = .spilled(count)
                    state.spilledUnread += count
                }
                return state.waiter.take()
            }
            spilled.withLock { $0 += Int64(count) }
            waiter?.resume()
            if failure != nil { return }
        }
    }

    func complete(response: URLResponse?, error: (any Error)?) {
        completing.withLock { $0 = true }
        let (tooMany, manual) = state.withLock { ($0.tooManyRedirects, $0.manualRedirect) }
        let ending: (any Error)? =
            error ?? (tooMany ? NetworkError.tooManyRedirects : nil) ?? manual
            ?? (response is HTTPURLResponse ? nil : NetworkError.transportFailed(NotHTTPResponseError()))
        push(.end(ending))
    }

    private func push(_ event: Event) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.ended else { return nil }
            state.events.append(event)
            return state.waiter.take()
        }
        waiter?.resume()
    }

    // MARK: The caller's side

    /// Starts `task`, hands its body on as it arrives, and returns the response (its body empty
    /// if the transfer took it).
    func run(_ task: URLSessionDataTask) async throws -> HTTPResponse {
        state.withLock { $0.task = task }
        task.resume()
        do {
            let response = try await withTaskCancellationHandler {
                try await consume()
            } onCancel: {
                end()
            }
            end()
            return response
        } catch {
            end()
            TaskCanceller.cancelLater(task, session: session, completing: completing)
            throw error
        }
    }

    private func consume() async throws -> HTTPResponse {
        var head: HTTPURLResponse?
        var firstByte: Duration?
        var taking = false
        var collected = Data()
        var size: Int64 = 0
        while true {
            let data: Data
            switch try await nextEvent() {
            case .head(let response):
                guard let http = response as? HTTPURLResponse else { continue }
                head = http
                firstByte = started.duration(to: .now)
                // The head as the behaviors see it if the body breaks off: the request they sent,
                // and no `Set-Cookie` from an origin other than its own (a redirect target,
                // followed by the session or by this transport).
                taking = try transfer.takesBody(
                    of: HTTPResponse(
                        status: http.statusCode, deferredHeaders: { [url = asked.url] in responseHeaders(http, requested: url) }, body: Data(), request: asked))
                continue
            case .chunk(let chunk):
                data = chunk
            case .spilled(let count):
                data = try readSpilled(count)
            case .spilling:
                continue  // never returned by nextEvent
            case .end(let error):
                if let error {
                    // FoundationNetworking reports a body cut short by the server as an unknown
                    // error (URLError -1), which would not be retried; it is a lost connection,
                    // and the case a download resumes for.
                    if let urlError = error as? URLError, urlError.code == .unknown, let head,
                        head.expectedContentLength >= 0, size < head.expectedContentLength
                    {
                        throw NetworkError.connectionFailed(URLError(.networkConnectionLost))
                    }
                    throw error
                }
                guard let head else { throw NetworkError.transportFailed(NotHTTPResponseError()) }
                var response = HTTPResponse(
                    status: head.statusCode, deferredHeaders: { [url = request.url] in responseHeaders(head, requested: url) }, body: collected, request: request)
                let sent = state.withLock { $0.requestSent }
                response.timings = TransferTimings(
                    requestSent: sent, firstByte: firstByte, complete: started.duration(to: .now),
                    requestBodyBytes: Int(clamping: request.bodyStream?.length ?? Int64(request.body?.count ?? 0)),
                    responseBodyBytes: Int(clamping: size))
                return response
            }
            if firstByte == nil { firstByte = started.duration(to: .now) }
            size += Int64(data.count)
            // A long transfer whose bytes are always ready would otherwise keep one of the
            // cooperative pool's threads (as many as there are cores) from every other task.
            await Task.yield()
            if taking {
                try await transfer.receive(data)
            } else {
                if let limit = request.maxResponseSize, collected.count + data.count > limit {
                    throw NetworkError.responseTooLarge(limit: limit)
                }
                collected.append(data)
                transfer.received(size, of: head.flatMap { $0.expectedContentLength >= 0 ? $0.expectedContentLength : nil })
            }
        }
    }

    /// The next event; consecutive chunks in memory come joined, up to ``batch`` bytes.
    private func nextEvent() async throws -> Event {
        while true {
            if Task.isCancelled { throw URLError(.cancelled) }
            var joined: [Data] = []
            let event = state.withLock { state -> Event? in
                guard state.next < state.events.count else { return nil }
                if case .spilling = state.events[state.next] { return nil }  // being written
                let event = state.events[state.next]
                state.events[state.next] = .end(nil)
                state.next += 1
                if case .chunk(let data) = event {
                    // The chunks that follow are taken here and joined outside the lock, each
                    // byte copied once (appending to the first chunk copied it again at every
                    // growth of the buffer: 1.9 copies of every byte of a download).
                    var count = data.count
                    while state.next < state.events.count, count < Self.batch,
                        case .chunk(let more) = state.events[state.next]
                    {
                        if joined.isEmpty { joined.append(data) }
                        joined.append(more)
                        count += more.count
                        state.events[state.next] = .end(nil)
                        state.next += 1
                    }
                    state.queued -= count
                } else if case .spilled(let count) = event, count > Self.batch {
                    // Read back a batch at a time; the rest stays next in line.
                    state.next -= 1
                    state.events[state.next] = .spilled(count - Self.batch)
                    return .spilled(Self.batch)
                }
                if state.next == state.events.count {
                    state.events.removeAll(keepingCapacity: true)
                    state.next = 0
                }
                return event
            }
            if !joined.isEmpty {
                var data = Data(capacity: joined.reduce(0) { $0 + $1.count })
                for chunk in joined { data.append(chunk) }
                return .chunk(data)
            }
            if let event { return event }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    let spilling: Bool
                    if state.next < state.events.count, case .spilling = state.events[state.next] { spilling = true } else { spilling = false }
                    if (state.next < state.events.count && !spilling) || state.ended { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// Reads the next `count` spilled bytes (outside the lock: the writer never waits for it).
    private func readSpilled(_ count: Int) throws -> Data {
        guard let (spill, offset) = state.withLock({ state in state.spill.map { ($0, $0.claimRead(count)) } }) else {
            throw NetworkError.transportFailed(NotHTTPResponseError())
        }
        let data = try spill.read(count, at: offset)
        try state.withLock { state throws in
            state.spilledUnread -= count
            // Caught up, with nothing being written: the file starts over.
            if state.spilledUnread == 0 && !state.spillScheduled { try state.spill?.reset() }
        }
        return data
    }

    /// The caller left, or the exchange ended: wake it, drop what is queued, remove the spill file.
    private func end() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.ended = true
            state.events = []
            state.next = 0
            state.queued = 0
            state.spill = nil  // closed when the last reader or writer lets go
            state.spilledUnread = 0
            return state.waiter.take()
        }
        waiter?.resume()
    }
}

/// A temporary file where chunks wait, in order, while their receiver is behind. Offsets are
/// handed out under the exchange's lock; the bytes are written and read outside it.
final class SpillFile: Sendable {
    private let fd: Int32
    /// Where the next write goes, and where the next read starts.
    private let offsets = Locked<(written: Int64, read: Int64)>((0, 0))

    init() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-stream-\(UUID().uuidString)")
        fd = url.withUnsafeFileSystemRepresentation { path in path.map { open($0, O_RDWR | O_CREAT | O_EXCL, 0o600) } ?? -1 }
        guard fd >= 0 else { throw Self.failure(errno) }
        unlink(url.path)  // gone from the directory at once; the space is freed when closed
    }

    deinit { close(fd) }

    func reserve(_ count: Int) -> Int64 {
        offsets.withLock { offsets in
            defer { offsets.written += Int64(count) }
            return offsets.written
        }
    }

    func claimRead(_ count: Int) -> Int64 {
        offsets.withLock { offsets in
            defer { offsets.read += Int64(count) }
            return offsets.read
        }
    }

    /// Writes `data` at `offset`; returns the failure, if any.
    func write(_ data: Data, at offset: Int64) -> NetworkError? {
        let code = data.withUnsafeBytes { raw -> Int32? in
            var done = 0
            while done < raw.count {
                guard let base = raw.baseAddress else { return nil }
                let count = pwrite(fd, base + done, raw.count - done, off_t(offset) + off_t(done))
                if count < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += count
            }
            return nil
        }
        return code.map(Self.failure)
    }

    func read(_ count: Int, at offset: Int64) throws -> Data {
        var data = Data(count: count)
        let code = data.withUnsafeMutableBytes { raw -> Int32? in
            var done = 0
            while done < count {
                guard let base = raw.baseAddress else { return nil }
                let got = pread(fd, base + done, count - done, off_t(offset) + off_t(done))
                if got < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if got == 0 { return EIO }
                done += got
            }
            return nil
        }
        if let code { throw Self.failure(code) }
        return data
    }

    /// Everything written was read: start the file over.
    func reset() throws {
        try offsets.withLock { offsets throws in
            guard ftruncate(fd, 0) == 0 else { throw Self.failure(errno) }
            offsets = (0, 0)
        }
    }

    private static func failure(_ code: Int32) -> NetworkError {
        .fileFailed(file: "a temporary stream buffer", underlying: POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO))
    }
}
