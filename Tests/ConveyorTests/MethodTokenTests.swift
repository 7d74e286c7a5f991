import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// RFC 9110 §9.1: a method is a token. Anything else is refused before a byte is sent, with a
/// typed error that does not quote the method, through the client and straight at a transport.
@Suite struct MethodTokenTests {
    static let tchars = Array("abcxyzABCXYZ0189!#$%&'*+-.^_`|~".utf8)
    static let hostile = Array(" \t\r\n\0:/()<>@,;\\\"[]?={}\u{7F}".utf8) + Array("é".utf8)

    /// The reference: non-empty, every byte a tchar.
    static func isToken(_ bytes: [UInt8]) -> Bool { !bytes.isEmpty && bytes.allSatisfy(tchars.contains) }

    @Test func generatedMethodsAreSentExactlyWhenTheyAreTokens() async throws {
        var random = SplitMix64(state: 9110)
        let transport = MockTransport()
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!, transport: transport)
        var refused = 0
        for round in 0..<1500 {
            let length = Int.random(in: 0...12, using: &random)
            var bytes: [UInt8] = []
            for _ in 0..<length {
                let pool = Int.random(in: 0..<8, using: &random) == 0 ? Self.hostile : Self.tchars
                bytes.append(pool.randomElement(using: &random)!)
            }
            if round == 0 { bytes = Array("GET /raw HTTP/1.1\r\nX-Injected: yes\r\nX-Pad:".utf8) }
            let method = HTTPMethod(rawValue: String(decoding: bytes, as: UTF8.self))
            transport.enqueue(.status(204))
            let before = transport.requests.count
            do {
                _ = try await client.send(Request<Void>(method: method, path: "/m"))
                #expect(Self.isToken(bytes), "sent a method that is not a token: \(bytes)")
                #expect(transport.requests.last?.method == method)
            } catch {
                refused += 1
                #expect(!Self.isToken(bytes), "refused a token: \(method)")
                guard case .invalidRequest = error, let reason = error.reason else {
                    Issue.record("expected .invalidRequest, got \(error)")
                    continue
                }
                #expect(reason.contains("not an HTTP token"))
                if bytes.count >= 8 { #expect(!"\(error)".contains(method.rawValue)) }
                #expect(!"\(error)".utf8.contains { $0 < 0x20 })
                #expect(transport.requests.count == before, "the transport was called")
                transport.reset()
            }
        }
        #expect(refused > 100, "the generator should produce many non-tokens (\(refused))")
    }

    @Test func aTransportCalledDirectlyRefusesTheMethodToo() async throws {
        try await LocalServer.withServer { server in
            let transport = URLSessionTransport(configuration: .ephemeral)
            let request = HTTPRequest(
                method: HTTPMethod(rawValue: "GET /raw HTTP/1.1\r\nX-Injected: yes\r\nX-Pad:"), url: server.url("/echo"))
            await #expect(throws: NetworkError.self) { try await transport.send(request) }
            let fine = try await transport.send(HTTPRequest(method: .get, url: server.url("/echo")))
            #expect(fine.status == 200)
        }
    }
}

/// A `RawRepresentable` query value is written as its raw value, not its case name.
@Suite struct RawValueQueryTests {
    enum Sort: String, QueryParameterValue { case newest = "created_at", oldest = "created_at.asc" }
    enum Page: Int, QueryParameterValue { case first = 1, second = 2 }
    struct Tag: RawRepresentable, QueryParameterValue { var rawValue: String }
    struct Opaque: QueryParameterValue, CustomStringConvertible { var description: String { "opaque" } }

    @Test func rawValuesAreWritten() {
        let query: QueryParameters = [
            "sort": Sort.newest, "page": Page.second, "tags": [Tag(rawValue: "a b"), Tag(rawValue: "c")],
            "maybe": Sort?.some(.oldest), "none": Sort?.none, "other": Opaque(),
        ]
        #expect(query.encoded == "sort=created_at&page=2&tags=a%20b&tags=c&maybe=created_at.asc&other=opaque")
    }
}
