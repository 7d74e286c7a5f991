import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@testable import Conveyor

// Differential test of the client's URL cache (Sources/Client/PathURLCache.swift, used by
// `URLBuilder.url(base:baseProblem:path:absolute:query:cache:)`).
//
// The claim attacked: a URL served from the cache is exactly the URL that building would make
// (same `absoluteString`, equal `URL`), and anything building rejects is never served from it.
// Each scenario makes one client on a random base URL and asks it for many generated
// (path, query) pairs in a random order with repeats, so its cache both hits and misses and,
// in the larger scenarios, goes past `PathURLCache.capacity` distinct keys and starts over. Every
// answer is compared with the one a fresh client on the same base URL gives (a fresh client has
// an empty cache, so it always builds): the same URL, or the same `NetworkError`.
//
// Replay one scenario: CONVEYOR_URLCACHE_SEED=<seed> CONVEYOR_URLCACHE_COUNT=1 swift test --filter URLCacheDifferentialTests

/// One client's base URL and the requests made on it, in order.
struct URLCacheScenario: CustomStringConvertible {
    let seed: UInt64
    let baseURL: URL
    let requests: [(path: String, query: QueryParameters)]
    /// Distinct (path, query) pairs the requests are drawn from.
    let distinct: Int

    /// Pieces of paths, query names and values: reserved characters, escapes valid and not,
    /// canonically equivalent spellings, emoji, controls, dot segments.
    static let atoms: [String] = [
        "a", "movies", "123", "v2", "?", "#", "%", "&", "=", "+", ";", ":", "@", "/", " ", "%2F", "%2f", "%zz", "%2",
        "%25", "%2e", "%2E%2e", "%%", ".", "..", "...", "caf\u{E9}", "cafe\u{301}", "\u{212B}", "\u{C5}", "A\u{30A}",
        "\u{1E9B}\u{323}", "\u{1E69}", "s\u{323}\u{307}", "👍🏽", "👍", "🇨🇭", "日本語", "שלום", "\u{200B}", "\t", "\n",
        "\u{7F}", "\u{0}", "~", "!", "$", "'", "(", ")", "*", ",", "[", "]", "{", "}", "|", "\\", "^", "`", "\"", "<",
        ">", "?a=b", "?x", "#top", "http:", "//", "%C3%A9", "%E9", "%F0%9F%91%8D",
    ]

