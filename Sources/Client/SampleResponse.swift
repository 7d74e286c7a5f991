public import ConveyorPipeline
public import Foundation

/// A canned response an endpoint or request carries, like Moya's `sampleData`: with
/// ``NetworkClient/Configuration/answersWithSamples`` on, the client answers with it instead of
/// the network, through all its behaviors. For UI tests and previews from the app target, with
/// no test library:
///
/// ```swift
/// enum MovieAPI: Endpoint {
///     case popular
///     var path: String { "/movies/popular" }
///     var sampleResponse: SampleResponse? { .json(#"[{"id": 1, "title": "Alien"}]"#) }
/// }
///
/// let stubbed = ProcessInfo.processInfo.arguments.contains("-ui-testing")
/// let client = NetworkClient(baseURL: api, configuration: .init(answersWithSamples: stubbed))
/// ```
public struct SampleResponse: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// The header fields.
    public var headers: HTTPHeaders
    /// The body.
    public var body: Data

    /// Creates a sample response.
    /// - Parameters:
    ///   - status: The status code; 200 by default.
    ///   - headers: The header fields.
    ///   - body: The body.
    public init(status: Int = 200, headers: HTTPHeaders = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response whose body is this JSON text, as written.
    /// - Parameters:
    ///   - json: The body, JSON text.
    ///   - status: The status code; 200 by default.
    /// - Returns: The sample.
    public static func json(_ json: String, status: Int = 200) -> SampleResponse {
        SampleResponse(status: status, headers: ["Content-Type": "application/json"], body: Data(json.utf8))
    }

    /// A response whose body is UTF-8 text.
    /// - Parameters:
    ///   - text: The body text.
    ///   - status: The status code; 200 by default.
    /// - Returns: The sample.
    public static func text(_ text: String, status: Int = 200) -> SampleResponse {
        SampleResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Data(text.utf8))
    }
}

/// The transport of a client that answers with samples: one per request, holding its sample.
struct SampleTransport: HTTPTransport {
    let sample: SampleResponse?

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try Task.checkCancellation()
        guard let sample else { throw NoSampleResponse(method: request.method) }
        return HTTPResponse(status: sample.status, headers: sample.headers, body: sample.body, request: request)
    }

    var honorsCancellation: Bool { true }
}

/// The client answers with samples and the request has none.
struct NoSampleResponse: Error, SafelyDescribable {
    let method: HTTPMethod
    var description: String {
        "the client answers with samples (Configuration.answersWithSamples) and this \(method.rawValue) request "
            + "has no sample response (Endpoint.sampleResponse or Request.sample)"
    }
}
