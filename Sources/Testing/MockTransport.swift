public import ConveyorPipeline
public import Foundation

/// An ``Conveyor/HTTPTransport`` for tests: answers with replies you queue or stub, records every request,
/// and never touches the network.
///
/// ```swift
/// let api = URL(string: "https://api.test/v1")!
/// let mock = MockTransport(baseURL: api)             // stubs take paths as your code writes them
/// mock.stub(.get, "/movies", reply: .json([Movie(id: 1, title: "Alien")]))
/// mock.stub(.get, "/movies/1", reply: .rawJSON(#"{"id": 1, "title": "Alien"}"#))
/// mock.enqueue(.status(503), .status(200))          // answered in order, for any request
/// let client = NetworkClient(baseURL: api, transport: mock)
/// …
/// #expect(mock.requests.map(\.url.path) == ["/v1/movies"])
/// ```
///
/// Queued replies are used first, in order (each once); then stubs, most recent first. A request
/// that matches neither throws ``UnexpectedRequest`` listing what was expected — the client turns
/// it into ``Conveyor/NetworkError/transportFailed(_:)``, so the test fails with that message.
public final class MockTransport: StreamingHTTPTransport, Sendable {
    /// What the mock answers.
    public indirect enum Reply: Sendable {
        /// A response with this status, headers and body.
        case response(status: Int, headers: HTTPHeaders, body: Data)
        /// Throw this error (for example `URLError(.notConnectedToInternet)`).
        case failure(any Error)
        /// Never answer; ends with `CancellationError` when the task is cancelled.
        case hang
        /// Wait on the mock's clock, then answer.
        case delayed(Duration, Reply)
        /// Decide from the request (for example: `401` for an old token, `200` for a new one).
        case handler(@Sendable (HTTPRequest) async -> Reply)
        /// A response whose body arrives in these chunks, in order, then ends as `end` says: for
        /// downloads, streamed responses and progress. A request whose transfer takes the body
        /// (``Conveyor/NetworkClient/download(_:to:maxSize:)``, ``Conveyor/NetworkClient/stream(_:)``)
        /// gets the chunks one by one, waiting while its reader is behind; any other request gets
        /// them joined into one body.
        case streamed(status: Int, headers: HTTPHeaders, chunks: [Data], end: StreamEnd)

        /// How a ``streamed(status:headers:chunks:end:)`` body ends after its chunks.
        public enum StreamEnd: Sendable {
            /// The body is complete.
            case complete
            /// The connection breaks: the attempt fails with this error (for example
            /// `URLError(.networkConnectionLost)`).
            case failure(any Error)
            /// No more bytes ever come; ends with `CancellationError` when the task is cancelled.
            case hang
        }

        /// A 200 (or `status`) response whose body arrives in these chunks.
        /// - Parameters:
        ///   - chunks: The body's chunks.
        ///   - status: The status code; 200 by default.
        ///   - headers: The header fields; `Content-Length` is added when missing and `end` is
        ///     `.complete`.
        ///   - end: How the body ends; complete by default.
        public static func chunks(
            _ chunks: [Data], status: Int = 200, headers: HTTPHeaders = [:], end: StreamEnd = .complete
        ) -> Reply {
            var headers = headers
            if case .complete = end, !headers.contains("Content-Length") {
                headers["Content-Length"] = String(chunks.reduce(0) { $0 + $1.count })
            }
            return .streamed(status: status, headers: headers, chunks: chunks, end: end)
        }

        /// A `text/event-stream` response whose body is these pieces of event-stream text, each
        /// arriving as its own chunk, for ``Conveyor/NetworkClient/events(_:options:)``:
        /// `.events("id: 1\ndata: hello\n\n", end: .failure(URLError(.networkConnectionLost)))`
        /// is a connection that delivers one event and drops.
        /// - Parameters:
        ///   - pieces: The body's chunks, as text.
        ///   - end: How the body ends; complete by default (the stream then reconnects, as it
        ///     would after a server closed it: queue a `.status(204)` to stop it).
        public static func events(_ pieces: String..., end: StreamEnd = .complete) -> Reply {
            .streamed(
                status: 200, headers: ["Content-Type": "text/event-stream"], chunks: pieces.map { Data($0.utf8) },
                end: end)
        }

        /// An empty response with this status.
        /// - Parameters:
        ///   - status: The status code.
        ///   - headers: The header fields.
        public static func status(_ status: Int, headers: HTTPHeaders = [:]) -> Reply {
            .response(status: status, headers: headers, body: Data())
        }

        /// A JSON response of an encoded value.
        /// - Parameters:
        ///   - value: The value to encode.
        ///   - status: The status code; 200 by default.
        ///   - headers: Extra header fields.
        public static func json(_ value: some Encodable, status: Int = 200, headers: HTTPHeaders = [:]) -> Reply {
            var headers = headers
            if !headers.contains("Content-Type") { headers.add(name: "Content-Type", value: "application/json") }
            do {
                return .response(status: status, headers: headers, body: try JSONEncoder().encode(value))
            } catch {
                return .failure(error)
            }
        }

        /// A JSON response whose body is this JSON text, as written:
        /// `.rawJSON(#"{"id": 1, "title": "Alien"}"#)`. The text is not checked.
        /// - Parameters:
        ///   - json: The body, JSON text.
        ///   - status: The status code; 200 by default.
        ///   - headers: Extra header fields.
        public static func rawJSON(_ json: String, status: Int = 200, headers: HTTPHeaders = [:]) -> Reply {
            var headers = headers
            if !headers.contains("Content-Type") { headers.add(name: "Content-Type", value: "application/json") }
            return .response(status: status, headers: headers, body: Data(json.utf8))
        }

        /// A response whose body is UTF-8 text.
        /// - Parameters:
        ///   - text: The body text.
        ///   - status: The status code; 200 by default.
        ///   - headers: Extra header fields.
        public static func text(_ text: String, status: Int = 200, headers: HTTPHeaders = [:]) -> Reply {
            .response(status: status, headers: headers, body: Data(text.utf8))
        }
    }