    init(seed: UInt64) {
        self.seed = seed
        var rng = SplitMix64(state: seed)
        func pick<T>(_ values: [T]) -> T { values.randomElement(using: &rng)! }

        // The base URL: usually valid; sometimes one the client refuses (every relative path then
        // fails with the same reason, and nothing may be cached).
        let refused = Int.random(in: 0..<8, using: &rng) == 0
        var base: URL?
        while base == nil {
            let scheme = refused && Bool.random(using: &rng) ? "ftp" : pick(["http", "https", "HTTPS"])
            let host = pick(["127.0.0.1", "localhost", "api.example.test", "my-host", "xn--caf-dma.test", "[::1]"])
            let port = pick(["", "", ":8080", ":1", ":65535", ":80"])
            let path = pick([
                "", "", "/", "/api", "/api/v1/", "/api/v1//", "/a%20b", "/caf%C3%A9", "/café", "/api//v2", "/~user/",
                "/%zz", "/日本", "/a;b=c", "/@x",
            ])
            let tail = refused ? pick(["", "?k=v", "#frag", "?"]) : ""
            base = URL(string: "\(scheme)://\(host)\(port)\(path)\(tail)")
        }
        baseURL = base!

        func segment() -> String {
            if Int.random(in: 0..<40, using: &rng) == 0 {  // a very long segment
                return String(repeating: pick(["x", "é", "%41", "a b", "👍"]), count: Int.random(in: 100...1500, using: &rng))
            }
            return (0..<Int.random(in: 1...3, using: &rng)).map { _ in pick(Self.atoms) }.joined()
        }
        func path() -> String {
            switch Int.random(in: 0..<20, using: &rng) {
            case 0: return ""
            case 1: return pick([".", "..", "/.", "/..", "/a/./b", "/a/../b", "./a", "a/..", "/%2e%2E/x", "/.%2e/"])
            case 2:
                // Absolute URLs (never cached), and things that look like them but are not.
                let prefix = pick([
                    "http://127.0.0.1:9", "https://other.test", "http://localhost:8080/x", "http://", "https://",
                    "HTTP://upper.test", "http:/one-slash", "https://user@h.test", "http://[::1]:9",
                ])
                return prefix + (Bool.random(using: &rng) ? "" : "/" + segment())
            default:
                let lead = pick(["/", "/", "/", "", "//"])
                let separator = pick(["/", "/", "/", "//"])
                let body = (0..<Int.random(in: 0...4, using: &rng)).map { _ in segment() }.joined(separator: separator)
                let trail = pick(["", "", "", "/", "//"])
                return lead + body + trail
            }
        }
        func query() -> QueryParameters {
            let count = pick([0, 0, 0, 1, 1, 2, 3])
            return QueryParameters(
                (0..<count).map { _ in
                    func text() -> String {
                        (0..<Int.random(in: 0...2, using: &rng)).map { _ in pick(Self.atoms) }.joined()
                    }
                    return QueryParameters.Item(name: text(), value: text())
                })
        }

        // Small pools hit a lot; large ones go past the capacity and make the cache start over
        // (every pair of a large pool is asked for at least once, below: picking at random
        // reached only about 60 % of them, a fifth are rejected, and the cache filled up
        // without a single restart in one run of sixty scenarios out of five).
        let large = Int.random(in: 0..<2, using: &rng) == 0
        let poolSize =
            large
            ? Int.random(in: PathURLCache.capacity + 1...PathURLCache.capacity * 2, using: &rng)
            : Bool.random(using: &rng) ? Int.random(in: 3...40, using: &rng) : Int.random(in: 40...200, using: &rng)
        var pool: [(path: String, query: QueryParameters)] = []
        while pool.count < poolSize {
            switch Int.random(in: 0..<12, using: &rng) {
            case 0 where !pool.isEmpty:
                // The same path with another query, or the same query on another path.
                var variant = pick(pool)
                if Bool.random(using: &rng) { variant.query = query() } else { variant.path = path() }
                pool.append(variant)
            case 1:
                // Canonically equivalent twins: equal `String`s, different bytes, different URLs.
                let twins = pick([("caf\u{E9}", "cafe\u{301}"), ("\u{C5}", "A\u{30A}"), ("\u{212B}", "\u{C5}"), ("\u{1E69}", "s\u{323}\u{307}")])
                let prefix = "/" + segment() + "/"
                let q = query()
                pool.append((prefix + twins.0, q))
                pool.append((prefix + twins.1, q))
                // … and in the query.
                pool.append(("/q", QueryParameters([.init(name: "k", value: twins.0)])))
                pool.append(("/q", QueryParameters([.init(name: "k", value: twins.1)])))
            case 2:
                // A family of keys of one length that differ only at the end (`…/page/10000`,
                // `…/page/10001`, or one path with `page=10000`, …), as apps make: a key comparison
                // that stops early, or skips the query, confuses them.
                let prefix = "/" + pick(["movies/popular/page", "api/v1/users/by-id", "caf\u{E9}/caf\u{E9}/items"]) + "/"
                let inQuery = Bool.random(using: &rng)
                for number in 0..<Int.random(in: 10...min(60, max(10, poolSize - pool.count)), using: &rng) {
                    let digits = String(number + 10_000)  // five digits
                    pool.append(
                        inQuery ? (prefix + "list", QueryParameters([.init(name: "page", value: digits)])) : (prefix + digits, [:]))
                }
            default:
                pool.append((path(), query()))
            }
        }
        distinct = pool.count

        let hot = Array(pool.prefix(8))
        let length = pool.count * Int.random(in: large ? 1...2 : 2...3, using: &rng)
        var requests: [(path: String, query: QueryParameters)] = []
        for _ in 0..<length {
            var next = Int.random(in: 0..<10, using: &rng) < 4 ? pick(hot) : pick(pool)
            // The same bytes in a string made another way (small or large, literal or decoded).
            if Int.random(in: 0..<8, using: &rng) == 0 {
                next.path = String(decoding: Array(next.path.utf8), as: UTF8.self)
            }
            requests.append(next)
        }
        if large {
            requests += pool
            requests.shuffle(using: &rng)
        }
        self.requests = requests
    }

    var description: String {
        "scenario \(seed): base \(baseURL.absoluteString), \(requests.count) requests over \(distinct) pairs"
    }
}

/// What building gave: a URL, or the error it was rejected with.
enum BuiltURL: Equatable, CustomStringConvertible {
    case url(URL)
    case rejected(caseName: String, description: String)

    init(_ build: () throws(NetworkError) -> URL) {
        do {
            self = .url(try build())
        } catch {
            self = .rejected(caseName: error.name, description: error.description)
        }
    }

