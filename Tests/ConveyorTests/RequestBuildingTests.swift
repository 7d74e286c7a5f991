import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct RequestBuildingTests {
    let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:8080/api/v1/")!, transport: MockTransport())

    @Test func joinsBaseURLAndPathWithOneSlash() throws {
        #expect(try client.makeHTTPRequest(Request<Data>(path: "/movies")).url.absoluteString == "http://127.0.0.1:8080/api/v1/movies")
        #expect(try client.makeHTTPRequest(Request<Data>(path: "movies")).url.absoluteString == "http://127.0.0.1:8080/api/v1/movies")
        #expect(try client.makeHTTPRequest(Request<Data>(path: "")).url.absoluteString == "http://127.0.0.1:8080/api/v1")
    }

    @Test func encodesQueryValuesStrictly() throws {
        let request = Request<Data>(
            path: "/search",
            query: ["q": "rock & roll + jazz", "city": "Zürich", "eq": "a=b", "ids": [1, 2], "none": nil as String?, "flag": true])
        let url = try client.makeHTTPRequest(request).url
        #expect(url.query == "q=rock%20%26%20roll%20%2B%20jazz&city=Z%C3%BCrich&eq=a%3Db&ids=1&ids=2&flag=true")
    }

    @Test func percentEncodesUnsafePathCharactersButKeepsEscapes() throws {
        let url = try client.makeHTTPRequest(Request<Data>(path: "/files/my report #1.pdf/50%25/é")).url
        #expect(url.absoluteString == "http://127.0.0.1:8080/api/v1/files/my%20report%20%231.pdf/50%25/%C3%A9")
    }

    @Test func aQueryInThePathIsKeptAndParametersAreAppended() throws {
        let url = try client.makeHTTPRequest(Request<Data>(path: "/movies?sort=desc", query: ["page": 2])).url
        #expect(url.query == "sort=desc&page=2")
    }

    @Test func anAbsoluteURLPathIgnoresTheBaseURL() throws {
        let url = try client.makeHTTPRequest(Request<Data>(path: "http://127.0.0.1:9000/next?page=3")).url
        #expect(url.absoluteString == "http://127.0.0.1:9000/next?page=3")
    }

    @Test func jsonBodySetsContentTypeUnlessTheRequestDoes() throws {
        struct Payload: Codable, Equatable { var title: String }
        let json = try client.makeHTTPRequest(Request<Data>(method: .post, path: "/m", body: .json(Payload(title: "Heat"))))
        #expect(json.headers["Content-Type"] == "application/json")
        #expect(try json.decodedBody(as: Payload.self) == Payload(title: "Heat"))

        let custom = try client.makeHTTPRequest(
            Request<Data>(method: .post, path: "/m", headers: ["content-type": "application/vnd.api+json"], body: .json(Payload(title: "x"))))
        #expect(custom.headers.values(for: "Content-Type") == ["application/vnd.api+json"])
    }

    @Test func formBodyIsURLEncoded() throws {
        let request = try client.makeHTTPRequest(
            Request<Data>(method: .post, path: "/login", body: .form(["user": "ann lee", "password": "p&ss=1+2"])))
        #expect(request.headers["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(request.bodyText == "user=ann%20lee&password=p%26ss%3D1%2B2")
    }

    @Test func aBodyThatCannotBeEncodedIsAnInvalidRequest() {
        #expect(throws: NetworkError.self) {
            try client.makeHTTPRequest(Request<Data>(method: .post, path: "/m", body: .json(Double.nan)))
        }
    }

    @Test func timeoutComesFromTheRequestOrTheClient() throws {
        let withDefault = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1")!, transport: MockTransport(), configuration: .init(timeout: .seconds(5)))
        #expect(try withDefault.makeHTTPRequest(Request<Data>(path: "/a")).timeout == .seconds(5))
        #expect(try withDefault.makeHTTPRequest(Request<Data>(path: "/a", timeout: .milliseconds(250))).timeout == .milliseconds(250))
        #expect(try client.makeHTTPRequest(Request<Data>(path: "/a")).timeout == nil)
    }

    @Test func aBaseURLWithoutHostFailsRelativeRequestsButNotAbsoluteOnes() throws {
        let broken = NetworkClient(baseURL: URL(string: "relative/only")!, transport: MockTransport())
        #expect(throws: NetworkError.self) { try broken.makeHTTPRequest(Request<Data>(path: "/movies")) }
        let url = try broken.makeHTTPRequest(Request<Data>(path: "http://127.0.0.1:9/next")).url
        #expect(url.absoluteString == "http://127.0.0.1:9/next")
    }
}

/// A fragment is never sent and never logged (contract rule 12): the OAuth implicit flow's
/// `#access_token=…` on an absolute URL. Before, the fragment was percent-encoded into the path
/// (`/echo%23access_token=…`): the server received the token and the log line showed it.
@Suite struct FragmentNeverSentTests {
    @Test func anAbsoluteURLsFragmentReachesNeitherTheServerNorTheLog() async throws {
        try await LocalServer.withServer { server in
            let sink = CapturingLogSink()
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSession(configuration: .ephemeral)) {
                LoggingBehavior(sink: sink, bodyPreviewLimit: 4096)
            }
            let token = "frag-tok-7731-SECRET"
            struct Echo: Decodable { let path: String; let rawQuery: String }
            let echo: Echo = try await client.send(
                Request(path: server.baseURL.absoluteString + "/echo?page=2#access_token=\(token)&state=s"))
            #expect(echo.path == "/echo")
            #expect(echo.rawQuery == "page=2")
            let lines = sink.entries.map(\.message)
            #expect(!lines.isEmpty)
            for line in lines { #expect(!line.contains(token) && !line.contains("%23"), "\(line)") }
        }
    }

    @Test func aRelativePathKeepsItsHashAsData() throws {
        let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:8080/api")!)
        let url = try client.makeHTTPRequest(Request<Data>(path: "/tags/C#")).url
        #expect(url.absoluteString == "http://127.0.0.1:8080/api/tags/C%23")
        let absolute = try client.makeHTTPRequest(Request<Data>(path: "http://127.0.0.1:9/cb?x=1#access_token=t")).url
        #expect(absolute.absoluteString == "http://127.0.0.1:9/cb?x=1")
        #expect(absolute.fragment == nil)
    }
}
