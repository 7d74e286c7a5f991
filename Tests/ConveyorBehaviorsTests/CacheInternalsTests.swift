import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@testable import ConveyorBehaviors

/// The cache's own parsers and digests, attacked with generated input.
@Suite struct CacheInternalsTests {
    @Test func sha256MatchesKnownDigests() {
        let vectors: [([UInt8], String)] = [
            ([], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            (Array("abc".utf8), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8),
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            (Array(repeating: UInt8(ascii: "a"), count: 1_000), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"),
            (Array((0...255).map { UInt8($0) }) + Array((0...255).map { UInt8($0) }) + Array((0...255).map { UInt8($0) }),
                "f3a25aa93aa2fbba28d79260535bbd6a5eb0fc1c24a8b0f04e12b484c1dfe363"),
        ]
        for (message, expected) in vectors {
            let hex = SHA256.digest(message).map { String(format: "%02x", $0) }.joined()
            #expect(hex == expected, "\(message.count) bytes")
        }
        #expect(SHA256.hex("abc") == vectors[1].1)
    }

    @Test func theHTTPDateParserAgreesWithDateFormatterOnGeneratedDates() {
        var random = SplitMix64(state: 42)
        for _ in 0..<2_000 {
            let date = Date(timeIntervalSince1970: Double(random.next() % 8_000_000_000) - 2_000_000_000)
            let text = httpDate(date)
            #expect(HTTPDate.parse(text) == date, "\(text)")
        }
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"))
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"))
        for bad in ["0", "-1", "", "Sun, 06 Nov 1994 08:49:37 XYZ", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:49:37 GMT"]
        {
            #expect(HTTPDate.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func cacheControlReadsDirectivesInAnyCaseSpacingAndQuoting() {
        let control = CacheControl(parsing: #"  Max-Age = "120" , no-cache="Set-Cookie, X-A",PRIVATE,must-revalidate"#)
        #expect(control.maxAge == 120 && control.noCache && control.isPrivate && control.mustRevalidate)
        let plain = CacheControl(parsing: #"Max-Age="120", no-cache="Set-Cookie, X-A",PRIVATE, must-revalidate, s-maxage=5"#)
        #expect(plain.maxAge == 120 && plain.noCache && plain.isPrivate && plain.mustRevalidate && plain.sharedMaxAge == 5)
        #expect(CacheControl(parsing: "max-age=soon").maxAge == 0)  // invalid: stale
        #expect(CacheControl(parsing: "max-age=99999999999999999999999").maxAge == CacheControl.maximumDelta)
        #expect(CacheControl(parsing: "max-age=60, max-age=10").maxAge == 10)
        #expect(CacheControl(["Cache-Control": "max-age=5", "cache-control": "no-store"]).noStore)
    }

    @Test func generatedCacheControlAndHeaderValuesNeverCrashAndGiveSaneLifetimes() {
        var random = SplitMix64(state: 9)
        let pieces = ["max-age", "=", "\"", ",", " ", "no-store", "no-cache", "private", "public", "-1", "0", "60",
            "99999999999999999999", "s-maxage", "must-revalidate", "é", "\t", "min-fresh", "only-if-cached", ";"]
        for _ in 0..<5_000 {
            let value = (0..<Int(random.next() % 12)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
            let control = CacheControl(parsing: value)
            #expect((control.maxAge ?? 0) >= 0 && (control.maxAge ?? 0) <= CacheControl.maximumDelta)
            let headers: HTTPHeaders = [
                "Cache-Control": value, "Expires": value, "Date": value, "Age": value, "Vary": value,
            ]
            let entry = CachedResponse(status: 200, headers: headers, body: Data(), receivedAt: Date())
            #expect(entry.freshnessLifetime >= 0 && entry.freshnessLifetime.isFinite)
            #expect(entry.age(at: Date()) >= 0)
        }
    }

    /// `freshUntil` is what a storage uses to drop entries (PostgresCacheStorage's expiry): it must
    /// say exactly what the cache itself decides, for generated headers and ages.
    @Test func freshUntilAgreesWithTheCachesOwnFreshnessForGeneratedEntries() {
        var random = SplitMix64(state: 51)
        let controls = ["max-age=0", "max-age=1", "max-age=60", "max-age=3600, no-cache", "no-cache", "", "public",
            "max-age=99999999999999999999", "public, max-age=600, s-maxage=5", "max-age=5, s-maxage=600",
            "max-age=3600, s-maxage=0", "s-maxage=30", "s-maxage=60, private, max-age=1"]
        // Who fetched an entry, and who asks: the fetcher, another credential, no credential.
        let identities = ["", "digest-a", "*", "*:", "*:digest-a"]
        let base = Date(timeIntervalSince1970: 1_800_000_000)
        let cache = CacheBehavior()
        for _ in 0..<3_000 {
            var headers: HTTPHeaders = ["Cache-Control": controls[Int(random.next() % UInt64(controls.count))]]
            if random.next() % 3 == 0 { headers["Age"] = String(random.next() % 120) }
            if random.next() % 3 == 0 { headers["Date"] = HTTPDate.format(base.addingTimeInterval(-Double(random.next() % 90))) }
            if random.next() % 4 == 0 { headers["Expires"] = HTTPDate.format(base.addingTimeInterval(Double(random.next() % 200))) }
            let sent = base.addingTimeInterval(-Double(random.next() % 5))
            let entry = CachedResponse(
                status: 200, headers: headers, body: Data(), requestTime: sent, responseTime: base, varyValues: [],
                credentials: identities[Int(random.next() % UInt64(identities.count))])
            for offset in [-1.0, 0, 0.5, 1, 4.9, 5, 30, 59.5, 60, 61, 599, 601, 3_599, 3_601, 1e9] {
                let now = base.addingTimeInterval(offset)
                // Fresh for some request that may use it: the one that fetched it, or another.
                let fresh = ["", "digest-a", "digest-b"].contains { requester in
                    entry.matches([:], credentials: requester) && cache.isFreshForTesting(entry, at: now, requester: requester)
                }
                // Within a microsecond of the boundary the two computations may round apart.
                if abs(now.timeIntervalSince(entry.freshUntil)) > 1e-6 {
                    #expect(fresh == (now < entry.freshUntil), "\(headers) at +\(offset)")
                }
            }
        }
    }

    /// An entry written as `*` before 1.1 does not say who fetched it: every request, one with no
    /// credential too, reuses it by its `s-maxage`. One written as `*:` and a digest gives that
    /// digest its `max-age`, and it keeps its identity through the byte format.
    @Test func aSharedEntryOfAnUnknownFetcherIsReusedByTheSharedRulesOnly() throws {
        let base = Date(timeIntervalSince1970: 1_800_000_000)
        let cache = CacheBehavior()
        func entry(_ identity: String) -> CachedResponse {
            CachedResponse(
                status: 200, headers: ["Cache-Control": "public, max-age=600, s-maxage=5"], body: Data(),
                requestTime: base, responseTime: base, varyValues: [], credentials: identity)
        }
        let legacy = entry("*")
        for requester in ["", "digest-a"] {
            #expect(cache.isFreshForTesting(legacy, at: base.addingTimeInterval(4), requester: requester))
            #expect(!cache.isFreshForTesting(legacy, at: base.addingTimeInterval(60), requester: requester))
        }
        #expect(legacy.freshUntil == base.addingTimeInterval(5))
        let current = try #require(CachedResponse(encoded: entry("*:digest-a").encoded()))
        #expect(cache.isFreshForTesting(current, at: base.addingTimeInterval(60), requester: "digest-a"))
        #expect(!cache.isFreshForTesting(current, at: base.addingTimeInterval(60), requester: ""))
        #expect(current.freshUntil == base.addingTimeInterval(600))
    }

    @Test func everyTruncationAndEveryByteFlipOfAnEncodedEntryIsRejected() {
        let entry = CachedResponse(
            status: 200, headers: ["Cache-Control": "max-age=60", "ETag": "\"x\""], body: Data("hello, world".utf8),
            requestTime: Date(timeIntervalSince1970: 1), responseTime: Date(timeIntervalSince1970: 2),
            varyValues: [.init(name: "accept", value: "a"), .init(name: "x-absent", value: nil)], credentials: "abc")
        let encoded = entry.encoded()
        #expect(CachedResponse(encoded: encoded) == entry)
        for length in 0..<encoded.count {
            #expect(CachedResponse(encoded: encoded.prefix(length)) == nil, "prefix \(length)")
        }
        for index in 0..<encoded.count {
            var damaged = encoded
            damaged[index] ^= 0x40
            #expect(CachedResponse(encoded: damaged) == nil, "flip at \(index)")
        }
        var random = SplitMix64(state: 3)
        for _ in 0..<2_000 {
            let bytes = Data((0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            #expect(CachedResponse(encoded: Data("CNVC".utf8) + [1] + bytes) == nil)
        }
    }

    @Test func theCredentialFingerprintIsStableOrderFreeAndNeverTheValue() {
        let a = CredentialFingerprint.of(["Authorization": "Bearer secret-token", "Cookie": "s=1"])
        let b = CredentialFingerprint.of(["cookie": "s=1", "X-Other": "z", "AUTHORIZATION": "Bearer secret-token"])
        #expect(a == b && a.count == 64 && !a.contains("secret"))
        #expect(a != CredentialFingerprint.of(["Authorization": "Bearer secret-tokem", "Cookie": "s=1"]))
        #expect(CredentialFingerprint.of(["Accept": "x"]).isEmpty)
    }
}
