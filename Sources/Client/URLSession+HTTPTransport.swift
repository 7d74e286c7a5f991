public import ConveyorPipeline

#if canImport(FoundationNetworking)
    import Foundation
    public import FoundationNetworking
#else
    public import Foundation
#endif

/// `URLSession` is an ``HTTPTransport`` as it is: pass `URLSession.shared` or your own session.
///
/// It builds the `URLRequest` once per attempt, after every behavior has run. Settings only
/// URLSession knows (cache policy, cellular access, cookies) come from its configuration.
///
/// - Important: A plain session follows redirects by its own rules; on Linux it forwards every
///   header, `Authorization` included, to a redirect target on another origin. ``NetworkClient``'s
///   default transport, ``URLSessionTransport``, strips credentials on cross-origin redirects and
///   caps redirect chains; prefer it unless you need your own session's delegate.
/// The request's timeout is enforced by ``NetworkClient`` on its clock, so sub-second timeouts
/// work on Linux too; the `URLRequest` gets a whole-second backstop one second longer.
/// Cancellation returns at once and never cancels the data task synchronously (see
/// ``send(_:)``).
///
/// - Important: On Linux, a session with a `URLCache` (`.default` and `.ephemeral` both have one)
///   can crash the process when one of its tasks is cancelled just after it starts
///   (FoundationNetworking reports the cancellation after the task has left the session:
///   swift-corelibs-foundation#3296). So on Linux a cancelled call to such a session returns at
///   once but leaves its data task to finish on its own. Give the session `urlCache = nil`, or use
///   ``URLSessionTransport``, which has no `URLCache` on Linux, to have transfers stopped.
extension URLSession: HTTPTransport {
    /// Sends one attempt with a data task and a completion handler.
    ///
    /// Cancelling the caller's task ends the call at once with `URLError(.cancelled)`; the data
    /// task is cancelled on another queue, never inside Swift's cancellation handler, which can
    /// deadlock the process on Linux (swift-corelibs-foundation#5412, `data(for:)` there).
    /// ``HTTPRequest/maxResponseSize`` is checked once the body has arrived;
    /// ``URLSessionTransport`` checks it while bytes arrive.
    /// - Parameter request: The attempt, after every behavior ran.
    /// - Returns: The response, whatever its status.
    /// - Throws: `URLError` (mapped by the client to ``NetworkError``), or
    ///   ``NetworkError/transportFailed(_:)`` when the response is not HTTP.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        // The pipeline refuses these already; a direct caller gets the same answer.
        if let framing = request.framingProblem { throw NetworkError.invalidRequest(framing) }
        let exchange = DataTaskExchange(request: request, session: self)
        let task = dataTask(with: ConveyorClientSend.urlRequest(for: request)) { data, response, error in
            if let data { exchange.receive(data) }
            exchange.complete(response: response, error: error)
        }
        return try await exchange.run(task)
    }

    /// `true`: a cancelled call returns at once, whatever the session is doing.
    public var honorsCancellation: Bool { true }
}

enum ConveyorClientSend {
    /// The interval a `URLRequest` gets when the engine alone times the attempt (an event
    /// stream's idle timeout, or none): ten years, far past any idle timeout, and small enough
    /// that FoundationNetworking's conversion to milliseconds cannot overflow.
    static let engineTimedInterval: TimeInterval = 10 * 365 * 24 * 3600

    /// Builds the `URLRequest` once, after every behavior has run.
    /// - Parameters:
    ///   - request: The attempt.
    ///   - timesOutWhenIdle: Whether the engine times the attempt by an idle timeout of its own
    ///     (``TransferHandler/timesOutWhenIdle``): then neither the request's timeout nor
    ///     URLSession's default (60 s, which FoundationNetworking applies to a request that sets
    ///     none) may end it.
    static func urlRequest(for request: HTTPRequest, timesOutWhenIdle: Bool = false) -> URLRequest {
        var urlRequest = URLRequest(url: request.url)
        // GET is URLRequest's default; setting it anyway costs a case-insensitive normalization
        // of the method on Linux (thousands of instructions).
        if request.method != .get { urlRequest.httpMethod = request.method.rawValue }
        if !request.headers.isEmpty { urlRequest.allHTTPHeaderFields = headerDictionary(request.headers) }
        if let body = request.body { urlRequest.httpBody = body }
        #if canImport(FoundationNetworking)
            // FoundationNetworking labels a POST body that has no type
            // `application/x-www-form-urlencoded`, which a server would parse as a form: bytes in
            // memory, and a file streamed on Linux (`URLSessionTransport.uploadTask`). A blank
            // value stops it, and libcurl sends no field for a blank value.
            if request.body != nil || request.bodyStream != nil, !request.headers.contains("Content-Type") {
                urlRequest.setValue(" ", forHTTPHeaderField: "Content-Type")
            }
        #endif
        if timesOutWhenIdle {
            urlRequest.timeoutInterval = engineTimedInterval
        } else if let timeout = request.timeout {
            // A whole-second backstop one second longer than the client's own timeout (Linux
            // truncates sub-second intervals); clamped, so a huge timeout never overflows.
            urlRequest.timeoutInterval = timeout.clampedForConveyor.secondsValue.rounded(.up) + 1
        }
        return urlRequest
    }
}

