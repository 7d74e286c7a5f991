import ConveyorTesting
import Foundation
import Testing

@Suite struct ResponseDecodingTests {
    struct Movie: Codable, Equatable, Sendable { var id: Int; var title: String }

    func client(_ mock: MockTransport) -> NetworkClient {
        NetworkClient(baseURL: URL(string: "http://127.0.0.1:1")!, transport: mock)
    }

    @Test func decodesEveryKindOfOutput() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/movie", reply: .json(Movie(id: 1, title: "Alien")))
        mock.stub(.get, "/text", reply: .text("héllo"))
        mock.stub(.delete, "/movie", reply: .status(204))
        let client = client(mock)
        let movie: Movie = try await client.get("/movie")
        #expect(movie == Movie(id: 1, title: "Alien"))
        #expect(try await client.send(Request<String>(path: "/text")) == "héllo")
        #expect(try await client.send(Request<Data>(path: "/text")) == Data("héllo".utf8))
        let raw = try await client.send(Request<HTTPResponse>(path: "/movie"))
        #expect(raw.status == 200 && raw.headers["content-type"] == "application/json")
        try await client.delete("/movie")
        #expect(mock.requests.last?.method == .delete)
    }

    @Test func invalidUTF8IsADecodingFailureThatKeepsTheBody() async {
        let mock = MockTransport()
        let bytes = Data([0x66, 0xFF, 0xFE])
        mock.enqueue(.response(status: 200, headers: [:], body: bytes))
        do {
            _ = try await client(mock).send(Request<String>(path: "/bin"))
            Issue.record("expected a decoding failure")
        } catch {
            guard case .decodingFailed = error, let response = error.response else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(response.body == bytes)
        }
    }

    @Test(arguments: [(401, "unauthorized"), (404, "notFound"), (500, "unacceptableStatus"), (429, "unacceptableStatus")])
    func statusesMapToErrorsThatKeepTheResponse(status: Int, expected: String) async {
        let mock = MockTransport()
        mock.enqueue(.text(#"{"error":"x"}"#, status: status))
        do {
            let _: Movie = try await client(mock).get("/m")
            Issue.record("expected a failure")
        } catch {
            let name: String
            switch error {
            case .unauthorized: name = "unauthorized"
            case .notFound: name = "notFound"
            case .unacceptableStatus: name = "unacceptableStatus"
            default: name = "\(error)"
            }
            #expect(name == expected)
            #expect(error.status == status)
            #expect(error.response?.body == Data(#"{"error":"x"}"#.utf8))
        }
    }

    @Test func acceptableStatusCodesAreConfigurable() async throws {
        let mock = MockTransport()
        mock.enqueue(.text("cached", status: 304))
        let client = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:1")!, transport: mock,
            configuration: .init(acceptableStatusCodes: Set(200..<300).union([304])))
        #expect(try await client.send(Request<String>(path: "/c")) == "cached")
    }

    @Test(arguments: [
        (URLError.Code.notConnectedToInternet, "offline"), (.timedOut, "timedOut"), (.cancelled, "cancelled"),
        (.cannotConnectToHost, "connectionFailed"), (.networkConnectionLost, "connectionFailed"),
        (.cannotFindHost, "connectionFailed"), (.badServerResponse, "transportFailed"),
    ])
    func transportErrorsMapToActionableCases(code: URLError.Code, expected: String) async {
        let mock = MockTransport()
        mock.enqueue(.failure(URLError(code)))
        do {
            try await client(mock).send(Request<Void>(path: "/x"))
            Issue.record("expected a failure")
        } catch {
            let name: String
            switch error {
            case .offline: name = "offline"
            case .timedOut: name = "timedOut"
            case .cancelled: name = "cancelled"
            case .connectionFailed: name = "connectionFailed"
            case .transportFailed: name = "transportFailed"
            default: name = "\(error)"
            }
            #expect(name == expected)
        }
    }

    @Test func anUnexpectedMockRequestExplainsWhatWasExpected() async {
        let mock = MockTransport()
        mock.stub(.get, "/movies", reply: .status(200))
        do {
            try await client(mock).send(Request<Void>(method: .post, path: "/ratings"))
            Issue.record("expected a failure")
        } catch {
            #expect(error.description.contains("unexpected request POST /ratings"))
            #expect(error.description.contains("GET /movies"))
        }
    }
}
