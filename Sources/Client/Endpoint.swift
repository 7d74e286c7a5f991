public import ConveyorPipeline
public import Foundation

/// An API described as an enum, like Moya's `TargetType`: each case is an endpoint.
///
/// ```swift
/// enum MovieAPI: Endpoint {
///     case popular(page: Int)
///     case rate(id: Int, stars: Int)
///
///     var method: HTTPMethod {
///         switch self {
///         case .popular: .get
///         case .rate: .post
///         }
///     }
///     var path: String {
///         switch self {
///         case .popular: "/movies/popular"
///         case .rate(let id, _): "/movies/\(id)/rating"
///         }
///     }
///     var query: QueryParameters {
///         if case .popular(let page) = self { ["page": page] } else { [:] }
///     }
///     var body: RequestBody {
///         if case .rate(_, let stars) = self { .json(["stars": stars]) } else { .none }
///     }
/// }
///
/// let movies: [Movie] = try await client.send(MovieAPI.popular(page: 1))
/// ```
///
/// An endpoint with behaviors of its own declares ``EndpointBehaviors``; one that leaves some
/// of the client's behaviors out declares ``EndpointExclusions``. The compiler then checks the
/// property's name and type, as it checks a behavior's hooks: a property named like them on an
/// endpoint that does not declare the protocol is an ordinary property, and nothing reads it.
public protocol Endpoint: Sendable {
    /// The HTTP method; `GET` by default.
    var method: HTTPMethod { get }
    /// The path relative to the client's base URL.
    var path: String { get }
    /// Query parameters; none by default.
    var query: QueryParameters { get }
    /// Headers that win over behaviors' headers; none by default.
    var headers: HTTPHeaders { get }
    /// The body; none by default.
    var body: RequestBody { get }
    /// The per-attempt timeout; the client's by default.
    var timeout: Duration? { get }
    /// ``EndpointBehaviors/behaviors``, or none. Supplied by ``EndpointBehaviors``: never
    /// implement it yourself.
    var _behaviors: [any RequestBehavior] { get }
    /// ``EndpointExclusions/exclusions``, or none. Supplied by ``EndpointExclusions``: never
    /// implement it yourself.
    var _exclusions: [BehaviorExclusion] { get }
}

/// An endpoint with behaviors of its own, run after the client's for each of its requests.
///
/// ```swift
/// enum AdminAPI: Endpoint, EndpointBehaviors {
///     case users
///     var path: String { "/admin/users" }
///     var behaviors: [any RequestBehavior] { [HeadersBehavior(["X-Admin": "1"])] }
/// }
/// ```
public protocol EndpointBehaviors: Endpoint {
    /// Behaviors for this endpoint only, run after the client's.
    var behaviors: [any RequestBehavior] { get }
}

/// An endpoint that leaves some of the client's behaviors out of its requests.
///
/// ```swift
/// enum AccountAPI: Endpoint, EndpointExclusions {
///     case login(user: String, password: String)
///     var method: HTTPMethod { .post }
///     var path: String { "/login" }
///     var exclusions: [BehaviorExclusion] { [.type(AuthTokenBehavior.self)] }
/// }
/// ```
public protocol EndpointExclusions: Endpoint {
    /// Client behaviors this endpoint leaves out, by type or by name.
    var exclusions: [BehaviorExclusion] { get }
}

extension EndpointBehaviors {
    /// ``behaviors``.
    public var _behaviors: [any RequestBehavior] { behaviors }
}

extension EndpointExclusions {
    /// ``exclusions``.
    public var _exclusions: [BehaviorExclusion] { exclusions }
}

extension Endpoint {
    /// `GET`.
    public var method: HTTPMethod { .get }
    /// No parameters.
    public var query: QueryParameters { [:] }
    /// No headers.
    public var headers: HTTPHeaders { [:] }
    /// No body.
    public var body: RequestBody { .none }
    /// The client's timeout.
    public var timeout: Duration? { nil }
    /// None: the endpoint does not declare ``EndpointBehaviors``.
    public var _behaviors: [any RequestBehavior] { [] }
    /// None: the endpoint does not declare ``EndpointExclusions``.
    public var _exclusions: [BehaviorExclusion] { [] }

    /// A typed request for this endpoint that decodes its response with `decode`.
    /// - Parameter decode: Turns the response into the output.
    /// - Returns: The request.
    public func request<Output>(
        decode: @escaping @Sendable (HTTPResponse, JSONDecoder) throws -> Output
    ) -> Request<Output> {
        var request = Request(
            method: method, path: path, query: query, headers: headers, body: body, timeout: timeout,
            behaviors: _behaviors, decode: decode)
        request.exclusions = _exclusions
        return request
    }

    /// A typed request for this endpoint whose response becomes `Output` by the one decoding
    /// rule (`Data` raw, `String` UTF-8 text, anything else JSON).
    /// - Parameter output: The output type.
    /// - Returns: The request.
    public func request<Output: Decodable>(as output: Output.Type = Output.self) -> Request<Output> {
        request(decode: decodingRule(for: Output.self))
    }

    /// A typed request for this endpoint that ignores the response body.
    /// - Returns: The request.
    public func requestIgnoringBody() -> Request<Void> {
        request { _, _ in () }
    }
}