    /// Which requests a queued reply or stub answers.
    public struct Matcher: Sendable, CustomStringConvertible {
        let method: HTTPMethod?
        let path: String?
        let query: [String: String]?

        /// Any request.
        public static let any = Matcher(method: nil, path: nil, query: nil)

        /// Requests with this method (if given), URL path and query items (if given; others may be present).
        /// - Parameters:
        ///   - method: The method, or `nil` for any.
        ///   - path: The URL path: as your code writes it (`/movies`) when the mock was made with
        ///     the client's base URL, or whole (`/v1/movies`).
        ///   - query: Query items that must be present with these values.
        public static func request(_ method: HTTPMethod? = nil, _ path: String, query: [String: String]? = nil)
            -> Matcher
        {
            Matcher(method: method, path: path, query: query)
        }

        /// Whether the request matches.
        /// - Parameter request: A request.
        package func matches(_ request: HTTPRequest) -> Bool { matches(request, basePath: "") }

        /// Whether the request matches, its path taken whole or relative to `basePath`.
        func matches(_ request: HTTPRequest, basePath: String) -> Bool {
            if let method, method != request.method { return false }
            if let path, path != request.url.path, basePath.isEmpty || basePath + path != request.url.path {
                return false
            }
            if let query {
                let items = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
                for (name, value) in query where !items.contains(where: { $0.name == name && $0.value == value }) {
                    return false
                }
            }
            return true
        }

        /// `GET /path ?a=1`, or `any request`.
        public var description: String {
            guard method != nil || path != nil || query != nil else { return "any request" }
            var text = [method?.rawValue ?? "*", path ?? "*"].joined(separator: " ")
            if let query { text += " ?" + query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&") }
            return text
        }
    }

    /// Thrown for a request that no queued reply or stub matches.
    public struct UnexpectedRequest: Error, SafelyDescribable {
        /// `METHOD path` of the request.
        package let request: String
        /// The matchers that were available.
        package let expected: [String]
        /// Explains what arrived and what was expected.
        public var description: String {
            "MockTransport: unexpected request \(request); expected: "
                + (expected.isEmpty ? "nothing (no reply queued or stubbed)" : expected.joined(separator: "; "))
        }
    }

    private struct State {
        var queue: [(Matcher, Reply)] = []
        var stubs: [(Matcher, Reply)] = []
        var requests: [HTTPRequest] = []
    }

    private let state = Locked(State())
    private let clock: any Clock<Duration>
    /// The base URL's path without a trailing slash (`/v1`), or empty.
    private let basePath: String

    /// Creates a mock.
    /// - Parameters:
    ///   - baseURL: The client's base URL. Given one, stubs and matchers take paths as your code
    ///     writes them: `mock.stub(.get, "/movies", …)` answers `GET https://api.test/v1/movies`
    ///     for a client on `https://api.test/v1`. Whole paths (`/v1/movies`) match too.
    ///   - clock: The clock `.delayed` replies wait on; a real clock by default.
    public init(baseURL: URL? = nil, clock: any Clock<Duration> = ContinuousClock()) {
        self.clock = clock
        var basePath = baseURL?.path ?? ""
        while basePath.hasSuffix("/") { basePath.removeLast() }
        self.basePath = basePath
    }

    /// Queues replies, answered in order, each once, for any request.
    /// - Parameter replies: The replies.
    public func enqueue(_ replies: Reply...) {
        state.withLock { state in state.queue.append(contentsOf: replies.map { (Matcher.any, $0) }) }
    }

    /// Queues a reply for the next request that matches.
    /// - Parameters:
    ///   - matcher: Which request it answers.
    ///   - reply: The reply.
    public func enqueue(_ matcher: Matcher, reply: Reply) {
        state.withLock { $0.queue.append((matcher, reply)) }
    }

    /// Answers every matching request with this reply (later stubs win over earlier ones).
    /// - Parameters:
    ///   - method: The method, or `nil` for any.
    ///   - path: The URL path.
    ///   - query: Query items that must be present.
    ///   - reply: The reply.
    public func stub(_ method: HTTPMethod? = nil, _ path: String, query: [String: String]? = nil, reply: Reply) {
        state.withLock { $0.stubs.append((.request(method, path, query: query), reply)) }
    }

