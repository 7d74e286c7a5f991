public import AsyncHTTPClient
public import Conveyor
import ConveyorLogging
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Tracing

/// An ``HTTPTransport`` on AsyncHTTPClient (SwiftNIO): a connection pool, HTTP/2 over TLS, and
/// no FoundationNetworking, for server-side Swift on Linux.
///
/// ```swift
/// let http = HTTPClient(
///     eventLoopGroupProvider: .singleton,
///     configuration: AsyncHTTPClientTransport.configuration())
/// let client = NetworkClient(baseURL: api, transport: try AsyncHTTPClientTransport(client: http))
/// // …
/// try await http.shutdown()   // yours: the transport never shuts the client down
/// ```
///
/// - **Lifecycle:** the `HTTPClient` is yours. Create it, share it between transports if you like,
///   and shut it down after the last request (`try await client.shutdown()`); the transport never
///   does. A request sent after that fails with ``NetworkError/transportFailed(_:)``.
/// - **Redirects** are followed by the transport, not by AsyncHTTPClient, so they follow
///   Conveyor's rules: at most ``maximumRedirects`` (one more fails with
///   ``NetworkError/tooManyRedirects``), and a hop to another origin (scheme, host or port) drops
///   every credential header of the request's ``HTTPRequest/sensitiveHeaders`` (its client's:
///   built in, declared by its behaviors, added by you; AsyncHTTPClient itself strips only
///   `Authorization`, `Proxy-Authorization` and `Cookie`). So the client must not follow
///   redirects itself: create it with ``configuration(_:)``, or with
///   `redirectConfiguration: .disallow`; ``init(client:maximumRedirects:defaultTimeout:)`` throws
///   otherwise. 301 and 302 turn a `POST` into a `GET`, 303 turns every method but `HEAD` into a
///   `GET` (the body is dropped), 307 and 308 keep the method and the body (the fetch standard,
///   as `URLSession` does).
/// - **Streaming:** a ``StreamingHTTPTransport``. A ``HTTPRequest/bodyStream`` is read as it is
///   sent; a response body a download or stream takes is handed over part by part, and
///   AsyncHTTPClient reads no further until each part was taken.
/// - **Timeouts:** the request's ``HTTPRequest/timeout`` is one deadline for the whole attempt:
///   connecting, redirects, the head and the whole body, enforced by AsyncHTTPClient's delegate
///   API with no task of the transport's (``NetworkClient`` enforces it on its own clock as
///   well). A request without one gets ``defaultTimeout`` as an idle timeout, as `URLSession`'s
///   `timeoutIntervalForRequest`: the attempt fails with ``NetworkError/timedOut`` once nothing
///   was sent or received for that long (a part a download or stream has not taken yet does not
///   count as idle), so a large download takes as long as it keeps coming.
/// - **Cancellation** ends the call promptly with ``NetworkError/cancelled`` and closes the
///   request's connection (``honorsCancellation`` is `true`).
/// - **Size:** a body the transport collects stops as soon as it passes
///   ``HTTPRequest/maxResponseSize``: ``NetworkError/responseTooLarge(limit:)``.
/// - **Errors** are thrown as ``NetworkError`` already: timeouts as ``NetworkError/timedOut``,
///   refused or lost connections as ``NetworkError/connectionFailed(_:)``, a response that is not
///   HTTP as ``NetworkError/transportFailed(_:)``.
public struct AsyncHTTPClientTransport: StreamingHTTPTransport {
    /// The AsyncHTTPClient requests go through. Yours to shut down.
    public let client: HTTPClient
    /// How many redirects one request may follow.
    public let maximumRedirects: Int
    /// Conveyor's one redirect policy, as every transport applies it.
    private var redirectPolicy: RedirectPolicy { RedirectPolicy(maximumRedirects: maximumRedirects) }
    /// The idle timeout of an attempt whose request sets no ``HTTPRequest/timeout``: how long
    /// it may go with nothing sent or received.
    public let defaultTimeout: Duration

    /// Why a client can't be used.
    public struct SetupError: Error, Sendable, CustomStringConvertible {
        /// The explanation, with the fix.
        public let description: String
    }