/// What the session delegate tells about one task: its bytes, head, redirects and end.
protocol TaskExchange: AnyObject, Sendable {
    var request: HTTPRequest { get }
    var redirectsBefore: Int { get }
    func followManually(to next: HTTPRequest, redirectsSoFar: Int)
    func receivedHead(_ response: URLResponse)
    func sentBody(_ bytes: Int64, of expected: Int64)
    func collected(_ timings: TransferTimings)
    func receive(_ data: Data)
    func stopRedirecting()
    func complete(response: URLResponse?, error: (any Error)?)
}

/// One data task in flight: collects its body, enforces the request's size limit while bytes
/// arrive, and resumes the caller exactly once, with the response, an error, or at once when
/// the caller's task is cancelled.
final class DataTaskExchange: TaskExchange {
    private struct State {
        var continuation: CheckedContinuation<Void, Never>?
        /// How the exchange ended. The caller reads it under the lock after it is resumed, so
        /// the response (made on the session's delegate queue) is published by the lock, which
        /// the thread sanitizer sees, not only by the continuation, which it does not always.
        var outcome: Result<HTTPResponse, any Error>?
        var finished = false
        var task: URLSessionDataTask?
        /// The body as it arrived: chunks are kept, not copied into a growing buffer, so a body
        /// that passes the limit never holds more than the limit and one chunk.
        var chunks: [Data] = []
        var size = 0
        /// The transport stopped following redirects at its limit.
        var tooManyRedirects = false
        /// A redirect the transport follows itself (see ``followManually(to:redirectsSoFar:)``).
        var manualRedirect: ManualRedirect?
        /// Phases seen so far, as durations since `started`.
        var firstByte: Duration?
        var requestSent: Duration?
        /// What the platform's `URLSessionTaskMetrics` reported (Apple platforms).
        var platformTimings: TransferTimings?
        /// The body's announced length, for progress.
        var expectedLength: Int64?
    }

    let request: HTTPRequest
    /// Who hears of upload and download progress (a streaming transport's transfer).
    let transfer: TransferHandler?
    private let state = Locked(State())
    /// The session whose task this is, checked for a `URLCache` before cancelling on Linux.
    private let session: URLSession
    /// `true` once the task reported its end. Held across `cancel()`, so a task is never
    /// cancelled while FoundationNetworking is completing it (see ``cancelLater(_:)``).
    private let completing = Locked(false)

    /// When the exchange began: the origin of its ``TransferTimings``.
    private let started = ContinuousClock.now

    /// Redirects followed by earlier exchanges of the same attempt (``URLSessionTransport``
    /// follows some itself), counted against its limit.
    let redirectsBefore: Int

    init(request: HTTPRequest, transfer: TransferHandler? = nil, session: URLSession, redirectsBefore: Int = 0) {
        self.request = request
        self.transfer = transfer
        self.session = session
        self.redirectsBefore = redirectsBefore
    }

    /// The task ends at this redirect, which the transport then sends itself.
    func followManually(to next: HTTPRequest, redirectsSoFar: Int) {
        state.withLock { $0.manualRedirect = ManualRedirect(next: next, redirectsSoFar: redirectsSoFar) }
    }

    /// The response's head arrived.
    func receivedHead(_ response: URLResponse) {
        let now = ContinuousClock.now
        let length = response.expectedContentLength
        state.withLock { state in
            if state.firstByte == nil { state.firstByte = started.duration(to: now) }
            state.expectedLength = length >= 0 ? length : nil
        }
    }

    /// Body bytes were sent: `bytes` so far of `expected` (negative when unknown).
    func sentBody(_ bytes: Int64, of expected: Int64) {
        transfer?.sent(bytes, of: expected >= 0 ? expected : request.bodyStream?.length)
        guard expected < 0 || bytes >= expected else { return }
        let now = ContinuousClock.now
        state.withLock { $0.requestSent = started.duration(to: now) }
    }

    /// The phases the platform measured (Apple's `URLSessionTaskMetrics`), as durations since
    /// the exchange began.
    func collected(_ timings: TransferTimings) {
        state.withLock { $0.platformTimings = timings }
    }

