import ConveyorPipeline
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
