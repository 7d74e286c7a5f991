public import ConveyorPipeline

#if canImport(FoundationNetworking)
    import Foundation
    public import FoundationNetworking
#else
    public import Foundation
#endif

/// The default transport: a `URLSession` of its own whose redirect handling is safe.
///
/// - A redirect to another origin (scheme, host or port) drops every credential header
///   (``SensitiveHeaders``: `Authorization`, `Cookie`, `X-API-Key`, a custom
///   `AuthTokenBehavior` header…), so a credential never leaves the origin it was meant for.
///   (Linux's URLSession would forward them.)
/// - At most ``maximumRedirects`` redirects are followed; one more fails the request with
///   ``NetworkError/tooManyRedirects`` (a server's own 3xx that is not a
///   redirect to follow stays ``NetworkError/unacceptableStatus(_:)``).
/// - The body is collected as it arrives, and the transfer stops as soon as it passes the
///   request's ``HTTPRequest/maxResponseSize`` (counted after content decoding,
///   so a small gzip that inflates to gigabytes stops at the limit too):
///   ``NetworkError/responseTooLarge(limit:)``.
/// - A cancelled call returns at once; the data task is cancelled on another queue, never inside
///   Swift's cancellation handler (on Linux that can deadlock the process:
///   swift-corelibs-foundation#5412).
/// - A 307 or 308 redirect keeps the method and the body. On Linux, where FoundationNetworking
///   sends a redirected request without its body (swift-corelibs-foundation PR #2948), the
///   transport follows such a hop itself with a new data task, under the same rules.
/// - **It shares nothing with other sessions.** The configuration is copied and the copy gets no
///   cookie storage, no `URLCache` and no credential storage, on every platform: the defaults are
///   process-wide (`HTTPCookieStorage.shared`, `URLCache.shared`, `URLCredentialStorage.shared`),
///   so one client's login would ride on another client's requests, and a cache below
///   `CacheBehavior` would answer without the pipeline seeing it. Cache with `CacheBehavior`.
///   (On Linux a `URLCache` also lets a
///   cancellation crash the process: swift-corelibs-foundation#3296.)
/// - **Credentials come from behaviors.** A credential header (a ``SensitiveHeaders`` name such
///   as `Authorization` or `Cookie`) in the configuration's `httpAdditionalHeaders` fails every
///   request with ``NetworkError/invalidRequest(_:)`` saying so: below the pipeline it would
///   escape the redirect policy, the cache's identity and the logs' redaction. Set it with
///   `HeadersBehavior` or `AuthTokenBehavior`.
///
/// ```swift
/// let transport = URLSessionTransport(configuration: .ephemeral, maximumRedirects: 5)
/// let client = NetworkClient(baseURL: api, transport: transport)
/// ```
public final class URLSessionTransport: StreamingHTTPTransport {
    /// A transport with the default configuration, shared by clients that don't pass one.
    public static let shared = URLSessionTransport()

    /// The session requests go through.
    public let session: URLSession
    /// How many redirects one request may follow.
    public let maximumRedirects: Int

    /// Creates a transport with its own session.
    /// - Parameters:
    ///   - configuration: The session configuration (cache policy, cookies, proxies…).
    ///   - maximumRedirects: How many redirects one request may follow; `0` follows none.
    public init(configuration: URLSessionConfiguration = .default, maximumRedirects: Int = 10) {
        self.maximumRedirects = max(0, maximumRedirects)
        let delegate = SessionDelegate(policy: RedirectPolicy(maximumRedirects: maximumRedirects))
        self.delegate = delegate
        self.setupProblem = Self.credentialHeaderProblem(in: configuration)
        self.session = URLSession(
            configuration: Self.sharingNothing(configuration), delegate: delegate,
            delegateQueue: DelegateQueue(label: "Conveyor.URLSessionTransport.delegate"))
    }

