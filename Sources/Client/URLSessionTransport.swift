public import ConveyorPipeline

#if canImport(FoundationNetworking)
    import Foundation
    public import FoundationNetworking
#else
    public import Foundation
#endif

/// The default transport: a `URLSession` of its own whose redirect handling is safe.
///
/// - A redirect to another origin (scheme, host or port) drops `Authorization`,
///   `Proxy-Authorization` and `Cookie`, so a token set by `AuthTokenBehavior` never leaves the
///   origin it was meant for. (Linux's URLSession would forward them.)
/// - At most ``maximumRedirects`` redirects are followed; after that the last 3xx response is
///   returned as it is, and the client reports it as ``ConveyorPipeline/NetworkError/unacceptableStatus(_:)``.
///
/// ```swift
/// let transport = URLSessionTransport(configuration: .ephemeral, maximumRedirects: 5)
/// let client = NetworkClient(baseURL: api, transport: transport)
/// ```
public final class URLSessionTransport: HTTPTransport {
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
        self.session = URLSession(
            configuration: configuration, delegate: RedirectGuard(maximumRedirects: self.maximumRedirects),
            delegateQueue: nil)
    }

    deinit { session.finishTasksAndInvalidate() }

    /// Sends one attempt.
    /// - Parameter request: The attempt, after every behavior ran.
    /// - Returns: The response, whatever its status.
    /// - Throws: `URLError`, mapped by the client to ``ConveyorPipeline/NetworkError``.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await ConveyorClientSend.send(request, using: session)
    }
}

/// Decides each redirect: strips credentials across origins, caps the chain length.
final class RedirectGuard: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    // @unchecked: `redirects` is only touched under `lock`; the rest is immutable.
    private let lock = NSLock()
    private var redirects: [Int: Int] = [:]
    private let maximumRedirects: Int

    static let credentialHeaders = ["Authorization", "Proxy-Authorization", "Cookie"]

    init(maximumRedirects: Int) { self.maximumRedirects = maximumRedirects }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        lock.lock()
        let count = redirects[task.taskIdentifier, default: 0] + 1
        redirects[task.taskIdentifier] = count
        lock.unlock()
        guard count <= maximumRedirects else {
            completionHandler(nil)  // hand back the 3xx response as it is
            return
        }
        var next = request
        let from = task.originalRequest?.url ?? response.url
        if !Self.sameOrigin(from, request.url) {
            for name in Self.credentialHeaders { next.setValue(nil, forHTTPHeaderField: name) }
        }
        completionHandler(next)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        lock.lock()
        redirects[task.taskIdentifier] = nil
        lock.unlock()
    }

    static func sameOrigin(_ a: URL?, _ b: URL?) -> Bool {
        guard let a, let b else { return false }
        func port(_ url: URL) -> Int? { url.port ?? (url.scheme?.lowercased() == "https" ? 443 : url.scheme?.lowercased() == "http" ? 80 : nil) }
        return a.scheme?.lowercased() == b.scheme?.lowercased() && a.host?.lowercased() == b.host?.lowercased()
            && port(a) == port(b)
    }
}
