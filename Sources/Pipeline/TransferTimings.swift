/// How one exchange with the server went, as the transport measured it: the phases of the
/// attempt, each as the time since the transport started it, and the bytes each way.
///
/// ``URLSessionTransport`` fills in what its platform reports: on Apple platforms every phase of
/// `URLSessionTaskMetrics`; on Linux the first byte and the end, and when the request body was
/// sent. A phase the transport could not see is `nil`. A response a behavior answered, or one from
/// a transport that does not measure, has no timings at all (``HTTPResponse/timings`` is `nil`).
///
/// ```swift
/// if let timings = response.timings, let firstByte = timings.firstByte {
///     print("time to first byte: \(firstByte), total: \(timings.complete)")
/// }
/// ```
public struct TransferTimings: Sendable, Hashable {
    /// Looking up the host's address, when a new connection needed one.
    public var domainLookup: Duration?
    /// Opening the connection (TLS included), when a new one was opened.
    public var connect: Duration?
    /// The TLS handshake, part of ``connect``.
    public var secureConnection: Duration?
    /// Whether the attempt reused a connection that was already open.
    public var reusedConnection: Bool?
    /// From the start until the last byte of the request was sent.
    public var requestSent: Duration?
    /// From the start until the first byte of the response (its status line) arrived.
    public var firstByte: Duration?
    /// From the start until the last byte of the response arrived.
    public var complete: Duration
    /// The request body's size in bytes.
    public var requestBodyBytes: Int
    /// The response body's size in bytes, after content decoding (gzip).
    public var responseBodyBytes: Int

    /// Creates timings.
    /// - Parameters:
    ///   - domainLookup: The DNS phase.
    ///   - connect: The connection phase.
    ///   - secureConnection: The TLS phase.
    ///   - reusedConnection: Whether the connection was reused.
    ///   - requestSent: Start to the request's last byte.
    ///   - firstByte: Start to the response's first byte.
    ///   - complete: Start to the response's last byte.
    ///   - requestBodyBytes: The request body's size.
    ///   - responseBodyBytes: The response body's size.
    public init(
        domainLookup: Duration? = nil, connect: Duration? = nil, secureConnection: Duration? = nil,
        reusedConnection: Bool? = nil, requestSent: Duration? = nil, firstByte: Duration? = nil, complete: Duration,
        requestBodyBytes: Int, responseBodyBytes: Int
    ) {
        self.domainLookup = domainLookup
        self.connect = connect
        self.secureConnection = secureConnection
        self.reusedConnection = reusedConnection
        self.requestSent = requestSent
        self.firstByte = firstByte
        self.complete = complete
        self.requestBodyBytes = requestBodyBytes
        self.responseBodyBytes = responseBodyBytes
    }
}
