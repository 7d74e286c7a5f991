import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import Foundation
import Testing

/// RFC 6265 §5 as the jar keeps it: scoping, expiry, bounds, and a generated comparison with a
/// reference model of the matching rules.
@Suite struct CookieJarTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    final class Clock: Sendable {
        let time = Locked(CookieJarTests.start)
        func advance(_ seconds: TimeInterval) { time.withLock { $0 += seconds } }
    }

    static func jar(_ clock: Clock = Clock()) -> CookieJar { CookieJar(now: { clock.time.withLock { $0 } }) }
    static func url(_ text: String) -> URL { URL(string: text)! }

    @Test func scopingFollowsRFC6265() {
        let jar = Self.jar()
        let origin = Self.url("https://api.example.com/v1/login")
        jar.store(
            setCookies: [
                "host=1", "wide=2; Domain=.example.com", "foreign=3; Domain=other.com", "tld=4; Domain=com",
                "deep=5; Path=/v1/users", "secure=6; Secure", "bad=7; Path=relative",
            ], from: origin)
        func names(_ url: String) -> Set<String> { Set(jar.cookies(for: Self.url(url)).map(\.name)) }
        #expect(names("https://api.example.com/v1/me") == ["host", "wide", "secure", "bad"])
        #expect(names("https://cdn.example.com/v1/me") == ["wide"])  // host-only stays on its host
        #expect(names("https://api.example.com/v1/users/7") == ["host", "wide", "deep", "secure", "bad"])
        #expect(names("https://api.example.com/v1/usersx") == ["host", "wide", "secure", "bad"])
        #expect(names("http://api.example.com/v1/me") == ["host", "wide", "bad"])  // Secure only over HTTPS
        #expect(names("https://other.com/") == [])
        #expect(names("https://example.com/v1") == ["wide"])
        // Without a Path attribute, every cookie's path is the login's directory, /v1.
        #expect(names("https://api.example.com/v2") == [])
    }

    @Test func aSecureCookieIsOnlySetOverHTTPSAndLongerPathsComeFirst() {
        let jar = Self.jar()
        jar.store(setCookies: ["s=1; Secure"], from: Self.url("http://api.example.com/"))
        #expect(jar.cookies.isEmpty)
        jar.store(setCookies: ["a=root; Path=/", "a=deep; Path=/v1/x"], from: Self.url("https://api.example.com/"))
        #expect(jar.header(for: Self.url("https://api.example.com/v1/x/y")) == "a=deep; a=root")
    }

    @Test func expiryReplacementAndDeletion() {
        let clock = Clock()
        let jar = Self.jar(clock)
        let origin = Self.url("https://api.example.com/")
        jar.store(setCookies: ["a=1; Max-Age=60; Expires=Thu, 01 Jan 1970 00:00:00 GMT"], from: origin)  // Max-Age wins
        jar.store(setCookies: ["b=1; Expires=Wed, 21 Oct 2099 07:28:00 GMT, c=2; Path=/"], from: origin)  // joined
        #expect(Set(jar.cookies.map(\.name)) == ["a", "b", "c"])
        clock.advance(61)
        #expect(Set(jar.cookies.map(\.name)) == ["b", "c"])
        jar.store(setCookies: ["b=gone; Max-Age=0"], from: origin)
        jar.store(setCookies: ["c=old; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"], from: origin)
        #expect(jar.cookies.isEmpty)
    }

    @Test func theJarIsBoundedAndRefusesHostileCookies() {
        let jar = Self.jar()
        let origin = Self.url("https://api.example.com/")
        for index in 0..<200 { jar.store(setCookies: ["n\(index)=v"], from: origin) }
        #expect(jar.cookies.count == CookieJar.maximumPerDomain)
        #expect(jar.cookies.contains { $0.name == "n199" } && !jar.cookies.contains { $0.name == "n0" })
        jar.removeAll()
        jar.store(
            setCookies: [
                "big=" + String(repeating: "x", count: 5000), "=noname", "novalue", "ctl=a\u{01}b", "ok=1",
            ], from: origin)
        #expect(jar.cookies.map(\.name) == ["ok"])
        #expect(!"\(jar.cookies)".contains("=1"))  // descriptions never show a value
    }

    @Test func anIPAddressHostTakesNoDomainCookies() {
        let jar = Self.jar()
        jar.store(setCookies: ["a=1; Domain=0.0.1", "b=2"], from: Self.url("http://127.0.0.1:8080/"))
        #expect(jar.cookies.map(\.name) == ["b"])
        #expect(jar.header(for: Self.url("http://127.0.0.1:9090/x")) == "b=2")  // cookies ignore ports (RFC 6265 §8.5)
    }

    /// Random cookies and requests against a reference of §5.1.3/§5.1.4 and Secure.
    @Test func generatedRequestsGetExactlyTheCookiesTheReferenceAllows() {
        var random = SplitMix64(state: 6265)
        let hosts = ["example.com", "api.example.com", "a.api.example.com", "example.org"]
        let paths = ["/", "/v1", "/v1/", "/v1/users", "/v10", "/v1/users/7"]
        for _ in 0..<300 {
            let jar = Self.jar()
            var model: [(name: String, domain: String, hostOnly: Bool, path: String, secure: Bool)] = []
            for index in 0..<6 {
                let host = hosts.randomElement(using: &random)!
                let https = Bool.random(using: &random)
                let path = paths.randomElement(using: &random)!
                let name = "c\(index)"
                var line = "\(name)=v"
                let domain: String? = Bool.random(using: &random) ? hosts.randomElement(using: &random) : nil
                if let domain { line += "; Domain=\(domain)" }
                let cookiePath = Bool.random(using: &random) ? paths.randomElement(using: &random)! : nil
                if let cookiePath { line += "; Path=\(cookiePath)" }
                let secure = Bool.random(using: &random)
                if secure { line += "; Secure" }
                jar.store(setCookies: [line], from: Self.url("\(https ? "https" : "http")://\(host)\(path)"))
                // The reference: when the cookie is accepted, and with which scope.
                if secure && !https { continue }
                if let domain, domain != host, !host.hasSuffix("." + domain) { continue }
                let defaultPath = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "/"
                model.removeAll { $0.name == name }
                model.append((name, domain ?? host, domain == nil, cookiePath ?? defaultPath, secure))
            }
            for _ in 0..<6 {
                let host = hosts.randomElement(using: &random)!
                let https = Bool.random(using: &random)
                let path = paths.randomElement(using: &random)!
                let got = Set(jar.cookies(for: Self.url("\(https ? "https" : "http")://\(host)\(path)")).map(\.name))
                let expected = Set(model.filter { cookie in
                    let domainOK = cookie.hostOnly ? host == cookie.domain : host == cookie.domain || host.hasSuffix("." + cookie.domain)
                    let pathOK = path == cookie.path
                        || (path.hasPrefix(cookie.path) && (cookie.path.hasSuffix("/") || path.dropFirst(cookie.path.count).first == "/"))
                    return domainOK && pathOK && (!cookie.secure || https)
                }.map(\.name))
                #expect(got == expected, "\(host)\(path) https \(https)")
            }
        }
    }
}
