// The peer: swift-openapi-runtime's client path (UniversalClient, as generated clients call it)
// with no-op ClientMiddleware on a stub ClientTransport. This file imports no Conveyor module,
// because both define HTTPRequest/HTTPResponse.
import Benchmark
import Foundation
import HTTPTypes
@_spi(Generated) import OpenAPIRuntime

struct StubTransport: ClientTransport {
    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (
        HTTPResponse, HTTPBody?
    ) {
        (HTTPResponse(status: .ok), nil)
    }
}

struct NoOpMiddleware: ClientMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        try await next(request, body, baseURL)
    }
}

func registerPeerBenchmarks(_ configuration: Benchmark.Configuration) {
    for count in [0, 1, 10] {
        let client = UniversalClient(
            serverURL: URL(string: "http://127.0.0.1:8080/api")!, transport: StubTransport(),
            middlewares: Array(repeating: NoOpMiddleware(), count: count))
        Benchmark("4 Peer openapi-runtime, \(count) no-op middlewares", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                let status = try await client.send(
                    input: (), forOperation: "getMovies",
                    serializer: { _ in (HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/movies"), nil) },
                    deserializer: { response, _ in response.status.code })
                blackHole(status)
            }
        }
    }
}
