import Conveyor
import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// The framing rules every transport is held to, checked above the transport (contract rule 17).
@Suite struct FramingPolicyTests {
    func outcome(_ headers: HTTPHeaders) -> String {
        do throws(NetworkError) {
            try FramingPolicy.check(headers)
            return "ok"
        } catch {
            guard case .transportFailed = error, let underlying = error.underlying, let malformed = underlying as? MalformedResponse else {
                return "other: \(error)"
            }
            return "\(malformed.rule)"
        }
    }

    @Test func oneContentLengthNoControlCharactersUTF8Only() {
        #expect(outcome(["Content-Length": "12", "X-A": "b"]) == "ok")
        #expect(outcome(["Content-Length": "2", "content-length": "2"]) == "contentLength")
        #expect(outcome(["Content-Length": "2, 9"]) == "contentLength")
        #expect(outcome(["Content-Length": ""]) == "contentLength")
        #expect(outcome(["Content-Length": "-1"]) == "contentLength")
        #expect(outcome(["X-A": "a\rb"]) == "controlCharacter")
        #expect(outcome(["X-A": "a\nb"]) == "controlCharacter")
        #expect(outcome(["X-A": "a\u{0}b"]) == "controlCharacter")
        #expect(outcome(["X\rA": "b"]) == "controlCharacter")
        #expect(outcome(["X-A": "a\u{FFFD}b"]) == "notUTF8")
        #expect(outcome(["X-A": "\u{0731} é\tok"]) == "ok")
    }

    @Test func theErrorNamesTheHeaderNeverItsValue() {
        let error = NetworkError.transportFailed(MalformedResponse(rule: .controlCharacter, header: "X-Secret"))
        #expect(error.description == "Transport failed: malformed response: a CR, LF or NUL in a header (X-Secret)")
        do throws(NetworkError) {
            try FramingPolicy.check(["X-\r-tok-3f9a-SECRET": "v"])
        } catch {
            #expect(!error.description.contains("SECRET") && error.description.contains("(?)"))
        }
    }

    @Test func aMockTransportsResponseIsHeldToTheSameRules() async throws {
        let mock = MockTransport()
        mock.enqueue(.response(status: 200, headers: ["Content-Length": "2, 9"], body: Data("ok".utf8)))
        let client = NetworkClient(baseURL: URL(string: "https://api.test")!, transport: mock)
        await #expect(throws: NetworkError.self) { try await client.send(Request<Data>(path: "/x")) }
    }
}
