import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Every credential that reaches the wire is part of the cache's identity and of
/// de-duplication's: many identities (bearer tokens, cookies, API keys, a credential header no one
/// registered, a query key, none), through one cache and shared in-flight calls, in both orders;
/// no answer ever reaches a request of another identity.
@Suite struct CredentialIdentityTests {
    /// The credential-bearing parts of a request, as the server reads them.
    static func identity(headers: HTTPHeaders, query: String?) -> String {
        var parts: [String] = []
        for name in ["Authorization", "Cookie", "X-API-Key", "X-Tenant-Token"] {
            if let value = headers[name] { parts.append("\(name)=\(value)") }
        }
        if let query, let key = query.split(separator: "&").first(where: { $0.hasPrefix("api_key=") }) {
            parts.append(String(key))
        }
        return parts.isEmpty ? "anonymous" : parts.joined(separator: "|")
    }

    /// One server: answers `private, max-age=60` with the identity it saw, after a few yields so
    /// that calls overlap.
    static func server(hits: Locked<Int>) -> MockTransport {
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .handler { request in
            hits.withLock { $0 += 1 }
            for _ in 0..<Int.random(in: 0...20) { await Task.yield() }
            let who = identity(headers: request.headers, query: request.url.query)
            return .text(who, headers: ["Cache-Control": "private, max-age=60"])
        })
        return mock
    }

    struct Caller: Sendable {
        var headers: HTTPHeaders
        var query: QueryParameters
        var expected: String
    }

    static func caller(_ random: inout SplitMix64) -> Caller {
        var headers = HTTPHeaders()
        var query: QueryParameters = [:]
        func pick(_ values: [String?]) -> String? { values.randomElement(using: &random)! }
        if let token = pick([nil, "alpha", "beta"]) { headers["Authorization"] = "Bearer \(token)" }
        if let cookie = pick([nil, "session=a", "session=b"]) { headers["Cookie"] = cookie }
        if let key = pick([nil, "k1", "k2"]) { headers["X-API-Key"] = key }
        if let tenant = pick([nil, "t1", "t2"]) { headers["X-Tenant-Token"] = tenant }
        if let key = pick([nil, "q1", "q2"]) { query.append("api_key", key) }
        let rendered = query.encoded
        return Caller(headers: headers, query: query, expected: identity(headers: headers, query: rendered.isEmpty ? nil : rendered))
    }

    @Test(arguments: [false, true])
    func noAnswerCrossesIdentities(cacheFirst: Bool) async throws {
        let hits = Locked(0)
        let mock = Self.server(hits: hits)
        let cache = CacheBehavior()
        // Told to ignore the tenant header: a credential counts anyway.
        let dedup = DeduplicationBehavior(ignoring: ["X-Tenant-Token", "X-Request-ID"])
        let client = NetworkClient(baseURL: URL(string: "https://api.example.com/v1")!, transport: mock) {
            if cacheFirst { cache; dedup } else { dedup; cache }
        }
        var random = SplitMix64(state: cacheFirst ? 111 : 222)
        let callers = (0..<600).map { _ in Self.caller(&random) }
        let identities = Set(callers.map(\.expected))
        #expect(identities.count > 100, "the generator should make many identities (\(identities.count))")
        let mismatches = Locked<[String]>([])
        for batch in stride(from: 0, to: callers.count, by: 24) {
            await withTaskGroup(of: Void.self) { group in
                for caller in callers[batch..<min(batch + 24, callers.count)] {
                    group.addTask {
                        do {
                            let body = try await client.send(
                                Request<String>(path: "/me", query: caller.query, headers: caller.headers))
                            if body != caller.expected { mismatches.withLock { $0.append("\(caller.expected) got \(body)") } }
                        } catch {
                            mismatches.withLock { $0.append("\(caller.expected) failed: \(error)") }
                        }
                    }
                }
            }
        }
        #expect(mismatches.withLock { $0 }.isEmpty, "\(mismatches.withLock { $0.prefix(5) })")
        // The cache and the shared calls did work: fewer hits than requests.
        let served = hits.withLock { $0 }
        #expect(served < callers.count, "every request reached the server: nothing was cached or shared")
        #expect(served >= identities.count)
    }

    @Test func credentialHeadersAreKnownByMeaning() {
        for name in ["X-Tenant-Token", "x_goog_api_key", "Session-Id", "X-Signature", "X-CSRF", "X-Client-Secret"] {
            #expect(SensitiveHeaders.standard.contains(name), "\(name)")
        }
        for name in ["Accept", "X-Request-ID", "Idempotency-Key", "X-Api-Version", "Keep-Alive", "ETag"] {
            #expect(!SensitiveHeaders.standard.contains(name), "\(name)")
        }
    }
}