    /// Starts `task` and waits for it to end.
    func run(_ task: URLSessionDataTask) async throws -> HTTPResponse {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let endedEarly = state.withLock { state -> Bool in
                    state.task = task
                    if state.finished { return true }
                    state.continuation = continuation
                    return false
                }
                if endedEarly {
                    cancelLater(task)
                    continuation.resume()
                } else {
                    task.resume()
                }
            }
        } onCancel: {
            finish(.failure(URLError(.cancelled)), cancellingTask: true)
        }
        let outcome = state.withLock { $0.outcome } ?? .failure(URLError(.cancelled))
        return try outcome.get()
    }

    /// Bytes of the body arrived (decoded, if the response was compressed).
    func receive(_ data: Data) {
        let now = ContinuousClock.now
        let (tooLarge, size, expected) = state.withLock { state -> (Bool, Int, Int64?) in
            guard !state.finished else { return (false, 0, nil) }
            if state.firstByte == nil { state.firstByte = started.duration(to: now) }
            state.size += data.count
            if let limit = request.maxResponseSize, state.size > limit {
                state.chunks = []
                return (true, state.size, state.expectedLength)
            }
            state.chunks.append(data)
            return (false, state.size, state.expectedLength)
        }
        if let transfer, !tooLarge, size > 0 { transfer.received(Int64(size), of: expected) }
        if tooLarge, let limit = request.maxResponseSize {
            finish(.failure(NetworkError.responseTooLarge(limit: limit)), cancellingTask: true)
        }
    }

    /// The transport refused to follow one more redirect: the task ends with the last 3xx,
    /// which the caller gets as ``NetworkError/tooManyRedirects``.
    func stopRedirecting() {
        state.withLock { $0.tooManyRedirects = true }
    }

    /// The task ended.
    func complete(response: URLResponse?, error: (any Error)?) {
        completing.withLock { $0 = true }
        if let error { return finish(.failure(error), cancellingTask: false) }
        let (tooManyRedirects, manualRedirect) = state.withLock { ($0.tooManyRedirects, $0.manualRedirect) }
        if tooManyRedirects { return finish(.failure(NetworkError.tooManyRedirects), cancellingTask: false) }
        if let manualRedirect { return finish(.failure(manualRedirect), cancellingTask: false) }
        guard let http = response as? HTTPURLResponse else {
            return finish(.failure(NetworkError.transportFailed(NotHTTPResponseError())), cancellingTask: false)
        }
        let (chunks, seen) = state.withLock { state in
            defer { state.chunks = [] }
            return (state.chunks, (state.firstByte, state.requestSent, state.platformTimings))
        }
        let body: Data
        if chunks.count <= 1 {
            body = chunks.first ?? Data()
        } else {
            var joined = Data(capacity: chunks.reduce(0) { $0 + $1.count })
            for chunk in chunks { joined.append(chunk) }
            body = joined
        }
        // Headers are converted only if something reads them: most responses are decoded
        // without that, and `allHeaderFields` costs thousands of instructions on Linux.
        var response = HTTPResponse(
            status: http.statusCode, deferredHeaders: { [url = request.url] in responseHeaders(http, requested: url) }, body: body, request: request)
        let (firstByte, requestSent, platform) = seen
        var timings = platform ?? TransferTimings(complete: .zero, requestBodyBytes: 0, responseBodyBytes: 0)
        timings.firstByte = timings.firstByte ?? firstByte
        timings.requestSent = timings.requestSent ?? requestSent
        timings.complete = started.duration(to: .now)
        timings.requestBodyBytes = request.body?.count ?? 0
        timings.responseBodyBytes = body.count
        response.timings = timings
        finish(.success(response), cancellingTask: false)
    }

    private func finish(_ result: Result<HTTPResponse, any Error>, cancellingTask: Bool) {
        let (continuation, task) = state.withLock {
            state -> (CheckedContinuation<Void, Never>?, URLSessionDataTask?) in
            guard !state.finished else { return (nil, nil) }
            state.finished = true
            state.outcome = result
            state.chunks = []
            defer { state.continuation = nil }
            return (state.continuation, state.task)
        }
        if cancellingTask, let task { cancelLater(task) }
        continuation?.resume()
    }

    /// Cancels the data task safely (see ``TaskCanceller``).
    private func cancelLater(_ task: URLSessionDataTask) {
        TaskCanceller.cancelLater(task, session: session, completing: completing)
    }

}

