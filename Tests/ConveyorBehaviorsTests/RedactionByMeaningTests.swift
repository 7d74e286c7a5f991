import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import Foundation
import Testing

/// Field and header names are compared by meaning: every spelling of every default secret name,
/// at any depth, in JSON, forms and queries, is hidden; configuration adds to the defaults.
@Suite struct RedactionByMeaningTests {
    /// `access_token` in the spellings APIs use.
    static func spellings(of name: String) -> [String] {
        let words = name.split(separator: "_").map(String.init)
        let capitalized = words.map { $0.prefix(1).uppercased() + $0.dropFirst() }
        return [
            words.joined(separator: "_"), words.joined(separator: "-"), words.joined(separator: "."),
            words.joined(separator: "_").uppercased(), capitalized.joined(separator: "-"),
            words[0] + capitalized.dropFirst().joined(), capitalized.joined(), words.joined(),
        ]
    }

    @Test func everySpellingOfEveryDefaultNameIsHiddenAtAnyDepthInEveryEncoding() throws {
        let redactor = Redactor()
        var random = SplitMix64(state: 6265)
        var checked = 0
        for name in Redactor.defaultFields.sorted() {
            for spelling in Self.spellings(of: name) {
                let secret = "s3cr3t\(UInt32.random(in: 0...UInt32.max, using: &random))"
                let depth = Int.random(in: 0...3, using: &random)
                var json = "{\"\(spelling)\":\"\(secret)\"}"
                for level in 0..<depth { json = level % 2 == 0 ? "{\"data\":[\(json)]}" : "{\"user\":\(json)}" }
                let renderings = [
                    redactor.preview(Data(json.utf8), contentType: "application/json", limit: 4096),
                    redactor.preview(
                        Data("a=1&\(spelling)=\(secret)".utf8), contentType: "application/x-www-form-urlencoded",
                        limit: 4096),
                    redactor.redact(URL(string: "https://api.example.com/p?\(spelling)=\(secret)&page=2")!),
                ]
                for rendering in renderings {
                    #expect(!rendering.contains(secret), "\(spelling) leaked in \(rendering)")
                    checked += 1
                }
            }
        }
        #expect(checked == Redactor.defaultFields.count * 8 * 3)
    }

    @Test func namesThatOnlyLookAlikeAreShown() {
        let redactor = Redactor()
        let shown = redactor.preview(
            Data(#"{"tokenizer":"bpe","keyboard":"us","page":2}"#.utf8), contentType: "application/json", limit: 4096)
        #expect(shown.contains("bpe") && shown.contains("us"))
    }

    @Test func configurationAddsToTheDefaultsUnlessItReplacesThem() {
        let added = Redactor(headers: ["X-Tenant-Key"], fields: ["ssn"])
        #expect(added.hides(header: "x_tenant_key"))
        #expect(added.hides(header: "X-API-Key"))
        #expect(added.fields.contains("password"))
        let body = Data(#"{"ssn":"123-45-6789","accessToken":"tok-1","name":"ann"}"#.utf8)
        let text = added.preview(body, contentType: "application/json", limit: 4096)
        #expect(!text.contains("123-45-6789") && !text.contains("tok-1") && text.contains("ann"))

        let replaced = Redactor.replacing(headers: [], fields: ["ssn"])
        let bare = replaced.preview(body, contentType: "application/json", limit: 4096)
        #expect(!bare.contains("123-45-6789") && bare.contains("tok-1"))
        #expect(replaced.hides(header: "Authorization"))  // credential headers always are
    }

    @Test func headerNamesCompareByMeaning() {
        let redactor = Redactor()
        for name in ["X-Auth-Token", "x_auth_token", "X-AUTH-TOKEN", "x.auth.token", "X-Session-Token"] {
            #expect(redactor.hides(header: name), "\(name)")
        }
        #expect(!redactor.hides(header: "X-Request-ID"))
    }

    /// `SensitiveHeaders.contains` looks up only the added names itself: every built-in one must
    /// be a credential by meaning, in every spelling.
    @Test func everyBuiltInNameIsACredentialByMeaning() {
        for name in SensitiveHeaders.builtIn {
            for spelling in [name, name.lowercased(), name.uppercased(), name.replacingOccurrences(of: "-", with: "_")] {
                #expect(SensitiveHeaders.isCredentialByMeaning(spelling), "\(spelling)")
                #expect(SensitiveHeaders.standard.contains(spelling), "\(spelling)")
            }
        }
        let added = SensitiveHeaders.standard.adding(["X-Ssn"])
        #expect(added.contains("x-ssn") && !SensitiveHeaders.standard.contains("X-Ssn"))
        for plain in ["Content-Type", "Date", "Server", "Content-Length", "ETag", "Cache-Control", "X-Request-ID", "Vary"] {
            #expect(!SensitiveHeaders.standard.contains(plain), "\(plain)")
        }
    }

    /// The letter pre-check never hides a word: generated names that embed a word, at any place
    /// and in any case, with separators, are found; names that lack a letter of every word are not.
    @Test func theLetterPrecheckAgreesWithASearch() {
        var generator = SplitMix64(state: 27)
        let words = ["token", "auth", "secret", "session", "cookie", "password", "passwd", "signature", "credential",
            "apikey", "accesskey", "privatekey", "csrf", "xsrf"]
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.0123456789")
        for _ in 0..<3000 {
            var name = ""
            for _ in 0..<Int(generator.next() % 24) { name.append(alphabet[Int(generator.next() % UInt64(alphabet.count))]) }
            let folded = String(name.lowercased().filter { !"-_.".contains($0) })
            let expected = words.contains { folded.contains($0) }
            #expect(SensitiveHeaders.isCredentialByMeaning(name) == expected, "\(name)")
            let word = words[Int(generator.next() % UInt64(words.count))]
            let cut = name.index(name.startIndex, offsetBy: name.isEmpty ? 0 : Int(generator.next() % UInt64(name.count)))
            let head = String(name[name.startIndex..<cut])
            let tail = String(name[cut..<name.endIndex])
            let spelled = generator.next() % 2 == 0 ? word.uppercased() : word
            let embedded = head + spelled + tail
            #expect(SensitiveHeaders.isCredentialByMeaning(embedded), "\(embedded)")
        }
    }
}