    private let delegate: SessionDelegate
    /// The one redirect policy every transport applies.
    private var redirectPolicy: RedirectPolicy { RedirectPolicy(maximumRedirects: maximumRedirects) }
    /// Bytes of this transport's streamed responses that ever waited in a spill file (a slow
    /// reader): per transport, read by tests that check the slow path ran.
    package let spilledBytes = Locked<Int64>(0)
    /// Why every request fails: a credential header in the configuration (see the type's discussion).
    private let setupProblem: String?

    /// A copy of `configuration` with no cookie storage, no `URLCache` and no credential storage
    /// (see the type's discussion); the caller's configuration is left as it is.
    static func sharingNothing(_ configuration: URLSessionConfiguration) -> URLSessionConfiguration {
        let copy = (configuration.copy() as? URLSessionConfiguration) ?? URLSessionConfiguration.ephemeral
        copy.urlCache = nil
        copy.httpCookieStorage = nil
        copy.httpShouldSetCookies = false
        copy.httpCookieAcceptPolicy = .never
        copy.urlCredentialStorage = nil
        return copy
    }

    /// The credential header names in the configuration's `httpAdditionalHeaders`, as a reason.
    static func credentialHeaderProblem(in configuration: URLSessionConfiguration) -> String? {
        let names = (configuration.httpAdditionalHeaders ?? [:]).keys.compactMap { $0 as? String }
            .filter { SensitiveHeaders.standard.contains($0) }.sorted()
        guard !names.isEmpty else { return nil }
        return "the session configuration's httpAdditionalHeaders holds the credential header "
            + names.joined(separator: ", ")
            + ", which the redirect policy, the cache and redaction cannot see: set it with a behavior "
            + "(HeadersBehavior or AuthTokenBehavior)"
    }

    deinit { session.finishTasksAndInvalidate() }