    /// Every request received, in order. A request's ``Conveyor/HTTPRequest/bodyStream`` is read
    /// as a transport would read it (reporting upload progress) and its bytes recorded in
    /// ``Conveyor/HTTPRequest/body``.
    public var requests: [HTTPRequest] { state.withLock { $0.requests } }

    /// Forgets queued replies, stubs and recorded requests.
    public func reset() { state.withLock { $0 = State() } }

    /// Records the request and answers with the first matching reply. The mock streams: it reads
    /// a body stream in pieces, reporting progress, and hands a reply's body to `transfer` when
    /// it takes it.
    /// - Parameters:
    ///   - request: The request.
    ///   - transfer: Where the response body goes and who hears of progress.
    /// - Returns: The reply's response.
    /// - Throws: The reply's error, `CancellationError`, or ``UnexpectedRequest``.
    public func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        var request = request
        if let stream = request.bodyStream {
            // Read as a transport would, once per attempt, reporting progress.
            var sent: Int64 = 0
            var bytes = Data()
            try await stream.forEachChunk { chunk in
                bytes.append(chunk)
                sent += Int64(chunk.count)
                transfer?.sent(sent, of: stream.length)
            }
            request.body = bytes
        }
        let recorded = request
        let reply = try state.withLock { state throws(UnexpectedRequest) -> Reply in
            state.requests.append(recorded)
            if let index = state.queue.firstIndex(where: { $0.0.matches(request, basePath: basePath) }) {
                return state.queue.remove(at: index).1
            }
            if let stub = state.stubs.last(where: { $0.0.matches(request, basePath: basePath) }) { return stub.1 }
            throw UnexpectedRequest(
                request: "\(request.method) \(request.url.path)",
                expected: (state.queue + state.stubs).map { $0.0.description })
        }
        return try await answer(reply, to: request, transfer: transfer)
    }

    /// Answers with a reply (``ChaosTransport`` answers its injected replies with it too).
    func answer(_ reply: Reply, to request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        switch reply {
        case .response(let status, let headers, let body):
            try Task.checkCancellation()
            guard transfer != nil else {
                return HTTPResponse(status: status, headers: headers, body: body, request: request)
            }
            let chunks = stride(from: 0, to: body.count, by: 64 * 1024).map { body[$0..<min($0 + 64 * 1024, body.count)] }
            return try await deliver(status: status, headers: headers, chunks: chunks.map { Data($0) }, end: .complete, to: request, transfer: transfer)
        case .streamed(let status, let headers, let chunks, let end):
            try Task.checkCancellation()
            return try await deliver(status: status, headers: headers, chunks: chunks, end: end, to: request, transfer: transfer)
        case .failure(let error):
            throw error
        case .hang:
            try await hangUntilCancelled()
            throw CancellationError()
        case .delayed(let delay, let reply):
            try await clock.sleep(for: delay)
            return try await answer(reply, to: request, transfer: transfer)
        case .handler(let decide):
            return try await answer(await decide(request), to: request, transfer: transfer)
        }
    }

    /// Answers with a body that arrives in chunks: handed to the request's transfer if it takes
    /// it, joined otherwise.
    private func deliver(
        status: Int, headers: HTTPHeaders, chunks: [Data], end: Reply.StreamEnd, to request: HTTPRequest,
        transfer: TransferHandler?
    ) async throws -> HTTPResponse {
        var response = HTTPResponse(status: status, headers: headers, request: request)
        let expected = headers["Content-Length"].flatMap { Int64($0) }
        let taken = try transfer?.takesBody(of: response) ?? false
        var body = Data()
        var received: Int64 = 0
        for chunk in chunks {
            try Task.checkCancellation()
            if taken {
                try await transfer?.receive(chunk)
            } else {
                body.append(chunk)
                received += Int64(chunk.count)
                transfer?.received(received, of: expected)
            }
        }
        switch end {
        case .complete: break
        case .failure(let error): throw error
        case .hang:
            try await hangUntilCancelled()
            throw CancellationError()
        }
        response.body = body
        return response
    }

    private func hangUntilCancelled() async throws {
        let stream = AsyncStream<Never> { _ in }
        for await _ in stream {}
        try Task.checkCancellation()
    }
}

extension HTTPRequest {
    /// The body decoded as JSON, for asserting what a request sent.
    /// - Parameter type: The type to decode.
    /// - Returns: The decoded value.
    /// - Throws: `DecodingError`, or ``ConveyorTesting/MissingBody`` when there is no body.
    public func decodedBody<T: Decodable>(as type: T.Type = T.self) throws -> T {
        guard let body else { throw MissingBody() }
        return try JSONDecoder().decode(T.self, from: body)
    }

    /// The body as UTF-8 text, or `nil`.
    public var bodyText: String? { body.map { String(decoding: $0, as: UTF8.self) } }
}

/// The request has no body.
public struct MissingBody: Error, SafelyDescribable {
    /// Explains the error.
    public var description: String { "the request has no body" }
}
