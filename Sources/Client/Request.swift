public import ConveyorPipeline
public import Foundation

/// A typed request: where to send it, what to send, and what it returns.
///
/// `Output` is what ``NetworkClient/send(_:)`` returns: any `Decodable` (decoded as JSON with the
/// client's decoder), `Data`, `String` (UTF-8), `Void` (the body is ignored, e.g. 204), or
/// ``HTTPResponse`` (the raw response).
///
/// ```swift
/// let popular = Request<[Movie]>(path: "/movies/popular", query: ["page": 1])
/// let rate = Request<Void>(method: .post, path: "/movies/7/rating", body: .json(Rating(stars: 5)))
///     .adding(ShowErrorBehavior(presenter))
/// let login = Request<Session>(method: .post, path: "/login", body: .form(["user": user]))
///     .excluding(.type(AuthTokenBehavior.self))
/// ```
public struct Request<Output>: Sendable {
    /// The HTTP method.
    public var method: HTTPMethod
    /// A path relative to the client's base URL (`/movies/7`), or an absolute `http(s)` URL.
    /// Characters that may not appear in a path are percent-encoded; a `?` starts a raw query.
    public var path: String
    /// Query parameters, appended after any query in ``path``.
    public var query: QueryParameters
    /// Headers set on the request itself; they win over headers added by behaviors.
    public var headers: HTTPHeaders
    /// The body.
    public var body: RequestBody
    /// The per-attempt timeout; `nil` uses the client's.
    public var timeout: Duration?
    /// How long the whole request may take, its attempts and the waits between them together;
    /// `nil` uses the client's (``NetworkClient/Configuration/totalTimeout``).
    public var totalTimeout: Duration?
    /// Behaviors for this request only; they run after (inside) the client's.
    public var behaviors: [any RequestBehavior]
    /// Client behaviors this request leaves out.
    public var exclusions: [BehaviorExclusion]
    /// Told how the request's upload and download progress (see ``onProgress(_:)``).
    public var progress: (@Sendable (TransferProgress) -> Void)?
    /// Values its ``RequestContext`` starts with, which every behavior's first hook already sees
    /// (see ``setting(_:to:)``).
    public var contextValues: RequestContextValues

    let decode: @Sendable (HTTPResponse, JSONDecoder) throws -> Output

    /// Creates a request with a custom way to turn the response into `Output`.
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: A path relative to the base URL, or an absolute URL.
    ///   - query: Query parameters.
    ///   - headers: Headers that win over behaviors' headers.
    ///   - body: The body.
    ///   - timeout: The per-attempt timeout.
    ///   - behaviors: Behaviors for this request only.
    ///   - decode: Turns the final response into the output; a thrown error becomes
    ///     ``NetworkError/decodingFailed(_:underlying:)``.
    public init(
        method: HTTPMethod = .get, path: String, query: QueryParameters = [:], headers: HTTPHeaders = [:],
        body: RequestBody = .none, timeout: Duration? = nil, behaviors: [any RequestBehavior] = [],
        decode: @escaping @Sendable (HTTPResponse, JSONDecoder) throws -> Output
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.behaviors = behaviors
        self.exclusions = []
        self.progress = nil
        self.contextValues = RequestContextValues()
        self.decode = decode
    }

    /// This request, telling `observer` how its upload and download progress, per attempt (a
    /// retry starts again from zero). Called on the transport's thread: keep it short.
    ///
    /// ```swift
    /// let upload = Request<Void>(method: .put, path: "/videos/7", body: .file(video, contentType: "video/mp4"))
    ///     .onProgress { progress in print(progress.fractionCompleted ?? 0) }
    /// ```
    /// - Parameter observer: Receives each progress report.
    public func onProgress(_ observer: @escaping @Sendable (TransferProgress) -> Void) -> Request {
        var copy = self
        copy.progress = observer
        return copy
    }

    /// This request with `value` stored under `key` in its ``RequestContext`` from the start, so
    /// every behavior (the client's too) reads it in its first hook.
    ///
    /// ```swift
    /// enum Screen: RequestContextKey { static let defaultValue = "unknown" }
    /// let feed = Request<[Movie]>(path: "/feed").setting(Screen.self, to: "home")
    /// // in any behavior: context[Screen.self] == "home"
    /// ```
    /// - Parameters:
    ///   - key: The key type.
    ///   - value: The value the context starts with.
    public func setting<Key: RequestContextKey>(_ key: Key.Type, to value: Key.Value) -> Request {
        var copy = self
        copy.contextValues.set(key, to: value)
        return copy
    }

    /// This request with more per-request behaviors (run after the ones it has).
    /// - Parameter behaviors: The behaviors to add.
    public func adding(_ behaviors: any RequestBehavior...) -> Request {
        adding(behaviors)
    }

    /// This request with more per-request behaviors (run after the ones it has).
    /// - Parameter behaviors: The behaviors to add.
    public func adding(_ behaviors: [any RequestBehavior]) -> Request {
        var copy = self
        copy.behaviors.append(contentsOf: behaviors)
        return copy
    }

