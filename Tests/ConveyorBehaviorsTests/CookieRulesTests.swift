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

    /// Suffixes the list gained after 2023: a cookie for one, set by one customer's host, would
    /// reach every other customer's (issue 56). The list is current, and every one is refused.
    @Test func aSuffixAddedToTheListSince2023IsNoCookieDomain() {
        for suffix in ["ngrok-free.app", "replit.app", "up.railway.app", "azurefd.net", "azure-api.net"] {
            #expect(PublicSuffixes.isPublicSuffix(suffix), "\(suffix)")
            let jar = CookieJar()
            jar.store(setCookies: ["sid=attacker; Domain=\(suffix); Path=/"], from: Self.url("https://attacker.\(suffix)/"))
            #expect(Self.names(jar, "https://victim.\(suffix)/").isEmpty, "\(suffix)")
            // The host that set it may still have a host-only cookie, as for any suffix it is.
            jar.store(setCookies: ["own=1; Path=/"], from: Self.url("https://attacker.\(suffix)/"))
            #expect(Self.names(jar, "https://attacker.\(suffix)/") == ["own"], "\(suffix)")
            #expect(Self.names(jar, "https://victim.\(suffix)/").isEmpty, "\(suffix)")
        }
        // A registrable name under one is a cookie domain for its own subdomains.
        let jar = CookieJar()
        jar.store(setCookies: ["app=1; Domain=shop.ngrok-free.app"], from: Self.url("https://www.shop.ngrok-free.app/"))
        #expect(Self.names(jar, "https://api.shop.ngrok-free.app/") == ["app"])
        #expect(Self.names(jar, "https://other.ngrok-free.app/").isEmpty)
    }

    /// The shipped list is at most 180 days older than the latest release in CHANGELOG.md (a
    /// committed date, not the wall clock: this test gives the same answer every run). Refreshing
    /// it is a step of every release (Docs/Stability.md, "Releasing";
    /// `python3 Scripts/update-public-suffixes.py --check RELEASE-DATE` says the same).
    @Test func theShippedListIsAtMost180DaysOlderThanTheLatestRelease() throws {
        let changelog = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("CHANGELOG.md")
        let text = try String(contentsOf: changelog, encoding: .utf8)
        // `## [1.0.0] - 2026-11-28`: the first such heading is the latest release.
        let release = try #require(
            text.split(separator: "\n").lazy.compactMap { line -> Substring? in
                guard line.hasPrefix("## ["), let dash = line.range(of: "] - ") else { return nil }
                return line[dash.upperBound...].prefix(10)
            }.first)
        let listed = try #require(Self.day(PublicSuffixes.listDate), "listDate \(PublicSuffixes.listDate)")
        let released = try #require(Self.day(release), "release date \(release)")
        let days = released.timeIntervalSince(listed) / 86_400
        #expect(days <= 180, "the list of \(PublicSuffixes.listDate) is \(Int(days)) days older than the release of \(release)")
        #expect(PublicSuffixes.ruleCount > 10_000)
    }

    /// The list's own test cases (publicsuffix.org's `test_psl.txt`, public domain, as PyPI's
    /// `publicsuffixlist` ships it; the ones in A-labels): the registrable domain of each name is
    /// the public suffix that `isPublicSuffix` finds longest plus one label, and no cookie domain
    /// at all (`nil`) for a suffix or a name with a leading dot.
    @Test func theListsOwnTestCasesHold() {
        let cases: [(String, String?)] = [
        ("COM", nil), ("example.COM", "example.com"), ("WwW.example.COM", "example.com"), (".com", nil),
        (".example", nil), (".example.com", nil), (".example.example", nil), ("example", nil),
        ("example.example", "example.example"), ("b.example.example", "example.example"),
        ("a.b.example.example", "example.example"), ("biz", nil), ("domain.biz", "domain.biz"),
        ("b.domain.biz", "domain.biz"), ("a.b.domain.biz", "domain.biz"), ("com", nil),
        ("example.com", "example.com"), ("b.example.com", "example.com"), ("a.b.example.com", "example.com"),
        ("uk.com", nil), ("example.uk.com", "example.uk.com"), ("b.example.uk.com", "example.uk.com"),
        ("a.b.example.uk.com", "example.uk.com"), ("test.ac", "test.ac"), ("mm", nil), ("c.mm", nil),
        ("b.c.mm", "b.c.mm"), ("a.b.c.mm", "b.c.mm"), ("jp", nil), ("test.jp", "test.jp"),
        ("www.test.jp", "test.jp"), ("ac.jp", nil), ("test.ac.jp", "test.ac.jp"),
        ("www.test.ac.jp", "test.ac.jp"), ("kyoto.jp", nil), ("test.kyoto.jp", "test.kyoto.jp"),
        ("ide.kyoto.jp", nil), ("b.ide.kyoto.jp", "b.ide.kyoto.jp"), ("a.b.ide.kyoto.jp", "b.ide.kyoto.jp"),
        ("c.kobe.jp", nil), ("b.c.kobe.jp", "b.c.kobe.jp"), ("a.b.c.kobe.jp", "b.c.kobe.jp"),
        ("city.kobe.jp", "city.kobe.jp"), ("www.city.kobe.jp", "city.kobe.jp"), ("ck", nil), ("test.ck", nil),
        ("b.test.ck", "b.test.ck"), ("a.b.test.ck", "b.test.ck"), ("www.ck", "www.ck"),
        ("www.www.ck", "www.ck"), ("us", nil), ("test.us", "test.us"), ("www.test.us", "test.us"),
        ("ak.us", nil), ("test.ak.us", "test.ak.us"), ("www.test.ak.us", "test.ak.us"), ("k12.ak.us", nil),
        ("test.k12.ak.us", "test.k12.ak.us"), ("www.test.k12.ak.us", "test.k12.ak.us"),
        ("xn--85x722f.com.cn", "xn--85x722f.com.cn"),
        ("xn--85x722f.xn--55qx5d.cn", "xn--85x722f.xn--55qx5d.cn"),
        ("www.xn--85x722f.xn--55qx5d.cn", "xn--85x722f.xn--55qx5d.cn"),
        ("shishi.xn--55qx5d.cn", "shishi.xn--55qx5d.cn"), ("xn--55qx5d.cn", nil),
        ("xn--85x722f.xn--fiqs8s", "xn--85x722f.xn--fiqs8s"),
        ("www.xn--85x722f.xn--fiqs8s", "xn--85x722f.xn--fiqs8s"), ("shishi.xn--fiqs8s", "shishi.xn--fiqs8s"),
        ("xn--fiqs8s", nil),
        ]
        for (name, expected) in cases {
            #expect(Self.registrableDomain(name) == expected, "\(name)")
        }
    }

    /// Under an exception rule the host's suffix is the rule's parent (`kobe.jp` for
    /// `x.city.kobe.jp`), though that name alone is no rule: a cookie for it would reach every
    /// `*.kobe.jp` registrant, and is refused.
    @Test func aCookieForTheParentOfAnExceptionRuleIsRefused() {
        let jar = CookieJar()
        jar.store(setCookies: ["wide=1; Domain=kobe.jp"], from: Self.url("https://www.city.kobe.jp/"))
        jar.store(setCookies: ["wide2=1; Domain=kobe.jp"], from: Self.url("https://evil.c.kobe.jp/"))
        #expect(Self.names(jar, "https://victim.d.kobe.jp/").isEmpty)
        #expect(Self.names(jar, "https://kobe.jp/").isEmpty)
        jar.store(setCookies: ["city=1; Domain=city.kobe.jp"], from: Self.url("https://www.city.kobe.jp/"))
        #expect(Self.names(jar, "https://x.city.kobe.jp/") == ["city"])
    }

    /// The public suffix of a name plus one label, or `nil` when the name is a suffix itself.
    static func registrableDomain(_ name: String) -> String? {
        let lowered = name.lowercased()
        guard !lowered.hasPrefix(".") else { return nil }
        let labels = lowered.split(separator: ".", omittingEmptySubsequences: false)
        let suffixLength = PublicSuffixes.suffixLabelCount(of: lowered)
        guard suffixLength < labels.count else { return nil }
        return labels.suffix(suffixLength + 1).joined(separator: ".")
    }

    /// `YYYY-MM-DD` as midnight UTC.
    static func day(_ text: some StringProtocol) -> Date? {
        let parts = text.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3, text.count == 10 else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2]))
    }

    @Test func thePublicSuffixRulesAreThoseOfTheList() {
        for suffix in ["com", "co.uk", "github.io", "jp", "city2.kawasaki.jp", "ck", "foo.ck", "blogspot.com",
            "xn--p1ai", "xn--80ao21a", "s3.amazonaws.com", "herokuapp.com", "appspot.com", "vercel.app", "pages.dev"]
        {
            #expect(PublicSuffixes.isPublicSuffix(suffix), "\(suffix)")
        }
        for name in ["example.com", "example.co.uk", "kawasaki.jp", "city.kawasaki.jp", "www.ck", "x.github.io", "localhost.localdomain"] {
            #expect(!PublicSuffixes.isPublicSuffix(name), "\(name)")
        }
    }
}