    /// Equal `URL`s whose `absoluteString`s have the same bytes (not just canonically equivalent
    /// text), or the same error.
    static func == (lhs: BuiltURL, rhs: BuiltURL) -> Bool {
        switch (lhs, rhs) {
        case (.url(let a), .url(let b)): a.absoluteString.utf8.elementsEqual(b.absoluteString.utf8) && a == b
        case (.rejected(let a, let x), .rejected(let b, let y)): a == b && x == y
        default: false
        }
    }

    var description: String {
        switch self {
        case .url(let url): "URL \(url.absoluteString.debugDescription)"
        case .rejected(let caseName, let description): "\(caseName): \(description)"
        }
    }
}

/// The scalars of a string, for messages (`"cafe\u{301}"` and `"caf\u{E9}"` print alike).
func scalarsOf(_ string: String) -> String {
    string.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? String($0) : "\\u{\(String($0.value, radix: 16))}" }
        .joined()
}

@Suite struct URLCacheDifferentialTests {
    static let count = ProcessInfo.processInfo.environment["CONVEYOR_URLCACHE_COUNT"].flatMap(Int.init) ?? 60
    static let baseSeed =
        ProcessInfo.processInfo.environment["CONVEYOR_URLCACHE_SEED"].flatMap(UInt64.init)
        ?? UInt64.random(in: 1...UInt64.max / 2)

    /// What the scenarios covered, so a generator that stopped reaching a case is noticed.
    struct Coverage {
        var requests = 0
        var hits = 0
        var builtAndStored = 0
        var rejected = 0
        var absolute = 0
        /// Times a client's cache was full and started over.
        var restarts = 0
    }

    @Test func aCachedURLIsTheURLBuildingMakes() {
        var failures = 0
        var coverage = Coverage()
        for offset in 0..<Self.count {
            let scenario = URLCacheScenario(seed: Self.baseSeed &+ UInt64(offset))
            let problems = check(scenario, coverage: &coverage)
            if !problems.isEmpty {
                failures += 1
                Issue.record(
                    """
                    The cache disagreed with building — replay with CONVEYOR_URLCACHE_SEED=\(scenario.seed) \
                    CONVEYOR_URLCACHE_COUNT=1
                    \(scenario)
                    \(problems.joined(separator: "\n"))
                    """)
                if failures >= 3 { break }
            }
        }
        #expect(failures == 0)
        if Self.count >= 20 && failures == 0 {
            #expect(coverage.hits > 1000 && coverage.builtAndStored > 1000, "\(coverage)")
            #expect(coverage.rejected > 0 && coverage.absolute > 0 && coverage.restarts > 0, "\(coverage)")
        }
    }

    /// Asks one client for every request of the scenario and compares each answer with a fresh
    /// client's; returns what differed.
    func check(_ scenario: URLCacheScenario, coverage: inout Coverage) -> [String] {
        let transport = MockTransport()
        let client = NetworkClient(baseURL: scenario.baseURL, transport: transport)
        var problems: [String] = []
        for (index, (path, query)) in scenario.requests.enumerated() {
            let request = Request<Data>(path: path, query: query)
            let key = PathURLCache.Key(path: path, query: query.isEmpty ? "" : query.encoded)
            let absolute = URLBuilder.isAbsolute(path)
            let wasCached = client.urlCache.url(for: key) != nil
            let countBefore = client.urlCache.count

            let cached = BuiltURL { () throws(NetworkError) in try client.makeHTTPRequest(request).url }
            let fresh = BuiltURL { () throws(NetworkError) in
                try NetworkClient(baseURL: scenario.baseURL, transport: transport).makeHTTPRequest(request).url
            }

            var differences: [String] = []
            if cached != fresh {
                differences.append("\(wasCached ? "cache hit" : "cache miss"): \(cached), building makes \(fresh)")
            }
            let stored = client.urlCache.url(for: key)
            switch fresh {
            case .url(let url) where !absolute:
                // What is kept is what building makes.
                if let stored, !stored.absoluteString.utf8.elementsEqual(url.absoluteString.utf8) || stored != url {
                    differences.append("the cache keeps \(stored.absoluteString.debugDescription) for it")
                }
                if stored == nil { differences.append("a relative URL that was built is not in the cache") }
            case .rejected where stored != nil:
                differences.append("rejected by building, yet the cache holds \(stored!.absoluteString.debugDescription)")
            default:
                break
            }
            if client.urlCache.count > PathURLCache.capacity {
                differences.append("the cache holds \(client.urlCache.count) entries")
            }
            if !differences.isEmpty {
                let queryText = query.items.map { "(\(scalarsOf($0.name).debugDescription), \(scalarsOf($0.value).debugDescription))" }
                problems.append(
                    "request \(index): path \(scalarsOf(path).debugDescription) query [\(queryText.joined(separator: ", "))]")
                problems += differences.map { "  " + $0 }
                if problems.count > 12 { break }
            }

            coverage.requests += 1
            if absolute { coverage.absolute += 1 }
            if wasCached { coverage.hits += 1 }
            if case .rejected = fresh { coverage.rejected += 1 }
            if !wasCached, !absolute, case .url = fresh {
                coverage.builtAndStored += 1
                if client.urlCache.count <= countBefore { coverage.restarts += 1 }
            }
        }
        return problems
    }

