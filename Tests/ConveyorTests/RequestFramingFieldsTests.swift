import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A request's own framing fields never disagree with its body on the wire: URLSession on Linux
/// sends a caller's `Content-Length` as it is, so `Content-Length: 3` on a 10-byte body made the
/// server read the last 7 bytes as the start of the next request on the connection (seen on a raw
/// socket), and `Content-Length: 100` left it waiting for bytes that never came. The engine now
/// refuses such a request before anything is sent (`HTTPRequest.framingProblem`).
@Suite struct RequestFramingFieldsTests {
    enum Body: CustomStringConvertible {
        case none, bytes(Int), stream(Int), unknownStream(Int)
        var length: Int64? {
            switch self {
            case .none: 0
            case .bytes(let n), .stream(let n): Int64(n)
            case .unknownStream: nil
            }
        }
        var description: String {
            switch self {
            case .none: "none"
            case .bytes(let n): "\(n) bytes"
            case .stream(let n): "a stream of \(n) bytes"
            case .unknownStream(let n): "a stream of \(n) bytes, length unknown"
            }
        }
        func apply(to request: inout Request<HTTPResponse>) {
            let data = { (n: Int) in Data(repeating: UInt8(ascii: "x"), count: n) }
            switch self {
            case .none: break
            case .bytes(let n): request.body = .data(data(n), contentType: "text/plain")
            case .stream(let n):
                request.body = .stream(HTTPBodyStream(AsyncStream { $0.yield(data(n)); $0.finish() }, length: Int64(n)), contentType: nil)
            case .unknownStream(let n):
                request.body = .stream(HTTPBodyStream(AsyncStream { $0.yield(data(n)); $0.finish() }), contentType: nil)
            }
        }
    }

    /// The reference: at most one `Content-Length`, digits (spaces around allowed) equal to the
    /// body's known length; no `Transfer-Encoding`.
    static func allowed(_ fields: [(String, String)], body: Body) -> Bool {
        let lengths = fields.filter { $0.0.lowercased() == "content-length" }.map(\.1)
        if fields.contains(where: { $0.0.lowercased() == "transfer-encoding" }) { return false }
        guard let value = lengths.first else { return true }
        guard lengths.count == 1, let length = body.length else { return false }
        let digits = value.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return false }
        return Int64(digits) == length
    }

    @Test func generatedFramingFieldsAreSentExactlyWhenTheyAgreeWithTheBody() async throws {
        var random = SplitMix64(state: 9112)
        let transport = MockTransport()
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!, transport: transport)
        var refused = 0
        var sent = 0
        for round in 0..<1200 {
            let n = Int.random(in: 0...20, using: &random)
            let body: Body = [.none, .bytes(n), .stream(n), .unknownStream(n)][Int.random(in: 0..<4, using: &random)]
            let length = body.length ?? Int64(n)
            let names = ["Content-Length", "content-length", "CONTENT-LENGTH", "Transfer-Encoding", "transfer-encoding", "X-Length", "Content-Lengths"]
            let values = [
                "\(length)", " \(length)\t", "0\(length)", "\(length + 1)", "\(max(0, length - 1))", "+\(length)",
                "\(length), \(length)", "", "chunked", "99999999999999999999999", "-1", "1e3",
            ]
            var fields: [(String, String)] = []
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                fields.append((names.randomElement(using: &random)!, values.randomElement(using: &random)!))
            }
            // Every shape at least once: a matching length, a wrong one, a chunked coding.
            if round < 4 { fields = [[("Content-Length", "\(length)")], [("Content-Length", "\(length + 1)")], [("Transfer-Encoding", "chunked")], []][round] }
            var request = Request<HTTPResponse>(method: .post, path: "/f")
            body.apply(to: &request)
            for (name, value) in fields { request.headers.add(name: name, value: value) }
            let expected = Self.allowed(fields, body: body)
            transport.enqueue(.status(204))
            let before = transport.requests.count
            do {
                _ = try await client.send(request)
                sent += 1
                #expect(expected, "sent \(fields) with \(body)")
                #expect(transport.requests.count == before + 1)
            } catch {
                refused += 1
                #expect(!expected, "refused \(fields) with \(body): \(error)")
                guard case .invalidRequest = error, let reason = error.reason else {
                    Issue.record("expected .invalidRequest, got \(error)")
                    continue
                }
                #expect(reason.contains("Content-Length") || reason.contains("Transfer-Encoding"), "\(reason)")
                #expect(!reason.contains("99999999999999999999999") && !reason.contains("1e3"), "quoted a value: \(reason)")
                #expect(transport.requests.count == before, "the transport was called")
                transport.reset()
            }
        }
        #expect(sent > 200 && refused > 200, "both outcomes, many times: \(sent) sent, \(refused) refused")
    }

    /// A behavior that rewrites the body after a length was set (a compressor that forgets the
    /// field, say) gets a typed error, not a desynchronised connection.
    struct Compressor: RequestModifying {
        func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
            request.headers["Content-Length"] = "\(request.body?.count ?? 0)"
            request.body = Data("shorter".utf8)
        }
    }

    @Test func aBehaviorThatChangesTheBodyUnderItsLengthIsRefused() async throws {
        let transport = MockTransport()
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!, transport: transport, behaviors: { Compressor() })
        let error = await #expect(throws: NetworkError.self) {
            try await client.send(Request<Void>(method: .post, path: "/c", body: .data(Data(repeating: 1, count: 40), contentType: nil)))
        }
        #expect(error?.reason == "the request's Content-Length is 40 but its body has 7 bytes: remove the field (the transport sets it) or make it match")
        #expect(transport.requests.isEmpty)
    }

    /// Over a real connection: a length that agrees arrives with the whole body, once; one that
    /// does not never reaches the server, and the connection serves the next request intact.
    @Test func overURLSessionAMatchingLengthArrivesAndAWrongOneIsNeverSent() async throws {
        try await LocalServer.withServer { server in
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral))
            var matching = Request<Echo>(method: .post, path: "/echo", body: .data(Data("0123456789".utf8), contentType: "text/plain"))
            matching.headers.add(name: "Content-Length", value: "10")
            let echo = try await client.send(matching)
            #expect(echo.body == "0123456789")
            #expect(echo.headers["content-length"] == "10")

            var wrong = Request<Echo>(method: .post, path: "/echo", body: .data(Data("0123456789".utf8), contentType: "text/plain"))
            wrong.headers.add(name: "Content-Length", value: "3")
            await #expect(throws: NetworkError.self) { try await client.send(wrong) }
            let next = try await client.send(Request<Echo>(method: .post, path: "/echo", body: .data(Data("next".utf8), contentType: "text/plain")))
            #expect(next.body == "next")
            #expect(next.method == "POST")

            // A transport called directly, without the client, refuses it too.
            var direct = HTTPRequest(method: .post, url: server.url("/echo"), body: Data("0123456789".utf8))
            direct.headers["Content-Length"] = "3"
            for transport in [URLSessionTransport(configuration: .ephemeral) as any HTTPTransport, URLSession(configuration: .ephemeral)] {
                let error = await #expect(throws: NetworkError.self) { try await transport.send(direct) }
                #expect(error?.reason?.contains("Content-Length is 3 but its body has 10 bytes") == true, "\(String(describing: error))")
            }
        }
    }
}
