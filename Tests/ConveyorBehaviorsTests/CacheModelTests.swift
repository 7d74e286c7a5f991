import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Random sequences of requests, server changes and time steps, checked against a small reference
/// model of RFC 9111 freshness and validation written independently of the behavior: for every
/// request, whether the server is contacted, whether the request is conditional, and which body
/// the caller gets.
@Suite struct CacheModelTests {
    /// What the server sends with its representation this step.
    enum Policy: CaseIterable {
        case maxAge(Int), expires(Int), noStore, noCache, validatorOnly, nothing, privateMaxAge(Int)

        static var allCases: [Policy] {
            [.maxAge(0), .maxAge(5), .maxAge(30), .expires(20), .noStore, .noCache, .validatorOnly, .nothing, .privateMaxAge(10)]
        }

        func headers(date: Date) -> HTTPHeaders {
            switch self {
            case .maxAge(let seconds): ["Cache-Control": "max-age=\(seconds)"]
            case .expires(let seconds): ["Date": httpDate(date), "Expires": httpDate(date.addingTimeInterval(Double(seconds)))]
            case .noStore: ["Cache-Control": "no-store"]
            case .noCache: ["Cache-Control": "no-cache"]
            case .validatorOnly, .nothing: [:]
            case .privateMaxAge(let seconds): ["Cache-Control": "private, max-age=\(seconds)"]
            }
        }

        /// The model's reading: lifetime, revalidate-always, may store.
        var lifetime: Double {
            switch self {
            case .maxAge(let s), .expires(let s), .privateMaxAge(let s): Double(s)
            default: 0
            }
        }
        var sendsETag: Bool { if case .nothing = self { false } else { true } }
    }

    /// The server: a version that changes, and the policy of the moment.
    final class Server: Sendable {
        struct State {
            var version = 1
            var policy = Policy.maxAge(5)
        }
        let state = Locked(State())
        let now: FakeNow
        init(now: FakeNow) { self.now = now }

        func reply(to request: HTTPRequest) -> MockTransport.Reply {
            let (version, policy) = state.withLock { ($0.version, $0.policy) }
            var headers = policy.headers(date: now.date)
            let tag = "\"v\(version)\""
            if policy.sendsETag { headers["ETag"] = tag }
            if policy.sendsETag, request.headers["If-None-Match"] == tag { return .status(304, headers: headers) }
            return .text("v\(version)", headers: headers)
        }
    }

    /// The reference: what is stored, its `Cache-Control` and `Expires` as the cache holds them
    /// (a 304's fields replace the stored ones, absent ones are kept), when it was validated.
    struct Model {
        struct Entry {
            var body: String
            var tag: String?
            var validatedAt: Double
            var cacheControl: String?
            var expiresAt: Double?

            func isFresh(at clock: Double) -> Bool {
                if cacheControl?.contains("no-cache") == true { return false }
                if let control = cacheControl, let range = control.range(of: "max-age=") {
                    let maxAge = Double(control[range.upperBound...].prefix { $0.isNumber }) ?? 0
                    return clock - validatedAt < maxAge
                }
                return expiresAt.map { clock < $0 } ?? false
            }
        }
        var entry: Entry?
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func theCacheAgreesWithTheReferenceModel(seed: UInt64) async throws {
        var random = SplitMix64(state: seed)
        let now = FakeNow()
        let start = now.date
        let server = Server(now: now)
        let mock = MockTransport(baseURL: apiURL)
        mock.stub(.get, "/r", reply: .handler { server.reply(to: $0) })
        let log = OutcomeLog()
        let client = cacheClient(mock, now: now, log: log)
        var model = Model()

        for step in 0..<200 {
            switch random.next() % 4 {
            case 0:  // the resource changes
                server.state.withLock { $0.version += 1 }
            case 1:  // the server's policy changes
                let policies = Policy.allCases
                server.state.withLock { $0.policy = policies[Int(random.next() % UInt64(policies.count))] }
            default:
                now.advance(Double(random.next() % 12))
            }
            let clock = now.date.timeIntervalSince(start)
            let (version, policy) = server.state.withLock { ($0.version, $0.policy) }

            // The model's prediction.
            var contacted = true
            var conditional = false
            var body = "v\(version)"
            if let entry = model.entry, entry.isFresh(at: clock) {
                contacted = false
                body = entry.body
            } else if let entry = model.entry {
                conditional = entry.tag != nil
                if conditional, policy.sendsETag, entry.tag == "\"v\(version)\"" {  // 304
                    body = entry.body
                    if case .noStore = policy {
                        model.entry = nil
                    } else {
                        model.entry?.validatedAt = clock
                        let fields = policy.headers(date: now.date)
                        if let control = fields["Cache-Control"] { model.entry?.cacheControl = control }
                        if fields["Expires"] != nil { model.entry?.expiresAt = clock + policy.lifetime }
                    }
                } else {
                    model.entry = Self.stored(policy, version: version, at: clock, now: now.date)
                }
            } else {
                model.entry = Self.stored(policy, version: version, at: clock, now: now.date)
            }

            let before = mock.requests.count
            let response = try await client.send(Request<HTTPResponse>(path: "/r"))
            let sent = mock.requests.count - before
            let context = "seed \(seed) step \(step) policy \(policy)"
            #expect(sent == (contacted ? 1 : 0), "\(context)")
            if contacted, sent == 1 {
                #expect((mock.requests.last?.headers["If-None-Match"] != nil) == conditional, "\(context)")
            }
            #expect(String(decoding: response.body, as: UTF8.self) == body, "\(context)")
            #expect(response.status == 200, "\(context)")
            if sent != (contacted ? 1 : 0) { return }  // one divergence is enough to report
        }
        // The run met every path, so agreeing with the model means something.
        let outcomes = Set(log.all.compactMap { $0 })
        #expect(outcomes == [.hit, .revalidated, .miss], "\(outcomes)")
    }

    static func stored(_ policy: Policy, version: Int, at clock: Double, now: Date) -> Model.Entry? {
        switch policy {
        case .noStore, .nothing: return nil  // not allowed; no lifetime and no validator
        default:
            let fields = policy.headers(date: now)
            return Model.Entry(
                body: "v\(version)", tag: policy.sendsETag ? "\"v\(version)\"" : nil, validatedAt: clock,
                cacheControl: fields["Cache-Control"], expiresAt: fields["Expires"] != nil ? clock + policy.lifetime : nil)
        }
    }
}
