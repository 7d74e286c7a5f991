import Conveyor
import ConveyorOpenAPI
import Foundation
import OpenAPIRuntime
import TestServerAPI

// Every Swift block of Docs/OpenAPI.md marked "compiled by its DocExamplesTests" is copied below,
// as written, where the compiler checks it (the functions are never run: they would contact
// api.example.com). DocExamplesTests checks that the copies and the document agree.

/// What the guide's authentication example reads its token from and refreshes it with.
let storedToken = "stored"
func refreshSession(replacing expired: String?) async throws -> String { "fresh" }

enum OpenAPIGuideExamples {
    static func sendThroughConveyor() async throws {
        let conveyor = NetworkClient(baseURL: URL(string: "https://api.example.com")!) {
            RetryBehavior()
            CacheBehavior()
        }
        let api = Client(serverURL: conveyor.baseURL, transport: ConveyorTransport(client: conveyor))
        let flaky = try await api.getFlaky(path: .init(name: "feed"))
        print(try flaky.ok.body.json.attempts)
    }

    static func authentication() async throws {
        let tokens = InMemoryTokenStore(token: storedToken) { expired in
            try await refreshSession(replacing: expired)
        }
        let conveyor = NetworkClient(baseURL: URL(string: "https://api.example.com")!) {
            AuthTokenBehavior(tokens: tokens, refresher: tokens)
        }
        let api = Client(serverURL: conveyor.baseURL, transport: ConveyorTransport(client: conveyor))
        switch try await api.checkAuth(query: .init(token: "abc")) {
        case .ok(let ok): print("signed in:", try ok.body.json.ok)
        case .unauthorized: print("the refreshed token was refused too: sign in again")
        case .undocumented(let status, _): print("unexpected status", status)
        }
    }
}

/// Sends `X-Client-Operation: <id>` with every generated operation.
struct OperationHeader: HeaderAdding {
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        guard let id = context.openAPIOperationID else { return [:] }
        return ["X-Client-Operation": id]
    }
}

func makeAPI(tokens: InMemoryTokenStore) -> Client {
    let conveyor = NetworkClient(baseURL: URL(string: "https://api.example.com")!) {
        OperationHeader()
        AuthTokenBehavior(tokens: tokens, refresher: tokens)
    }
    let transport = ConveyorTransport(
        client: conveyor,
        operations: [
            // No token on the echo operation; a longer timeout and one more header on uploads.
            Operations.echo.id: .excluding(.type(AuthTokenBehavior.self)),
            Operations.uploadBytes.id: OperationOptions(
                behaviors: [HeadersBehavior(["X-Upload-Client": "app"])], timeout: .seconds(600)),
        ])
    return Client(serverURL: conveyor.baseURL, transport: transport)
}

func saveDownload(_ api: Client, to file: URL) async throws {
    let body = try await api.downloadBytes(query: .init(bytes: 1 << 30)).ok.body.binary
    guard FileManager.default.createFile(atPath: file.path, contents: nil) else { throw CocoaError(.fileWriteUnknown) }
    let handle = try FileHandle(forWritingTo: file)
    defer { try? handle.close() }
    for try await chunk in body {
        try handle.write(contentsOf: chunk)
    }
}

func status(_ api: Client) async -> String {
    do {
        return "answered \(try await api.getStatus(path: .init(code: 200)).ok.body.json.status)"
    } catch let error as ClientError {
        switch (error.underlyingError as? NetworkError)?.name {
        case "timedOut": return "timed out"
        case "connectionFailed", "offline": return "no connection"
        case "cancelled": return "cancelled"
        default: return "failed: \(error.underlyingError)"
        }
    } catch {
        return "failed: \(error)"
    }
}