    /// Creates a transport on your client.
    /// - Parameters:
    ///   - client: An `HTTPClient` that does not follow redirects itself (see
    ///     ``configuration(_:)``). You shut it down, after the last request.
    ///   - maximumRedirects: How many redirects one request may follow; `0` follows none.
    ///   - defaultTimeout: The idle timeout of an attempt whose request sets no timeout (60 s,
    ///     as `URLSession`'s default `timeoutIntervalForRequest`).
    /// - Throws: ``SetupError`` when the client follows redirects itself (it would forward
    ///   credential headers to other origins and bypass ``maximumRedirects``), or when it has a
    ///   tracer of its own that records (see ``configuration(_:)``; a `NoOpTracer`, what
    ///   AsyncHTTPClient picks when no tracer was bootstrapped, is accepted).
    public init(client: HTTPClient, maximumRedirects: Int = 10, defaultTimeout: Duration = .seconds(60))
        throws(SetupError)
    {
        guard !Self.followsRedirects(client) else {
            throw SetupError(
                description: "This HTTPClient follows redirects itself, so Conveyor could not strip credentials on "
                    + "cross-origin redirects or cap the chain. Create it with "
                    + "`configuration: AsyncHTTPClientTransport.configuration()` or `redirectConfiguration: .disallow`.")
        }
        guard client.tracer == nil || client.tracer is NoOpTracer else {
            throw SetupError(
                description: "This HTTPClient has a tracer of its own (`tracing.tracer`): for the requests Conveyor "
                    + "sends, AsyncHTTPClient would start a span with no parent, a second trace beside the one "
                    + "TracingBehavior makes. Create it with `configuration: AsyncHTTPClientTransport.configuration()` "
                    + "or `tracing.tracer = nil`, and trace with ConveyorTracing's TracingBehavior.")
        }
        self.client = client
        self.maximumRedirects = max(0, maximumRedirects)
        self.defaultTimeout = defaultTimeout
    }

    /// An `HTTPClient` configuration for this transport: `base` with
    /// - redirects left to the transport (`redirectConfiguration = .disallow`), which is required;
    /// - a failed connection attempt reported at once instead of retried until the deadline
    ///   (`connectionPool.retryConnectionEstablishment = false`): with AsyncHTTPClient's default,
    ///   a refused connection takes the whole connect timeout (10 s) to fail. Retrying is
    ///   `RetryBehavior`'s job in Conveyor, where it is visible, bounded and backed off.
    /// - no span of AsyncHTTPClient's own (`tracing.tracer = nil`), which is required:
    ///   ConveyorTracing's `TracingBehavior` makes a client span per attempt, a child of the
    ///   request's span, and puts its context on the wire. The streaming (delegate) API this
    ///   transport uses starts AsyncHTTPClient's span on an event loop, where the caller's
    ///   `ServiceContext` is not current: it would be a root span, the same HTTP request traced
    ///   twice in two traces. (It also cost about 30,000 instructions per request with no tracer
    ///   bootstrapped.)
    /// - Logging: AsyncHTTPClient logs to the `Logger` ConveyorLogging's `RequestLoggerBehavior`
    ///   hands down (with the request's id and attempt as metadata), or to none.
    /// - Parameter base: Your configuration (TLS, proxy, pool size, decompression…).
    /// - Returns: `base` with those settings.
    public static func configuration(_ base: HTTPClient.Configuration = .init()) -> HTTPClient.Configuration {
        var configuration = base
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.tracing.tracer = nil
        return configuration
    }

    /// Whether `client` follows redirects itself. AsyncHTTPClient keeps a client's configuration
    /// and its redirect mode internal, so they are read by reflection. When they can't be found
    /// (a later AsyncHTTPClient may rename them) this answers `false`, and ``send(_:)`` catches
    /// a followed redirect in the response's history instead.
    static func followsRedirects(_ client: HTTPClient) -> Bool {
        guard let mode = Mirror(reflecting: client).descendant("configuration", "redirectConfiguration", "mode") else {
            return false
        }
        return String(describing: mode) != "disallow"
    }

    /// `true`: a cancelled call ends promptly and its connection is closed.
    public var honorsCancellation: Bool { true }