    /// Sends one attempt, streaming both bodies. A file body is uploaded from its file, with its
    /// `Content-Length`. A body of several parts (multipart) or a one-shot sequence is first
    /// copied to a temporary file and uploaded from there: FoundationNetworking reads a stream
    /// body synchronously on the thread that drives every transfer of the session, where waiting
    /// for an async producer would stall the session's other requests. A response
    /// body `transfer` takes is handed on as it arrives; while the receiver is behind, it waits in
    /// a temporary file, and on Linux the session's delegate queue holds FoundationNetworking back
    /// while it is behind, so memory stays bounded whatever the speeds.
    /// - Parameters:
    ///   - request: The attempt, after every behavior ran.
    ///   - transfer: Where the response body goes and who hears of progress.
    /// - Returns: The response, whatever its status.
    /// - Throws: `URLError`, mapped by the client to ``NetworkError``.
    public func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        // The pipeline refuses such a method already; a direct caller gets the same answer.
        guard request.method.isToken else { throw NetworkError.invalidRequest(HTTPMethod.notATokenReason(request.method)) }
        // So are framing fields that disagree with the body, which URLSession would send as they are.
        if let framing = request.framingProblem { throw NetworkError.invalidRequest(framing) }
        if let setupProblem { throw NetworkError.invalidRequest(setupProblem) }
        var hop = request
        var redirectsSoFar = 0
        // A streamed body is uploaded from a file: its own, or a temporary copy of parts or of a
        // one-shot sequence (read once here, so redirects and the task reuse the copy). Parts that
        // are all in memory (up to 8 MiB) are sent from memory: no copy on disk.
        var spilled: URL?
        defer { if let spilled { unlink(spilled.path) } }
        var uploadFile: URL?
        var uploadData: Data?
        if let stream = request.bodyStream {
            if let file = stream.singleFile {
                uploadFile = file
            } else if let whole = stream.inMemory(upTo: Self.inMemoryUploadLimit) {
                uploadData = whole
            } else {
                let copy = try await Self.spill(stream)
                spilled = copy
                uploadFile = copy
            }
            if let length = stream.length, !hop.headers.contains("Content-Length") {
                hop.headers["Content-Length"] = String(length)
            }
        }
        while true {
            let exchange: any TaskExchange
            let urlRequest = ConveyorClientSend.urlRequest(for: hop, timesOutWhenIdle: transfer?.timesOutWhenIdle == true)
            // A file read as a stream, with the length it must have (a new one for every hop).
            let bodyFile = uploadFile.flatMap { file in
                hop.headers["Content-Length"].flatMap { Int64($0) }.map { UploadBodyFile(url: file, length: $0) }
            }
            let task =
                if let uploadFile {
                    Self.uploadTask(in: session, for: urlRequest, fromFile: uploadFile, body: bodyFile)
                } else if let uploadData {
                    session.uploadTask(with: urlRequest, from: uploadData)
                } else {
                    session.dataTask(with: urlRequest)
                }
            if let transfer, transfer.takesBodies {
                exchange = StreamingExchange(
                    request: hop, asked: request, transfer: transfer, session: session,
                    redirectsBefore: redirectsSoFar, spilled: spilledBytes)
            } else {
                exchange = DataTaskExchange(
                    request: hop, transfer: transfer, session: session, redirectsBefore: redirectsSoFar)
            }
            delegate.register(exchange, for: task, bodyFile: bodyFile)
            do {
                var response: HTTPResponse
                if let streaming = exchange as? StreamingExchange {
                    response = try await streaming.run(task)
                } else if let exchange = exchange as? DataTaskExchange {
                    response = try await exchange.run(task)
                } else {
                    throw NetworkError.transportFailed(NotHTTPResponseError())
                }
                response.request = request
                // A hop this transport followed itself (307/308 with a body) to another origin:
                // that origin may not set cookies for the one that was asked.
                response.headers = redirectPolicy.delivering(response.headers, from: hop.url, askedFor: request.url)
                return response
            } catch let redirect as ManualRedirect {
                // A 307/308 with a body, followed here (see the delegate): the hop the redirect
                // policy made (same method and body, no credential header on another origin).
                hop = redirect.next
                redirectsSoFar = redirect.redirectsSoFar
            } catch {
                // The file ended early or could not be read: the transfer was aborted for it.
                if let bodyFile, let problem = bodyFile.shortfall.problem {
                    throw NetworkError.fileFailed(file: bodyFile.url.lastPathComponent, underlying: FileProblem(problem))
                }
                throw error
            }
        }
    }

    /// A task that uploads `file` as the body of `urlRequest`.
    ///
    /// On Linux, when the request has a `Content-Length`, the file is read through an
    /// `InputStream` rather than by `uploadTask(with:fromFile:)`, which is six times slower
    /// there than curl (FoundationNetworking opens the file again for every piece of about
    /// 48 KiB; 1 GiB took 9.3–10 s against curl's 1.4 s, and 1.6–1.8 s as a stream). A stream
    /// body makes libcurl add `Transfer-Encoding: chunked` beside the `Content-Length`, which
    /// is invalid HTTP, so the request carries a `Transfer-Encoding` of one space: libcurl reads
    /// a header whose value is blank as "do not send this header", and so sends neither that
    /// header nor chunked framing, only the body under its `Content-Length`. (A `Content-Type`
    /// the request lacks is blanked the same way by `ConveyorClientSend.urlRequest(for:)`, or
    /// FoundationNetworking would add `application/x-www-form-urlencoded` to a POST.)
    /// The stream reports a file that ends before the `Content-Length` in `body.shortfall`.
    static func uploadTask(
        in session: URLSession, for urlRequest: URLRequest, fromFile file: URL, body: UploadBodyFile?
    ) -> URLSessionDataTask {
        #if canImport(FoundationNetworking)
            if let body, let stream = FileBodyStream(body) {
                var streamed = urlRequest
                streamed.httpBodyStream = stream
                streamed.setValue(" ", forHTTPHeaderField: "Transfer-Encoding")
                return session.dataTask(with: streamed)
            }
        #endif
        return session.uploadTask(with: urlRequest, fromFile: file)
    }

    /// Bodies of parts that are all in memory, up to this size, are uploaded from memory.
    static let inMemoryUploadLimit = 8 << 20

    /// The prefix of a temporary upload copy's name.
    static let uploadCopyPrefix = "conveyor-upload-"

    /// Writes a body stream to a temporary file, for an upload task to read. The file is created
    /// with mode 0600 (readable by this user only, whatever the umask), exclusively (never an
    /// existing file or a link planted under its name), and removed by the caller on every ending.
    /// Copies a crashed process left behind are swept once per process, when they are over a day old.
    static func spill(_ stream: HTTPBodyStream) async throws(NetworkError) -> URL {
        _ = sweptOldCopies
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(uploadCopyPrefix + UUID().uuidString)
        let fd = url.withUnsafeFileSystemRepresentation { path in
            path.map { open($0, O_WRONLY | O_CREAT | O_EXCL, 0o600) } ?? -1
        }
        guard fd >= 0 else {
            throw .fileFailed(file: url.lastPathComponent, underlying: FileProblem("the temporary copy could not be created"))
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        defer { try? handle.close() }
        do throws(NetworkError) {
            try await stream.forEachChunk { chunk in
                do {
                    try handle.write(contentsOf: chunk)
                } catch {
                    throw NetworkError.fileFailed(file: url.lastPathComponent, underlying: error)
                }
            }
        } catch {
            unlink(url.path)
            throw error
        }
        return url
    }

    /// Removes upload copies over a day old from the temporary directory (a process that ended
    /// mid-upload leaves its copy); runs once per process, on the first copy.
    static let sweptOldCopies: Int = sweepUploadCopies(olderThan: 86_400)

    /// Removes this user's upload copies older than `age` seconds; returns how many.
    static func sweepUploadCopies(olderThan age: TimeInterval, now: Date = Date()) -> Int {
        let directory = FileManager.default.temporaryDirectory
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return 0 }
        var removed = 0
        for name in names where name.hasPrefix(uploadCopyPrefix) {
            let path = directory.appendingPathComponent(name).path
            var info = stat()
            guard lstat(path, &info) == 0, info.st_uid == getuid(), (info.st_mode & S_IFMT) == S_IFREG else { continue }
            let modified = FileTimes.modified(info)
            if now.timeIntervalSince(modified) > age, unlink(path) == 0 { removed += 1 }
        }
        return removed
    }

    /// `true`: a cancelled call returns at once, whatever the session is doing.
    public var honorsCancellation: Bool { true }
}

