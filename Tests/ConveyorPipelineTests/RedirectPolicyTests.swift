import ConveyorPipeline
import Foundation
import Testing
import ConveyorTestSupport

/// The one redirect policy, alone: generated redirect chains (methods, statuses, origins, limits,
/// sensitive names) walked through `RedirectPolicy.step`, each hop checked against rules written
/// here independently of the policy's code.
@Suite struct RedirectPolicyTests {
    static let origins = [
        "https://api.test", "https://API.test:443", "http://api.test", "https://api.test:8443", "https://cdn.test",
        "http://127.0.0.1:9",
    ]
    static let methods: [HTTPMethod] = [.get, .head, .post, .put, .patch, .delete]
    static let statuses = [200, 204, 300, 301, 302, 303, 304, 305, 307, 308, 404]
    static let customSecret = "X-Tenant-Secret"

    /// A `Location` value: absolute on some origin, relative, another scheme, or garbage.
    static func location(_ random: inout SplitMix64) -> String? {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: return nil
        case 1: return "ftp://files.test/x"
        case 2: return "/relative/\(Int.random(in: 0..<9, using: &random))"
        case 3: return "next?page=2"
        case 4: return "javascript:alert(1)"
        default: return origins.randomElement(using: &random)! + "/hop/\(Int.random(in: 0..<9, using: &random))"
        }
    }

    /// The request a chain starts with: a random method, credentials of every kind (built in and
    /// added by the client) beside ordinary headers, and a body for methods that have one.
    static func start(_ random: inout SplitMix64, chain: Int) -> HTTPRequest {
        let method = methods.randomElement(using: &random)!
        var request = HTTPRequest(method: method, url: URL(string: origins.randomElement(using: &random)! + "/start")!)
        request.headers["Authorization"] = "Bearer tok-SECRET"
        request.headers["Cookie"] = "session=SECRET"
        request.headers["X-API-Key"] = "key-SECRET"
        request.headers[customSecret] = "tenant-SECRET"
        request.headers["Accept"] = "application/json"
        request.headers["X-Trace"] = "t-1"
        request.sensitiveHeaders = SensitiveHeaders.standard.adding([customSecret])
        // A caller's own Host (a virtual host on this origin) is bound to the origin like a
        // credential. Every other chain has one (not drawn, so the chains stay those of before).
        if chain.isMultiple(of: 2) { request.headers["host"] = "tenant.api.test" }
        if method == .post || method == .put || method == .patch {
            if Bool.random(using: &random) {
                request.body = Data("payload".utf8)
            } else {
                request.bodyStream = try? HTTPBodyStream(parts: [.data(Data("streamed".utf8))])
            }
            request.headers["Content-Type"] = "application/json"
        }
        return request
    }

    static let credentialNames = ["Authorization", "Cookie", "X-API-Key", customSecret, "Host"]

    @Test func generatedChainsKeepEveryRule() throws {
        var random = SplitMix64(state: 0x5EED_2026)
        var followed = 0
        var capped = 0
        var stripped = 0
        for chain in 0..<3_000 {
            let limit = Int.random(in: 0...4, using: &random)
            let policy = RedirectPolicy(maximumRedirects: limit)
            let original = Self.start(&random, chain: chain)
            let originalOrigin = Origin(original.url)
            var hop = original
            var redirects = 0
            var leftOrigin = false  // once credentials are left behind, they never come back
            for _ in 0..<8 {
                let status = Self.statuses.randomElement(using: &random)!
                let location = Self.location(&random)
                let step = policy.step(status: status, location: location, after: hop, redirectsSoFar: redirects)
                let what = "chain \(chain), hop \(redirects): \(hop.method) \(hop.url) -> \(status) \(location ?? "-")"
                // Independent oracle: is this a redirect to follow?
                let isRedirect = [301, 302, 303, 307, 308].contains(status)
                let target = location.flatMap { URL(string: $0, relativeTo: hop.url)?.absoluteURL }
                let followable =
                    isRedirect && target.map { ["http", "https"].contains($0.scheme?.lowercased() ?? "") && $0.host != nil }
                    == true
                guard followable else {
                    #expect(step == .deliver, "\(what)")
                    break
                }
                guard redirects < limit else {
                    #expect(step == .tooManyRedirects, "\(what)")
                    capped += 1
                    break
                }
                guard case .follow(let next) = step else {
                    Issue.record("\(what): expected a hop, got \(step)")
                    break
                }
                followed += 1
                #expect(next.url == target, "\(what)")
                // Methods: 303 makes a GET of anything but HEAD; 301/302 make a GET of a POST only.
                let becomesGET = (status == 303 && hop.method != .head) || ([301, 302].contains(status) && hop.method == .post)
                #expect(next.method == (becomesGET ? .get : hop.method), "\(what)")
                if becomesGET {
                    #expect(next.body == nil && next.bodyStream == nil, "\(what)")
                    #expect(!next.headers.contains("Content-Type"), "\(what)")
                } else {
                    #expect(next.body == hop.body && next.bodyStream == hop.bodyStream, "\(what)")
                }
                // Credentials: only while every hop so far stayed on the original origin.
                if Origin(next.url) != Origin(hop.url) { leftOrigin = true }
                for name in Self.credentialNames {
                    if leftOrigin {
                        #expect(!next.headers.contains(name), "\(what): \(name) went to \(next.url)")
                    } else {
                        #expect(next.headers[name] == original.headers[name], "\(what): \(name) was dropped on one origin")
                    }
                }
                if leftOrigin && Origin(next.url) == originalOrigin {
                    stripped += 1  // back on the first origin: the credentials stay gone
                }
                // Ordinary headers always go on.
                #expect(next.headers["Accept"] == "application/json" && next.headers["X-Trace"] == "t-1", "\(what)")
                hop = next
                redirects += 1
            }
        }
        // The generator reached every branch.
        #expect(followed > 1_000 && capped > 100 && stripped > 10, "followed \(followed), capped \(capped), back \(stripped)")
    }

    @Test func aZeroLimitFollowsNothingAndANegativeOneIsZero() {
        let request = HTTPRequest(url: URL(string: "https://api.test/a")!)
        #expect(RedirectPolicy(maximumRedirects: 0).step(status: 302, location: "/b", after: request, redirectsSoFar: 0) == .tooManyRedirects)
        #expect(RedirectPolicy(maximumRedirects: -3).maximumRedirects == 0)
    }

    @Test func aResponseFromAnotherOriginSetsNoCookie() {
        let policy = RedirectPolicy()
        let headers: HTTPHeaders = ["Set-Cookie": "a=1", "Content-Type": "text/plain"]
        let asked = URL(string: "https://api.test/a")!
        let sameWithPort = URL(string: "https://api.test:443/b")!
        let other = URL(string: "https://cdn.test/b")!
        #expect(policy.delivering(headers, from: sameWithPort, askedFor: asked)["Set-Cookie"] == "a=1")
        #expect(policy.delivering(headers, from: other, askedFor: asked)["Set-Cookie"] == nil)
        #expect(policy.delivering(headers, from: other, askedFor: asked)["Content-Type"] == "text/plain")
    }
}