    /// Sends one attempt, following redirects, streaming both bodies.
    ///
    /// A ``HTTPRequest/bodyStream`` is read as AsyncHTTPClient sends it, with its length when
    /// known (`Content-Length`, else chunked); a file or parts can be sent again for a 307 or 308,
    /// a one-shot sequence cannot (``NetworkError/invalidRequest(_:)``). A response body the
    /// transfer takes is handed to it as it arrives, AsyncHTTPClient reading no further until
    /// the transfer has taken each part; any other body is collected up to
    /// ``HTTPRequest/maxResponseSize``.
    /// - Parameters:
    ///   - request: The attempt, after every behavior ran.
    ///   - transfer: Where the response body goes and who hears of progress, or `nil`.
    /// - Returns: The final response, whatever its status; its ``HTTPResponse/request`` is
    ///   `request`, as the pipeline sent it. Its body is empty when the transfer took it.
    /// - Throws: ``NetworkError``.
    public func send(_ request: Conveyor.HTTPRequest, transfer: TransferHandler?) async throws
        -> Conveyor.HTTPResponse
    {
        // The pipeline refuses such a method already; a direct caller gets the same answer.
        guard Self.isToken(request.method.rawValue) else {
            throw NetworkError.invalidRequest(
                "the method (\(request.method.rawValue.utf8.count) bytes) is not an HTTP token (RFC 9110 §9.1)")
        }
        // A request's timeout is one deadline for the whole attempt: AsyncHTTPClient's delegate
        // API enforces it until the body's last byte (connecting, redirects, the head and the
        // body), with no task of ours. Without one, `defaultTimeout` is an idle timeout, each
        // hop's own (as `URLSession`'s): a large download takes as long as it takes.
        // An event stream is timed by the engine alone, by its idle timeout on the client's clock
        // (contract rule 18): neither the request's timeout nor `defaultTimeout` may end it.
        let engineTimed = transfer?.timesOutWhenIdle == true
        let deadline = engineTimed ? nil : request.timeout.map { NIODeadline.now() + $0.clampedToTimeAmount }
        let idleTimeout = engineTimed || request.timeout != nil ? nil : defaultTimeout.clampedToTimeAmount
        let policy = redirectPolicy
        let logger = RequestLogger.current
        var current = request
        var redirects = 0
        do {
            while true {
                var delegate = Exchange(
                    sent: current, asked: request, policy: policy, redirectsSoFar: redirects, transfer: transfer,
                    idleTimeout: idleTimeout)
                let task = client.execute(
                    request: try Self.clientRequest(for: current), delegate: delegate, eventLoop: .indifferent,
                    deadline: deadline, logger: logger)
                // The delegate hears of every failure but two (see `Exchange.watch`): a body whose
                // end could not be written, and a client that was shut down, which never keeps the
                // delegate (only a running request does). A delegate let go of early is watched too.
                if current.body != nil || current.bodyStream != nil || isKnownUniquelyReferenced(&delegate) {
                    delegate.watch(task)
                }
                delegate.armIdleTimer(on: task)
                let exchange = delegate
                let ending = try await withTaskCancellationHandler {
                    do {
                        return try await exchange.run()
                    } catch {
                        // The transfer stopped taking the body (a limit, a full disk): the
                        // connection is given up rather than read on.
                        task.cancel()
                        throw error
                    }
                } onCancel: {
                    // The hop ends as cancelled first: AsyncHTTPClient tells the delegate of the
                    // failure the cancellation causes on its event loop, which could come first
                    // and with another error.
                    exchange.end(.failure(CancellationError()))
                    task.cancel()
                }
                switch ending {
                case .response(let response):
                    // Its head has no `Set-Cookie` from a redirect target on another origin
                    // (`Exchange.accept`).
                    return response
                case .redirect(let next):
                    redirects += 1
                    current = next
                }
            }
        } catch {
            throw Self.networkError(for: error)
        }
    }

    /// The client followed a redirect itself, which ``init(client:maximumRedirects:defaultTimeout:)``
    /// could not detect.
    static let followedRedirectsError = NetworkError.transportFailed(
        SetupError(
            description: "The HTTPClient followed a redirect itself; create it with "
                + "`AsyncHTTPClientTransport.configuration()` or `redirectConfiguration: .disallow`."))

    // MARK: - Requests