    /// Hard cases, one after the other on one client: each answer must be the fresh one.
    @Test(arguments: [
        "http://127.0.0.1:8080/api/v1", "https://localhost/", "http://my-host", "https://h.test:1/caf%C3%A9/",
    ])
    func hardCasesOnOneClient(base: String) throws {
        let baseURL = try #require(URL(string: base))
        let transport = MockTransport()
        let client = NetworkClient(baseURL: baseURL, transport: transport)
        func both(_ path: String, _ query: QueryParameters = [:]) -> (cached: BuiltURL, fresh: BuiltURL) {
            let request = Request<Data>(path: path, query: query)
            return (
                BuiltURL { () throws(NetworkError) in try client.makeHTTPRequest(request).url },
                BuiltURL { () throws(NetworkError) in
                    try NetworkClient(baseURL: baseURL, transport: transport).makeHTTPRequest(request).url
                }
            )
        }
        func expectSame(_ path: String, _ query: QueryParameters = [:], sourceLocation: SourceLocation = #_sourceLocation)
            -> BuiltURL
        {
            let (cached, fresh) = both(path, query)
            #expect(cached == fresh, "path \(scalarsOf(path).debugDescription)", sourceLocation: sourceLocation)
            return cached
        }

        // Canonically equivalent pairs, asked one right after the other (and again): equal as
        // `String`s, but each must keep its own bytes' encoding.
        let pairs = [("caf\u{E9}", "cafe\u{301}"), ("\u{C5}", "A\u{30A}"), ("\u{212B}", "\u{C5}"), ("\u{1E69}", "s\u{323}\u{307}")]
        for (one, other) in pairs {
            #expect(one == other)  // the trap: `String` equality is canonical equivalence
            for _ in 0..<2 {
                let first = expectSame("/" + one)
                let second = expectSame("/" + other)
                #expect(first != second, "\(scalarsOf(one)) and \(scalarsOf(other)) must not share a URL")
                let inQuery = expectSame("/q", QueryParameters([.init(name: one, value: one)]))
                let inQueryOther = expectSame("/q", QueryParameters([.init(name: other, value: other)]))
                #expect(inQuery != inQueryOther)
            }
        }

        // Rejected before and after an accepted neighbour; absolute URLs with dot segments.
        for path in ["/a/../b", "/a/%2e%2E/b", "..", "/.", "/a/.", "/a/b/..?x=1", "/a/../b", "/a/b", "/a/..b", "/a/b.."] {
            _ = expectSame(path)
            _ = expectSame(path)
        }
        for path in ["http://127.0.0.1:9/a/../b", "http://", "https://x.test?q=1", "http:/x", "HTTP://x.test/a"] {
            _ = expectSame(path, ["p": "1"])
            _ = expectSame(path, ["p": "1"])
        }

        // A path with its own query, the same with parameters, and parameters alone.
        for _ in 0..<2 {
            _ = expectSame("/m?sort=desc")
            _ = expectSame("/m?sort=desc", ["page": 2])
            _ = expectSame("/m", ["sort": "desc"])
            _ = expectSame("/m?", [:])
            _ = expectSame("/m", QueryParameters([.init(name: "", value: "")]))
            _ = expectSame("/m#frag", ["a": "b"])
            _ = expectSame("/m%zz%", ["%zz": "%"])
        }

        // Keys of one length that differ only in their last bytes, in the path or in the query.
        for number in 0..<200 {
            _ = expectSame("/movies/popular/page/\(number + 10_000)")
            _ = expectSame("/movies/popular/list", ["page": "\(number + 10_000)"])
        }

        // Past the capacity, then the first paths again (the cache started over in between).
        let many = (0..<(PathURLCache.capacity + 40)).map { "/items/\($0)/caf\u{E9}" }
        for path in many { _ = expectSame(path) }
        for path in many.prefix(50) { _ = expectSame(path) }
        for id in 0..<50 { _ = expectSame("/items/\(id)/cafe\u{301}") }
        #expect(client.urlCache.count <= PathURLCache.capacity)
    }
}
