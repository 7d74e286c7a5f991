import ConveyorTesting
import Foundation
import Testing

/// Known secrets; none may appear in any description, debug description, dump or error text.
let knownSecrets = ["tok-3f9a-SECRET", "cookie-77-SECRET", "pa55-SECRET", "apikey-SECRET"]

/// Every way a value is commonly turned into text.
func renderings(of value: Any) -> [String] {
    var dumped = ""
    dump(value, to: &dumped)
    var texts = [String(describing: value), String(reflecting: value), dumped]
    if let value = value as? any CustomStringConvertible { texts.append(value.description) }
    if let value = value as? any CustomDebugStringConvertible { texts.append(value.debugDescription) }
    if let error = value as? any Error { texts.append(error.localizedDescription) }
    return texts
}

func leakedSecrets(in value: Any) -> [String] {
    renderings(of: value).flatMap { text in knownSecrets.filter { text.contains($0) } }
}

/// An error whose own description carries a secret (as many server-error types do).
struct ChattyError: Error, CustomStringConvertible {
    var description: String { "server said: token tok-3f9a-SECRET is invalid" }
}

@Suite struct SecretsTests {
    let request = HTTPRequest(
        method: .post, url: URL(string: "http://127.0.0.1:9/login?api_key=apikey-SECRET&page=1")!,
        headers: ["Authorization": "Bearer tok-3f9a-SECRET", "cookie": "session=cookie-77-SECRET", "Accept": "*/*"],
        body: Data("user=ann&password=pa55-SECRET".utf8))

    var response: HTTPResponse {
        HTTPResponse(
            status: 401, headers: ["Set-Cookie": "session=cookie-77-SECRET"],
            body: Data(#"{"echo":"pa55-SECRET"}"#.utf8), request: request)
    }

    @Test func requestsResponsesAndHeadersNeverRenderSecrets() {
        for value in [request, response, request.headers, response.headers] as [Any] {
            #expect(leakedSecrets(in: value).isEmpty, "\(type(of: value)) leaked \(leakedSecrets(in: value))")
        }
        // Still useful: what is not secret is shown.
        #expect(request.description.contains("POST http://127.0.0.1:9/login"))
        #expect(request.headers.description.contains("Accept: */*"))
    }

    @Test func everyNetworkErrorCaseRendersWithoutSecrets() {
        let underlying: [any Error] = [
            ChattyError(), URLError(.badServerResponse, userInfo: [NSURLErrorFailingURLErrorKey: request.url]),
            DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "bad")),
        ]
        var errors: [NetworkError] = [
            .invalidRequest("header 'X' has a bad value"), .unacceptableStatus(response), .unauthorized, .forbidden, .timedOut, .offline, .cancelled,
        ]
        for error in underlying {
            errors += [
                .behaviorFailed(behavior: "AuthTokenBehavior", hook: .additionalHeaders, underlying: error),
                .decodingFailed(response, underlying: error), .connectionFailed(error), .transportFailed(error),
            ]
        }
        for error in errors {
            #expect(leakedSecrets(in: error).isEmpty, "\(error) leaked \(leakedSecrets(in: error))")
        }
    }

    @Test func errorsFromARealFailedRequestRenderWithoutSecrets() async {
        let mock = MockTransport()
        mock.enqueue(.text(#"{"error":"bad token tok-3f9a-SECRET"}"#, status: 401, headers: ["Set-Cookie": "s=cookie-77-SECRET"]))
        let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:9")!, transport: mock)
        do throws(NetworkError) {
            try await client.send(
                Request<Void>(
                    method: .post, path: "/login", query: ["api_key": "apikey-SECRET"],
                    headers: ["Authorization": "Bearer tok-3f9a-SECRET"], body: .form(["password": "pa55-SECRET"])))
            Issue.record("expected unauthorized")
        } catch {
            #expect(leakedSecrets(in: error).isEmpty, "leaked \(leakedSecrets(in: error))")
            // The body is still there for code that needs it.
            #expect(error.response.map { String(decoding: $0.body, as: UTF8.self) }?.contains("bad token") == true)
        }
    }

    /// A decoding error keeps its kind and coding path, never a value from the body.
    @Test func aDecodingFailureQuotesNoValueFromTheBody() async {
        struct Picky: Decodable {
            init(from decoder: any Decoder) throws {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: [], debugDescription: "invalid String value s3cr3t-value-SECRET"))
            }
        }
        let mock = MockTransport()
        mock.enqueue(.text(#"{"value":"s3cr3t-value-SECRET"}"#))
        let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:9")!, transport: mock)
        do throws(NetworkError) {
            _ = try await client.send(Request<Picky>(path: "/x"))
            Issue.record("expected decodingFailed")
        } catch {
            var dumped = ""
            dump(error, to: &dumped)
            for text in [error.description, String(reflecting: error), error.localizedDescription, dumped] {
                #expect(!text.contains("s3cr3t"), "\(text)")
            }
            #expect(error.description.contains("data corrupted"))
        }
    }
}