/// The transport's session delegate: hands each task's bytes to its exchange, and decides each
/// redirect (strips credentials across origins, caps the chain length).
final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: `redirects` and `exchanges` are only touched under `lock`; the rest is immutable.
    private let lock = NSLock()
    /// Per task: redirects followed so far, and the hop that is under way.
    private var redirects: [Int: (count: Int, hop: HTTPRequest)] = [:]
    private var exchanges: [Int: any TaskExchange] = [:]
    /// Per task: the file its body is read from, for a fresh stream when libcurl rewinds.
    private var bodyFiles: [Int: UploadBodyFile] = [:]
    private let policy: RedirectPolicy

    init(policy: RedirectPolicy) {
        self.policy = policy
    }

    /// Routes `task`'s bytes and completion to `exchange`; `bodyFile` is the file its body is
    /// read from, if any.
    func register(_ exchange: any TaskExchange, for task: URLSessionTask, bodyFile: UploadBodyFile? = nil) {
        lock.lock()
        exchanges[task.taskIdentifier] = exchange
        if let bodyFile { bodyFiles[task.taskIdentifier] = bodyFile }
        lock.unlock()
    }

    /// A body read from a stream starts again from its file's first byte: FoundationNetworking
    /// asks when libcurl rewinds (a request sent on a kept-alive connection the server had
    /// closed is sent again on a new one). Without a fresh stream it would carry on from where
    /// the old one stopped, and the server would wait for bytes that never come.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        lock.lock()
        let file = bodyFiles[task.taskIdentifier]
        lock.unlock()
        #if canImport(FoundationNetworking)
            completionHandler(file.flatMap { FileBodyStream($0) })
        #else
            completionHandler(file.flatMap { InputStream(url: $0.url) })
        #endif
    }

    private func exchange(for task: URLSessionTask) -> (any TaskExchange)? {
        lock.lock()
        defer { lock.unlock() }
        return exchanges[task.taskIdentifier]
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        exchange(for: dataTask)?.receive(data)
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        exchange(for: dataTask)?.receivedHead(response)
        completionHandler(.allow)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        exchange(for: task)?.sentBody(totalBytesSent, of: totalBytesExpectedToSend)
    }

    #if !canImport(FoundationNetworking)
        func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
            guard let transaction = metrics.transactionMetrics.last, let exchange = exchange(for: task) else { return }
            let origin = metrics.taskInterval.start
            func since(_ date: Date?) -> Duration? {
                date.map { .microseconds(Int64(($0.timeIntervalSince(origin) * 1_000_000).rounded())) }
            }
            func between(_ start: Date?, _ end: Date?) -> Duration? {
                guard let start, let end else { return nil }
                return .microseconds(Int64((end.timeIntervalSince(start) * 1_000_000).rounded()))
            }
            exchange.collected(
                TransferTimings(
                    domainLookup: between(transaction.domainLookupStartDate, transaction.domainLookupEndDate),
                    connect: between(transaction.connectStartDate, transaction.connectEndDate),
                    secureConnection: between(transaction.secureConnectionStartDate, transaction.secureConnectionEndDate),
                    reusedConnection: transaction.isReusedConnection, requestSent: since(transaction.requestEndDate),
                    firstByte: since(transaction.responseStartDate), complete: .zero, requestBodyBytes: 0,
                    responseBodyBytes: 0))
        }
    #endif

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        lock.lock()
        let exchange = exchanges[task.taskIdentifier]
        let (soFar, current) =
            redirects[task.taskIdentifier] ?? (exchange?.redirectsBefore ?? 0, exchange?.request)
        lock.unlock()
        guard let exchange, let current else {
            completionHandler(nil)
            return
        }
        let location = response.value(forHTTPHeaderField: "Location")
        switch policy.step(status: response.statusCode, location: location, after: current, redirectsSoFar: soFar) {
        case .deliver:
            completionHandler(nil)  // not a redirect to follow: the 3xx is the response
        case .tooManyRedirects:
            exchange.stopRedirecting()
            completionHandler(nil)  // end the task with the 3xx; the exchange reports the cap
        case .follow(let next):
            lock.lock()
            redirects[task.taskIdentifier] = (soFar + 1, next)
            lock.unlock()
            let keepsBody = next.method == current.method && (response.statusCode == 307 || response.statusCode == 308)
            #if canImport(FoundationNetworking)
                // 307 and 308 keep the method and the body (RFC 9110 §15.4.8–9), but
                // FoundationNetworking clears the body of every redirected request, whatever the
                // delegate returns (swift-corelibs-foundation PR #2948): a redirected POST would
                // arrive empty. So the task stops here, and the transport sends the next hop
                // itself, body included.
                if keepsBody, next.body?.isEmpty == false || next.bodyStream != nil {
                    exchange.followManually(to: next, redirectsSoFar: soFar + 1)
                    completionHandler(nil)
                    return
                }
            #endif
            // The hop as the policy made it; a kept body stays where the platform put it (an
            // upload task's file or data is not in the request).
            var outgoing = ConveyorClientSend.urlRequest(for: next)
            outgoing.timeoutInterval = request.timeoutInterval  // the first hop's: the engine's model
            if keepsBody {
                outgoing.httpBody = request.httpBody ?? outgoing.httpBody
                outgoing.httpBodyStream = request.httpBodyStream ?? outgoing.httpBodyStream
            }
            completionHandler(outgoing)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        lock.lock()
        redirects[task.taskIdentifier] = nil
        bodyFiles[task.taskIdentifier] = nil
        let exchange = exchanges.removeValue(forKey: task.taskIdentifier)
        lock.unlock()
        exchange?.complete(response: task.response, error: error)
    }
}