    /// This request without the client behaviors the exclusions select.
    /// - Parameter exclusions: For example `.type(AuthTokenBehavior.self)` or `.named("auth")`.
    public func excluding(_ exclusions: BehaviorExclusion...) -> Request {
        var copy = self
        copy.exclusions.append(contentsOf: exclusions)
        return copy
    }
}

extension Request where Output: Decodable {
    /// Creates a request whose response body becomes `Output` by the one decoding rule:
    /// `Data` is the raw body, `String` the body as UTF-8 text, and any other `Decodable` is
    /// decoded from JSON with the client's decoder. Every entry point (`get`, `post`, endpoints,
    /// `Request`) follows the same rule.
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: A path relative to the base URL, or an absolute URL.
    ///   - query: Query parameters.
    ///   - headers: Headers that win over behaviors' headers.
    ///   - body: The body.
    ///   - timeout: The per-attempt timeout.
    ///   - behaviors: Behaviors for this request only.
    public init(
        method: HTTPMethod = .get, path: String, query: QueryParameters = [:], headers: HTTPHeaders = [:],
        body: RequestBody = .none, timeout: Duration? = nil, behaviors: [any RequestBehavior] = []
    ) {
        self.init(
            method: method, path: path, query: query, headers: headers, body: body, timeout: timeout,
            behaviors: behaviors, decode: decodingRule(for: Output.self))
    }
}

extension Request where Output == Void {
    /// Creates a request whose response body is ignored (for example a `204 No Content`).
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: A path relative to the base URL, or an absolute URL.
    ///   - query: Query parameters.
    ///   - headers: Headers that win over behaviors' headers.
    ///   - body: The body.
    ///   - timeout: The per-attempt timeout.
    ///   - behaviors: Behaviors for this request only.
    public init(
        method: HTTPMethod = .get, path: String, query: QueryParameters = [:], headers: HTTPHeaders = [:],
        body: RequestBody = .none, timeout: Duration? = nil, behaviors: [any RequestBehavior] = []
    ) {
        self.init(
            method: method, path: path, query: query, headers: headers, body: body, timeout: timeout,
            behaviors: behaviors, decode: { _, _ in () })
    }
}

extension Request where Output == HTTPResponse {
    /// Creates a request that returns the whole response (status, headers, body).
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: A path relative to the base URL, or an absolute URL.
    ///   - query: Query parameters.
    ///   - headers: Headers that win over behaviors' headers.
    ///   - body: The body.
    ///   - timeout: The per-attempt timeout.
    ///   - behaviors: Behaviors for this request only.
    public init(
        method: HTTPMethod = .get, path: String, query: QueryParameters = [:], headers: HTTPHeaders = [:],
        body: RequestBody = .none, timeout: Duration? = nil, behaviors: [any RequestBehavior] = []
    ) {
        self.init(
            method: method, path: path, query: query, headers: headers, body: body, timeout: timeout,
            behaviors: behaviors, decode: { response, _ in response })
    }
}

/// The response body is not valid UTF-8.
struct InvalidUTF8Error: Error, SafelyDescribable {
    var description: String { "the body is not valid UTF-8" }
}

/// The one decoding rule for `Decodable` outputs: `Data` is the raw body, `String` the body as
/// UTF-8 text, anything else JSON. Chosen once per request, by comparing metatypes.
func decodingRule<Output: Decodable>(for output: Output.Type) -> @Sendable (HTTPResponse, JSONDecoder) throws -> Output {
    if output == Data.self { return rawBody }
    if output == String.self { return utf8Text }
    return decodeJSON
}

/// The raw body, for `Output == Data`.
@Sendable private func rawBody<Output>(_ response: HTTPResponse, _: JSONDecoder) throws -> Output {
    try same(response.body, as: Output.self)
}

/// The body as UTF-8 text, for `Output == String`.
@Sendable private func utf8Text<Output>(_ response: HTTPResponse, _: JSONDecoder) throws -> Output {
    guard let text = String(validating: response.body, as: UTF8.self) else { throw InvalidUTF8Error() }
    return try same(text, as: Output.self)
}

/// `value` as `Output`, which is its own type: a metatype comparison and a reinterpretation, where
/// `as?` would cost a dynamic cast (hundreds of instructions) on every response.
@inline(__always)
private func same<Value, Output>(_ value: Value, as output: Output.Type) throws -> Output {
    guard Value.self == Output.self else { throw OutputTypeError() }
    return unsafeBitCast(value, to: Output.self)
}

/// A decoding rule was chosen for another output type (unreachable: rules are chosen by type).
struct OutputTypeError: Error, SafelyDescribable {
    var description: String { "the output type does not match the decoding rule" }
}

/// Decodes a JSON body; a plain function so no metatype is captured in a closure.
@Sendable func decodeJSON<Output: Decodable>(_ response: HTTPResponse, _ decoder: JSONDecoder) throws -> Output {
    try decoder.decode(Output.self, from: response.body)
}
