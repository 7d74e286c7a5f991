import ConveyorPipeline

#if canImport(FoundationNetworking)
    import Foundation
    import FoundationNetworking
#else
    import Foundation
#endif

/// One data task whose response body goes to the request's ``TransferHandler`` as it arrives
/// (a download to a file, a streamed response), in bounded memory.
///
/// The session's delegate queue cannot wait, so chunks queue here and the caller's task hands
/// them on, awaiting the receiver. When more than ``highWater`` bytes wait, the data task is
/// suspended (FoundationNetworking then pauses the connection's reads, so the server is slowed by
/// TCP flow control), and resumed below ``lowWater``.
final class StreamingExchange: TaskExchange {
    static let highWater = 2 << 20
    static let lowWater = 512 << 10

    private enum Event {
        case head(URLResponse)
        case chunk(Data)
        case end((any Error)?)
    }

    private struct State {
        var events: [Event] = []
        var next = 0
        var queued = 0
        var suspended = false
        var ended = false
        var waiter: CheckedContinuation<Void, Never>?
        var task: URLSessionDataTask?
        var tooManyRedirects = false
        var manualRedirect: ManualRedirect?
        var requestSent: Duration?
    }

    let request: HTTPRequest
    let redirectsBefore: Int
    private let transfer: TransferHandler
    private let session: URLSession
    private let state = Locked(State())
    private let completing = Locked(false)
    private let started = ContinuousClock.now

    init(request: HTTPRequest, transfer: TransferHandler, session: URLSession, redirectsBefore: Int) {
        self.request = request
        self.transfer = transfer
        self.session = session
        self.redirectsBefore = redirectsBefore
    }

    // MARK: The delegate's side (the session's delegate queue)

    func followManually(to target: URL, redirectsSoFar: Int) {
        state.withLock { $0.manualRedirect = ManualRedirect(target: target, redirectsSoFar: redirectsSoFar) }
    }

    func stopRedirecting() { state.withLock { $0.tooManyRedirects = true } }

    func collected(_ timings: TransferTimings) {}

    func sentBody(_ bytes: Int64, of expected: Int64) {
        transfer.sent(bytes, of: expected >= 0 ? expected : request.bodyStream?.length)
        guard expected < 0 || bytes >= expected else { return }
        let now = ContinuousClock.now
        state.withLock { $0.requestSent = started.duration(to: now) }
    }

    func receivedHead(_ response: URLResponse) { push(.head(response), bytes: 0) }

    func receive(_ data: Data) {
        let suspend = push(.chunk(data), bytes: data.count)
        if let suspend { suspend.suspend() }
    }

    func complete(response: URLResponse?, error: (any Error)?) {
        completing.withLock { $0 = true }
        let (tooMany, manual) = state.withLock { ($0.tooManyRedirects, $0.manualRedirect) }
        let ending: (any Error)? =
            error ?? (tooMany ? NetworkError.tooManyRedirects : nil) ?? manual
            ?? (response is HTTPURLResponse ? nil : NetworkError.transportFailed(NotHTTPResponseError()))
        push(.end(ending), bytes: 0)
    }

    /// Queues an event; returns the task when it should be suspended (too much is waiting).
    @discardableResult
    private func push(_ event: Event, bytes: Int) -> URLSessionDataTask? {
        let (waiter, suspend) = state.withLock { state -> (CheckedContinuation<Void, Never>?, URLSessionDataTask?) in
            guard !state.ended else { return (nil, nil) }
            state.events.append(event)
            state.queued += bytes
            var suspend: URLSessionDataTask?
            if state.queued > Self.highWater && !state.suspended, let task = state.task {
                state.suspended = true
                suspend = task
            }
            return (state.waiter.take(), suspend)
        }
        waiter?.resume()
        return suspend
    }

    // MARK: The caller's side

    /// Starts `task`, hands its body on as it arrives, and returns the response (its body empty
    /// if the transfer took it).
    func run(_ task: URLSessionDataTask) async throws -> HTTPResponse {
        state.withLock { $0.task = task }
        task.resume()
        do {
            return try await withTaskCancellationHandler {
                try await consume()
            } onCancel: {
                end()
            }
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
            switch try await nextEvent() {
            case .head(let response):
                guard let http = response as? HTTPURLResponse else { continue }
                head = http
                firstByte = started.duration(to: .now)
                let status = http.statusCode
                taking = try transfer.takesBody(
                    of: HTTPResponse(status: status, deferredHeaders: { responseHeaders(http) }, body: Data(), request: request))
            case .chunk(let data):
                if firstByte == nil { firstByte = started.duration(to: .now) }
                size += Int64(data.count)
                if taking {
                    try await transfer.receive(data)
                } else {
                    if let limit = request.maxResponseSize, collected.count + data.count > limit {
                        throw NetworkError.responseTooLarge(limit: limit)
                    }
                    collected.append(data)
                    transfer.received(size, of: head.flatMap { $0.expectedContentLength >= 0 ? $0.expectedContentLength : nil })
                }
                resumeIfDrained()
            case .end(let error):
                if let error { throw error }
                guard let head else { throw NetworkError.transportFailed(NotHTTPResponseError()) }
                var response = HTTPResponse(
                    status: head.statusCode, deferredHeaders: { responseHeaders(head) }, body: collected, request: request)
                let sent = state.withLock { $0.requestSent }
                response.timings = TransferTimings(
                    requestSent: sent, firstByte: firstByte, complete: started.duration(to: .now),
                    requestBodyBytes: Int(clamping: request.bodyStream?.length ?? Int64(request.body?.count ?? 0)),
                    responseBodyBytes: Int(clamping: size))
                return response
            }
        }
    }

    private func nextEvent() async throws -> Event {
        while true {
            if Task.isCancelled { throw URLError(.cancelled) }
            let event = state.withLock { state -> Event? in
                guard state.next < state.events.count else { return nil }
                let event = state.events[state.next]
                state.events[state.next] = .end(nil)
                state.next += 1
                if state.next == state.events.count {
                    state.events.removeAll(keepingCapacity: true)
                    state.next = 0
                }
                if case .chunk(let data) = event { state.queued -= data.count }
                return event
            }
            if let event { return event }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if state.next < state.events.count || state.ended { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    private func resumeIfDrained() {
        let task = state.withLock { state -> URLSessionDataTask? in
            guard state.suspended, state.queued < Self.lowWater else { return nil }
            state.suspended = false
            return state.task
        }
        task?.resume()
    }

    /// The caller left (cancelled, or the receiver failed): wake it and drop what is queued.
    private func end() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.ended = true
            state.events = []
            state.next = 0
            state.queued = 0
            return state.waiter.take()
        }
        waiter?.resume()
    }
}

extension Optional {
    /// The value, leaving `nil` behind.
    fileprivate mutating func take() -> Wrapped? {
        defer { self = nil }
        return self
    }
}
