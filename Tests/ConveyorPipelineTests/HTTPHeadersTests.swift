import ConveyorPipeline
import ConveyorTestSupport
import Foundation
import Testing

@Suite struct HTTPHeadersTests {
    @Test func namesCompareCaseInsensitively() {
        var headers: HTTPHeaders = ["Content-Type": "application/json"]
        #expect(headers["content-type"] == "application/json")
        #expect(headers["CONTENT-TYPE"] == "application/json")
        headers["CONTENT-type"] = "text/plain"
        #expect(headers.count == 1)
        #expect(headers[0].name == "Content-Type")  // the first spelling is kept
        #expect(headers["Content-Type"] == "text/plain")
    }

    /// Names compare by their bytes in place (native and small strings) or through their UTF-8
    /// views: generated pairs, some equal but for ASCII case, some differing in one byte (non-ASCII
    /// bytes compare exactly), agree with comparing the ASCII-lowercased bytes.
    @Test func nameComparisonAgreesWithLowercasedBytes() {
        var generator = SplitMix64(state: 23)
        let alphabet = Array("abcxyzABCXYZ-_.09@[`{é€".unicodeScalars)
        func lowered(_ name: String) -> [UInt8] { name.utf8.map { $0 &- 65 < 26 ? $0 | 0x20 : $0 } }
        for _ in 0..<5000 {
            var name = String.UnicodeScalarView()
            for _ in 0..<Int(generator.next() % 40) { name.append(alphabet[Int(generator.next() % UInt64(alphabet.count))]) }
            let a = String(name)
            var b = String(a.unicodeScalars.map { scalar -> Character in
                let flip = generator.next() % 2 == 0
                return Character(flip ? String(scalar).uppercased() : String(scalar).lowercased())
            })
            if generator.next() % 3 == 0, !b.isEmpty {
                let index = b.index(b.startIndex, offsetBy: Int(generator.next() % UInt64(b.count)))
                b.replaceSubrange(index...index, with: String(alphabet[Int(generator.next() % UInt64(alphabet.count))]))
            }
            #expect(HTTPHeaders.namesEqual(a, b) == (lowered(a) == lowered(b)), "\(a) \(b)")
            #expect(HTTPHeaders.namesEqual(a, a))
            // The path for strings without contiguous bytes (bridged ones on Apple platforms),
            // which strings on Linux never take: called directly.
            #expect(HTTPHeaders.namesEqualIterating(a, b) == (lowered(a) == lowered(b)), "\(a) \(b)")
            #expect(HTTPHeaders.namesEqualIterating(a, a))
            #expect(!HTTPHeaders.namesEqualIterating(a, a + "x") && !HTTPHeaders.namesEqualIterating(a + "x", a))
        }
    }

    @Test func keepsOrderAndRepeatedFields() {
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "a")
        headers.add(name: "X-One", value: "1")
        headers.add(name: "accept", value: "b")
        #expect(headers.map(\.name) == ["Accept", "X-One", "accept"])
        #expect(headers.values(for: "ACCEPT") == ["a", "b"])
        headers["Accept"] = "c"  // replaces every field of that name, at the first position
        #expect(headers.map(\.value) == ["c", "1"])
        headers["x-one"] = nil
        #expect(headers.map(\.name) == ["Accept"])
    }

    @Test func mergeLetsTheOtherSideWin() {
        var headers: HTTPHeaders = ["A": "1", "B": "2"]
        headers.merge(["b": "3", "C": "4"])
        #expect(headers == ["A": "1", "B": "3", "C": "4"])
    }

    /// Unsendable fields, written with escapes so test output never carries raw control bytes.
    @Test(arguments: [
        ("X-Test", "ok\\r\\nInjected: yes"), ("X-Test", "line\\nfeed"), ("X-Test", "nul\\0byte"),
        ("X-Bad Name", "v"), ("X:Colon", "v"), ("", "v"), ("X-\\r\\nA", "v"),
    ])
    func rejectsUnsendableFields(escapedName: String, escapedValue: String) {
        func unescape(_ text: String) -> String {
            text.replacingOccurrences(of: "\\r", with: "\r").replacingOccurrences(of: "\\n", with: "\n")
                .replacingOccurrences(of: "\\0", with: "\0")
        }
        let headers = HTTPHeaders([.init(name: unescape(escapedName), value: unescape(escapedValue))])
        #expect(headers.firstInvalidField() != nil)
    }

    @Test func acceptsOrdinaryFields() {
        let headers: HTTPHeaders = ["X-Token_1.!#$%&'*+^`|~": "tab\there, ünïcode ok", "Accept": ""]
        #expect(headers.firstInvalidField() == nil)
    }

    @Test func descriptionsRedactCredentials() {
        let headers: HTTPHeaders = [
            "authorization": "Bearer s3cr3t", "Cookie": "session=abc", "Set-Cookie": "id=xyz",
            "Proxy-Authorization": "Basic cHc=", "Accept": "application/json",
        ]
        for text in [headers.description, headers.debugDescription, String(describing: headers)] {
            for secret in ["s3cr3t", "session=abc", "id=xyz", "cHc="] { #expect(!text.contains(secret)) }
            #expect(text.contains("application/json"))
        }
    }
}
