// The peer: swift-openapi-runtime's client path (UniversalClient, as generated clients call it)
// with no-op ClientMiddleware on a stub ClientTransport. This module imports no Conveyor module,
// because both define HTTPRequest/HTTPResponse.
import Foundation
import HTTPTypes
@_spi(Generated) import OpenAPIRuntime

/// Returns `200 OK` with no body at once.
struct StubTransport: ClientTransport {
    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (
        HTTPResponse, HTTPBody?
    ) {
        (HTTPResponse(status: .ok), nil)
    }
}

/// Only calls `next`.
struct NoOpMiddleware: ClientMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        try await next(request, body, baseURL)
    }
}

/// A generated client's call path with `middlewares` no-op middlewares.
public struct PeerClient: Sendable {
    let client: UniversalClient

    public init(middlewares: Int) {
        client = UniversalClient(
            serverURL: URL(string: "http://127.0.0.1:8080/api")!, transport: StubTransport(),
            middlewares: Array(repeating: NoOpMiddleware(), count: middlewares))
    }

    /// One `GET /movies` through the middlewares; returns the status code.
    public func send() async throws -> Int {
        try await client.send(
            input: (), forOperation: "getMovies",
            serializer: { _ in (HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/movies"), nil) },
            deserializer: { response, _ in response.status.code })
    }
}