    /// The AsyncHTTPClient request for a hop: method, URL, every header field in order (repeated
    /// names stay separate fields), and the body with its length: bytes as they are, a stream
    /// read as it is sent.
    static func clientRequest(for request: Conveyor.HTTPRequest) throws -> HTTPClient.Request {
        // Built from the pairs at once: `add(name:value:)` checks each name for non-ASCII bytes with
        // a trap (about 275 instructions a field); AsyncHTTPClient validates every name and value
        // before sending anyway, and throws.
        let headers = NIOHTTP1.HTTPHeaders(request.headers.map { ($0.name, $0.value) })
        let body: HTTPClient.Body? =
            if let stream = request.bodyStream {
                .stream(contentLength: stream.length) { writer in upload(stream, to: writer) }
            } else if let bytes = request.body {
                .byteBuffer(ByteBuffer(bytes: bytes))
            } else {
                nil
            }
        do {
            // The URL as it is: AsyncHTTPClient's `String` initializer would parse it again (with
            // `absoluteString`, about 7,000 instructions a hop). A relative one (`NetworkClient`
            // never builds one) is resolved first.
            let url = request.url.baseURL == nil ? request.url : request.url.absoluteURL
            return try HTTPClient.Request(
                url: url, method: NIOHTTP1.HTTPMethod(rawValue: request.method.rawValue), headers: headers, body: body)
        } catch {
            throw NetworkError.invalidRequest("AsyncHTTPClient cannot send to this URL")
        }
    }

    /// Writes a body stream to AsyncHTTPClient's writer, one chunk at a time, each only once the
    /// previous one was written (the connection's pace). The one task a streamed upload needs:
    /// the stream is read by `async` code, the writer is driven by the event loop.
    static func upload(_ stream: HTTPBodyStream, to writer: HTTPClient.Body.StreamWriter) -> EventLoopFuture<Void> {
        // A written empty buffer tells which event loop the writer is on.
        writer.write(.byteBuffer(ByteBuffer())).flatMapWithEventLoop { _, loop in
            let done = loop.makePromise(of: Void.self)
            _Concurrency.Task {
                do {
                    try await stream.forEachChunk { chunk in
                        try await writer.write(.byteBuffer(ByteBuffer(bytes: chunk))).get()
                    }
                    done.succeed(())
                } catch let error as HTTPClientError where error == .requestStreamCancelled {
                    // The response came before the body's end (a redirect, an early error
                    // status): AsyncHTTPClient wants no more of it. Not a failure of the upload.
                    done.succeed(())
                } catch {
                    done.fail(error)
                }
            }
            return done.futureResult
        }
    }

    // MARK: - Errors

    /// The ``NetworkError`` for what AsyncHTTPClient or SwiftNIO threw.
    static func networkError(for error: any Error) -> NetworkError {
        switch error {
        case let error as NetworkError:
            return error
        case is CancellationError:
            return .cancelled
        case let error as HTTPClientError:
            switch error {
            case .cancelled: return .cancelled
            case .deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout, .tlsHandshakeTimeout,
                .getConnectionFromPoolTimeout, .socksHandshakeTimeout, .httpProxyHandshakeTimeout:
                return .timedOut
            case .remoteConnectionClosed:
                return .connectionFailed(error)
            case .invalidURL, .emptyHost, .emptyScheme:
                return .invalidRequest("AsyncHTTPClient cannot send to this URL")
            default:
                return error.isUnsupportedScheme
                    ? .invalidRequest("AsyncHTTPClient cannot send to this URL") : .transportFailed(error)
            }
        case is NIOConnectionError, is IOError, is ChannelError:
            return .connectionFailed(error)
        case let error as HTTPParserError where error == .invalidEOFState:
            // The connection closed before the response's end (mid-body, say): a lost connection,
            // which a GET may be sent again after (and a download resumed), not a malformed response.
            return .connectionFailed(error)
        default:
            return Task.isCancelled ? .cancelled : .transportFailed(error)
        }
    }
}

extension HTTPClientError {
    /// Whether this is AsyncHTTPClient's "unsupported scheme" error, whatever the scheme.
    fileprivate var isUnsupportedScheme: Bool { String(describing: self).contains("unsupportedScheme") }
}

extension Duration {
    /// The duration as a SwiftNIO `TimeAmount`, clamped to `0…(about 290 years)` so that a huge or
    /// negative timeout never overflows.
    fileprivate var clampedToTimeAmount: TimeAmount {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return .zero }
        guard seconds < Int64.max / 1_000_000_000 - 1 else { return .nanoseconds(Int64.max / 2) }
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

extension AsyncHTTPClientTransport {
    /// RFC 9110 §9.1: a method is a non-empty token (letters, digits and ``!#$%&'*+-.^_`|~``).
    static func isToken(_ method: String) -> Bool {
        !method.isEmpty
            && method.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"):
                    true
                default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
                }
            }
    }
}
