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

    /// The check reads bytes in place and looks closer only at a suspicious byte: generated
    /// fields (small strings of up to 15 bytes, which Swift stores inline, and longer ones), with
    /// CR, LF, NUL, U+FFFD, other controls, U+F000 (whose UTF-8 starts with 0xEF, like U+FFFD's)
    /// and other non-ASCII text at any place in a name or a value, agree with the rules.
    @Test func generatedFieldsAgreeWithTheRules() {
        var generator = SplitMix64(state: 31)
        let pieces: [String] = ["a", "Z", "-", " ", "\t", "0", "é", "ï", "\u{FFFD}", "\u{EFFF}", "\u{F000}", "\r", "\n", "\u{0}", "\u{1}", "€", "\u{1F600}"]
        // The outcomes the rules allow: the first field with a violation decides; when it has
        // both kinds (a control character and U+FFFD), either rule may be named.
        func allowed(_ fields: [(String, String)]) -> Set<String> {
            for (name, value) in fields {
                let control = [name, value].contains { $0.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 } }
                let replacement = [name, value].contains { $0.unicodeScalars.contains("\u{FFFD}") }
                switch (control, replacement) {
                case (true, true): return ["controlCharacter", "notUTF8"]
                case (true, false): return ["controlCharacter"]
                case (false, true): return ["notUTF8"]
                case (false, false): continue
                }
            }
            return ["ok"]
        }
        func text() -> String {
            let length = Int(generator.next() % 40)
            var text = ""
            for _ in 0..<length {
                // Mostly plain letters, so that a bad byte lands at any place of a long string.
                text += generator.next() % 4 == 0 ? pieces[Int(generator.next() % UInt64(pieces.count))] : "x"
            }
            return text
        }
        for _ in 0..<5000 {
            let fields = (0..<Int(1 + generator.next() % 3)).map { _ in ("X-" + text(), text()) }
            let got = outcome(HTTPHeaders(fields.map { HTTPHeaders.Field(name: $0.0, value: $0.1) }))
            #expect(allowed(fields).contains(got), "\(fields.map { "\($0.0.debugDescription): \($0.1.debugDescription)" })")
        }
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
