public import ConveyorPipeline

/// What code that makes requests depends on, so a test can hand it a fake.
///
/// ``NetworkClient`` conforms; so can a test double that answers with canned values:
///
/// ```swift
/// final class MoviesViewModel {
///     let client: any NetworkClientProtocol
///     init(client: any NetworkClientProtocol) { self.client = client }
///     func load() async throws(NetworkError) -> [Movie] { try await client.get("/movies") }
/// }
/// ```
///
/// The convenience methods (`get`, `post`, `put`, `patch`, `delete`, endpoints) are built on
/// ``send(_:)``, so a fake implements one method.
public protocol NetworkClientProtocol: Sendable {
    /// Sends a typed request.
    /// - Parameter request: The request.
    /// - Returns: Its decoded output.
    /// - Throws: ``NetworkError``.
    func send<Output>(_ request: Request<Output>) async throws(NetworkError) -> Output
}

extension NetworkClientProtocol {
    /// Sends a request and returns its outcome as a `Result` instead of throwing.
    ///
    /// `try await client.send(…)` throws ``NetworkError`` and nothing else, but
    /// Swift forgets that type when the call sits in a closure whose error type is inferred, such
    /// as `Task { }`: its `catch` sees `any Error`. A `Result` keeps the type:
    ///
    /// ```swift
    /// Task {
    ///     switch await client.result(for: Request<[Movie]>(path: "/movies")) {
    ///     case .success(let movies): show(movies)
    ///     case .failure(.offline): showOfflineBanner()
    ///     case .failure(let error): showError(error)
    ///     }
    /// }
    /// ```
    /// - Parameter request: The request.
    /// - Returns: The decoded output, or the ``NetworkError`` that ended it.
    public func result<Output>(for request: Request<Output>) async -> Result<Output, NetworkError> {
        do {
            return .success(try await send(request))
        } catch {
            return .failure(error)
        }
    }

    /// Sends a request with extra per-request behaviors.
    /// - Parameters:
    ///   - request: The request.
    ///   - behaviors: Behaviors for this call only, after the request's own.
    /// - Returns: Its decoded output.
    /// - Throws: ``NetworkError``.
    public func send<Output>(_ request: Request<Output>, behaviors: [any RequestBehavior]) async throws(NetworkError)
        -> Output
    {
        try await send(request.adding(behaviors))
    }

    /// Sends an endpoint and decodes its JSON response.
    /// - Parameters:
    ///   - endpoint: The endpoint.
    ///   - output: The output type (usually inferred).
    ///   - behaviors: Behaviors for this call only.
    /// - Returns: The decoded output.
    /// - Throws: ``NetworkError``.
    public func send<Output: Decodable>(
        _ endpoint: some Endpoint, as output: Output.Type = Output.self, behaviors: [any RequestBehavior] = []
    ) async throws(NetworkError) -> Output {
        try await send(endpoint.request(as: Output.self).adding(behaviors))
    }

    /// Sends an endpoint and ignores its response body.
    /// - Parameters:
    ///   - endpoint: The endpoint.
    ///   - behaviors: Behaviors for this call only.
    /// - Throws: ``NetworkError``.
    public func send(_ endpoint: some Endpoint, behaviors: [any RequestBehavior] = []) async throws(NetworkError) {
        try await send(endpoint.requestIgnoringBody().adding(behaviors))
    }

    /// `GET` a path and decode the JSON response.
    /// - Parameters:
    ///   - path: The path relative to the base URL.
    ///   - query: Query parameters.
    ///   - headers: Headers that win over behaviors' headers.
    /// - Returns: The decoded output.
    /// - Throws: ``NetworkError``.
    public func get<Output: Decodable>(
        _ path: String, query: QueryParameters = [:], headers: HTTPHeaders = [:]
    ) async throws(NetworkError) -> Output {
        try await send(Request<Output>(method: .get, path: path, query: query, headers: headers))
    }

    /// `POST` a JSON body and decode the JSON response.
    /// - Parameters:
    ///   - path: The path relative to the base URL.
    ///   - body: The value to encode as JSON.
    ///   - headers: Headers that win over behaviors' headers.
    /// - Returns: The decoded output.
    /// - Throws: ``NetworkError``.
    public func post<Output: Decodable>(
        _ path: String, body: some Encodable & Sendable, headers: HTTPHeaders = [:]
    ) async throws(NetworkError) -> Output {
        try await send(Request<Output>(method: .post, path: path, headers: headers, body: .json(body)))
    }

    /// `PUT` a JSON body and decode the JSON response.
    /// - Parameters:
    ///   - path: The path relative to the base URL.
    ///   - body: The value to encode as JSON.
    ///   - headers: Headers that win over behaviors' headers.
    /// - Returns: The decoded output.
    /// - Throws: ``NetworkError``.
    public func put<Output: Decodable>(
        _ path: String, body: some Encodable & Sendable, headers: HTTPHeaders = [:]
    ) async throws(NetworkError) -> Output {
        try await send(Request<Output>(method: .put, path: path, headers: headers, body: .json(body)))
    }

    /// `PATCH` a JSON body and decode the JSON response.
    /// - Parameters:
    ///   - path: The path relative to the base URL.
    ///   - body: The value to encode as JSON.
    ///   - headers: Headers that win over behaviors' headers.
    /// - Returns: The decoded output.
    /// - Throws: ``NetworkError``.
    public func patch<Output: Decodable>(
        _ path: String, body: some Encodable & Sendable, headers: HTTPHeaders = [:]
    ) async throws(NetworkError) -> Output {
        try await send(Request<Output>(method: .patch, path: path, headers: headers, body: .json(body)))
    }

    /// `DELETE` a path and decode the JSON response.
    /// - Parameters:
    ///   - path: The path relative to the base URL.
    ///   - headers: Headers that win over behaviors' headers.
    /// - Returns: The decoded output.
    /// - Throws: ``NetworkError``.
    public func delete<Output: Decodable>(_ path: String, headers: HTTPHeaders = [:]) async throws(NetworkError)
        -> Output
    {
        try await send(Request<Output>(method: .delete, path: path, headers: headers))
    }

    /// `DELETE` a path, ignoring the response body (for example a 204).
    /// - Parameters:
    ///   - path: The path relative to the base URL.
    ///   - headers: Headers that win over behaviors' headers.
    /// - Throws: ``NetworkError``.
    public func delete(_ path: String, headers: HTTPHeaders = [:]) async throws(NetworkError) {
        try await send(Request<Void>(method: .delete, path: path, headers: headers))
    }
}