/// Cancels data tasks safely on FoundationNetworking.
enum TaskCanceller {
    /// Cancels `task` on another queue, unless it has ended or cancelling it could crash.
    ///
    /// - FoundationNetworking's `cancel()` waits on the session's work queue; called inside
    ///   Swift's task-cancellation handler it can deadlock with a network thread that is resuming
    ///   the same task (swift-corelibs-foundation#5412). So it runs on another queue, a serial
    ///   one, because on the global concurrent queue a storm of cancellations each blocked a
    ///   thread in that wait until the pool had no thread left for any session's work, and
    ///   unrelated requests stalled to their timeouts.
    /// - That serial queue is the session's own (``DelegateQueue/cancelQueue``), not one for the
    ///   process: a `cancel()` that FoundationNetworking holds while a fast transfer runs (it can
    ///   wait until the transfer has ended) then holds back only the cancels of its own session. With
    ///   one queue for the process, a hedge's loser could wait behind another session's cancel:
    ///   in a full CI run the loopback hedging test's loser was not stopped within the 30 s its
    ///   server waits, and the server answered it (`HedgingLoopbackTests`, `CancelQueueTests`).
    /// - A task that already reported its end is not cancelled; `completing` is held across
    ///   `cancel()`, so FoundationNetworking never completes a task while it is being cancelled.
    /// - On Linux, a task of a session with a `URLCache` is never cancelled: a cancel that lands
    ///   while the task's cache lookup runs on a background queue reports the failure after the
    ///   task has left the session's registry, and the process traps
    ///   (swift-corelibs-foundation#3296; reproduced here by `CancelAtStartTests`). The caller has
    ///   already returned; the task finishes on its own. ``URLSessionTransport`` removes the cache
    ///   from its session on Linux, so its transfers are stopped.
    static func cancelLater(_ task: URLSessionDataTask, session: URLSession, completing: Locked<Bool>) {
        queue(for: session).async {
            #if canImport(FoundationNetworking)
                if session.configuration.urlCache != nil { return }
                let delegateQueue = session.delegateQueue as? DelegateQueue
                // The delegate queue stops holding the work queue back until this is through
                // (DelegateQueue): `cancel()` waits for the work queue while holding `completing`.
                delegateQueue?.cancelStarted()
                defer { delegateQueue?.cancelEnded() }
            #endif
            completing.withLock { ended in
                if !ended { task.cancel() }
            }
        }
    }

    /// The serial queue the cancels of `session`'s tasks run on.
    static func queue(for session: URLSession) -> DispatchQueue {
        (session.delegateQueue as? DelegateQueue)?.cancelQueue ?? foreignSessionQueue
    }

    /// The cancels of every session that is not ``URLSessionTransport``'s own (a plain `URLSession`
    /// used as the transport): they share this one queue, so such a session's cancels can wait
    /// behind another's.
    private static let foreignSessionQueue = DispatchQueue(label: "Conveyor.URLSessionTask.cancel")
}

/// A response's header fields as the pipeline carries them.
/// The response's headers. A response that came from another origin than `requested` (after a
/// redirect the session followed) loses its `Set-Cookie`: a cookie is accepted only from the
/// origin that was asked, so a redirect target cannot set one for it.
func responseHeaders(_ response: HTTPURLResponse, requested: URL) -> HTTPHeaders {
    let foreign = response.url.map { !RedirectPolicy.sameOrigin(requested, $0) } ?? false
    var headers = HTTPHeaders()
    for (name, value) in response.allHeaderFields {
        if let name = name as? String, let value = value as? String {
            if foreign && HTTPHeaders.namesEqual(name, "Set-Cookie") { continue }
            headers.add(name: name, value: value)
        }
    }
    return headers
}

/// The request's headers as one dictionary for `allHTTPHeaderFields` (one assignment instead of
/// one bridged call per header, each of which costs allocations on Linux). A repeated name,
/// in any case, is joined into its first spelling with ", " (RFC 9110), or "; " for cookies
/// (RFC 6265).
func headerDictionary(_ headers: HTTPHeaders) -> [String: String] {
    var fields: [String: String] = [:]
    fields.reserveCapacity(headers.count)
    for field in headers {
        // Requests rarely repeat a name, so look for an earlier spelling only among the few
        // fields already added, without lowercasing every name.
        guard let existing = fields.keys.first(where: { HTTPHeaders.namesEqual($0, field.name) }) else {
            fields[field.name] = field.value
            continue
        }
        let separator = HTTPHeaders.namesEqual(existing, "Cookie") ? "; " : ", "
        fields[existing, default: ""] += separator + field.value
    }
    return fields
}

/// A redirect that ``URLSessionTransport`` follows with a new data task (a 307/308 with a body on
/// Linux); never seen outside the transport.
struct ManualRedirect: Error {
    /// The next hop, as ``RedirectPolicy`` made it.
    let next: HTTPRequest
    let redirectsSoFar: Int
}

/// The transport received a response that is not HTTP.
struct NotHTTPResponseError: Error, SafelyDescribable {
    var description: String { "the response is not an HTTP response" }
}
