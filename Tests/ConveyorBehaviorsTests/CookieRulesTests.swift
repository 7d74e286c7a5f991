import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import Foundation
import Testing

/// Each way a reviewer got a cookie where RFC 6265 and its update keep it out (README: "scoped as
/// RFC 6265 says"). Every case failed on the jar before the public suffix list and the prefix,
/// secure-origin and last-attribute rules.
@Suite struct CookieRulesTests {
    static func url(_ text: String) -> URL { URL(string: text)! }
    static func names(_ jar: CookieJar, _ url: String) -> [String] { jar.cookies(for: Self.url(url)).map(\.name) }

    @Test func aPublicSuffixIsNoCookieDomain() {
        let jar = CookieJar()
        jar.store(setCookies: ["uk=1; Domain=co.uk"], from: Self.url("https://evil.co.uk/"))
        jar.store(setCookies: ["pages=1; Domain=github.io"], from: Self.url("https://evil.github.io/"))
        jar.store(setCookies: ["wild=1; Domain=other.kawasaki.jp"], from: Self.url("https://a.other.kawasaki.jp/"))
        #expect(Self.names(jar, "https://bank.co.uk/").isEmpty)
        #expect(Self.names(jar, "https://victim.github.io/").isEmpty)
        #expect(Self.names(jar, "https://b.other.kawasaki.jp/").isEmpty)  // `*.kawasaki.jp`
        // A registrable name under a suffix is a cookie domain as before; an exception rule
        // (`!city.kawasaki.jp`) too.
        jar.store(setCookies: ["ok=1; Domain=example.co.uk"], from: Self.url("https://www.example.co.uk/"))
        jar.store(setCookies: ["city=1; Domain=city.kawasaki.jp"], from: Self.url("https://www.city.kawasaki.jp/"))
        #expect(Self.names(jar, "https://api.example.co.uk/") == ["ok"])
        #expect(Self.names(jar, "https://x.city.kawasaki.jp/") == ["city"])
    }

    @Test func aHostThatIsAPublicSuffixGetsAHostOnlyCookie() {
        let jar = CookieJar()
        jar.store(setCookies: ["a=1; Domain=ai"], from: Self.url("https://ai/"))
        #expect(Self.names(jar, "https://ai/") == ["a"])
        #expect(Self.names(jar, "https://evil.ai/").isEmpty)
        #expect(jar.cookies.first?.hostOnly == true)
    }

    @Test func aTrailingDotMakesNoCookieDomain() {
        let jar = CookieJar()
        jar.store(setCookies: ["dot=1; Domain=com."], from: Self.url("https://example.com./"))
        jar.store(setCookies: ["dot2=1; Domain=example.com."], from: Self.url("https://www.example.com/"))
        #expect(Self.names(jar, "https://evil.com./").isEmpty)
        #expect(Self.names(jar, "https://evil.com/").isEmpty)
        #expect(Self.names(jar, "https://www.example.com/").isEmpty)
    }

    @Test func prefixesAreEnforcedInAnyCase() {
        let jar = CookieJar()
        let sub = Self.url("https://sub.example.com/")
        jar.store(
            setCookies: [
                "__Host-sid=wide; Secure; Path=/; Domain=example.com",  // a Domain: refused
                "__host-low=1; Secure; Path=/; Domain=example.com",  // lowercase: the same rule
                "__Host-path=1; Secure; Path=/app",  // not Path=/: refused
                "__Host-ok=1; Secure; Path=/",
                "__Secure-nosec=1",  // no Secure: refused
                "__SECURE-ok=1; Secure",
            ], from: sub)
        #expect(Set(Self.names(jar, "https://sub.example.com/")) == ["__Host-ok", "__SECURE-ok"])
        #expect(Self.names(jar, "https://www.example.com/").isEmpty)
        // Over http, neither prefix is set at all: a fixated __Host- session never reaches https.
        jar.store(setCookies: ["__Host-sid=fixated; Path=/", "__Secure-x=1; Secure"], from: Self.url("http://www.example.com/"))
        #expect(Self.names(jar, "https://www.example.com/").isEmpty)
    }

    @Test func anInsecureOriginCannotReplaceASecureCookie() {
        let jar = CookieJar()
        jar.store(setCookies: ["session=good; Secure; Path=/"], from: Self.url("https://example.com/"))
        jar.store(setCookies: ["session=fixated; Path=/"], from: Self.url("http://example.com/"))
        #expect(jar.header(for: Self.url("https://example.com/")) == "session=good")
        #expect(jar.header(for: Self.url("http://example.com/")) == nil)
        // HTTPS replaces it as before.
        jar.store(setCookies: ["session=new; Secure; Path=/"], from: Self.url("https://example.com/"))
        #expect(jar.header(for: Self.url("https://example.com/")) == "session=new")
    }

    @Test func theLastDomainAndPathCount() {
        let jar = CookieJar()
        jar.store(setCookies: ["p=1; Path=/a; Path=relative"], from: Self.url("https://example.com/x/y"))
        #expect(jar.cookies.first?.path == "/x")  // the last, invalid one: the default path
        jar.store(setCookies: ["d=1; Domain=example.com; Domain=other.com"], from: Self.url("https://www.example.com/"))
        #expect(!jar.cookies.contains { $0.name == "d" })
        jar.store(setCookies: ["e=1; Domain=other.com; Domain=example.com"], from: Self.url("https://www.example.com/"))
        #expect(jar.cookies.first { $0.name == "e" }?.domain == "example.com")
    }

    @Test func thePublicSuffixRulesAreThoseOfTheList() {
        for suffix in ["com", "co.uk", "github.io", "jp", "city2.kawasaki.jp", "ck", "foo.ck", "blogspot.com"] {
            #expect(PublicSuffixes.isPublicSuffix(suffix), "\(suffix)")
        }
        for name in ["example.com", "example.co.uk", "kawasaki.jp", "city.kawasaki.jp", "www.ck", "x.github.io", "localhost.localdomain"] {
            #expect(!PublicSuffixes.isPublicSuffix(name), "\(name)")
        }
    }
}
