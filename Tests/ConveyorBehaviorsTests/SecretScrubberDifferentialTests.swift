import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@testable import ConveyorBehaviors

/// The scrubber finds secrets through a bit table in front of its sets, and keeps the scrubbers
/// of the last sets of secrets: here its output is compared, byte for byte, with the algorithm it
/// replaced (every window looked up in the sets, the scrubber built for every line), on generated
/// secrets and texts; and a changed secret is shown never to be scrubbed with a scrubber built for
/// another.
@Suite struct SecretScrubberDifferentialTests {
    /// The scrubber as it was before the bit table: each 8-byte window of the text, and each of
    /// its 7- to 4-byte suffixes, looked up in the sets; the failure function of each variant
    /// built for every cut.
    struct Reference {
        let variants: [[UInt8]]
        let mask: [UInt8]
        let windows: Set<UInt64>
        let short: [Set<UInt64>]

        init(secrets: [String]) {
            let variants = SecretScrubber.variants(of: secrets)
            self.variants = variants
            var windows: Set<UInt64> = []
            var short: [Set<UInt64>] = Array(repeating: [], count: 4)
            var present = [Bool](repeating: false, count: 256)
            for variant in variants {
                for byte in variant { present[Int(byte)] = true }
                if variant.count >= 8 {
                    var key: UInt64 = 0
                    for (index, byte) in variant.enumerated() {
                        key = key << 8 | UInt64(byte)
                        if index >= 7 { windows.insert(key) }
                    }
                } else if variant.count >= 4 {
                    short[variant.count - 4].insert(variant.reduce(0) { $0 << 8 | UInt64($1) })
                }
            }
            self.windows = windows
            self.short = short
            let candidates = Array("*#~^|!".utf8) + Array(0x21...0x7E)
            if let free = candidates.first(where: { !present[Int($0)] }) {
                mask = [free, free, free]
            } else {
                mask = []
            }
        }

        func scrub(_ text: [UInt8]) -> [UInt8] {
            guard !variants.isEmpty, !text.isEmpty else { return text }
            var covered = [Bool](repeating: false, count: text.count)
            var key: UInt64 = 0
            for (index, byte) in text.enumerated() {
                key = key << 8 | UInt64(byte)
                let end = index + 1
                var length = 0
                if end >= 8, windows.contains(key) { length = 8 }
                if length == 0 {
                    for k in stride(from: 7, through: 4, by: -1) where end >= k {
                        let mask: UInt64 = (1 << UInt64(8 * k)) - 1
                        if short[k - 4].contains(key & mask) {
                            length = k
                            break
                        }
                    }
                }
                guard length > 0 else { continue }
                var start = end - length
                while start > 0, text[start] & 0xC0 == 0x80 { start -= 1 }
                var stop = end
                while stop < text.count, text[stop] & 0xC0 == 0x80 { stop += 1 }
                for position in start..<stop { covered[position] = true }
            }
            guard covered.contains(true) else { return text }
            var output: [UInt8] = []
            var index = 0
            while index < text.count {
                if covered[index] {
                    output.append(contentsOf: mask)
                    while index < text.count, covered[index] { index += 1 }
                } else {
                    output.append(text[index])
                    index += 1
                }
            }
            return output
        }

        func cutSecretLength(atEndOf text: [UInt8]) -> Int {
            var longest = 0
            for variant in variants where variant.count > 4 {
                let tail = text.suffix(variant.count - 1)
                var failure = [Int](repeating: 0, count: variant.count)
                var k = 0
                for i in 1..<variant.count {
                    while k > 0, variant[i] != variant[k] { k = failure[k - 1] }
                    if variant[i] == variant[k] { k += 1 }
                    failure[i] = k
                }
                var state = 0
                for byte in tail {
                    while state > 0, byte != variant[state] { state = failure[state - 1] }
                    if byte == variant[state] { state += 1 }
                    if state == variant.count { state = failure[state - 1] }
                }
                if state >= 4 { longest = max(longest, state) }
            }
            return longest
        }
    }

    /// Pieces secrets and texts are made of: letters, digits, what the encodings escape (`%`,
    /// `/`, `+`, `=`, `"`, `\`, `*`, space, controls), and two-, three- and four-byte characters.
    static let pieces: [String] = Array("abcXYZ0189").map(String.init)
        + ["-", "_", ".", "~", "%", "/", "+", "=", "\"", "\\", "*", " ", "&", "?", ":", "\n", "\t", "\u{1}", "é", "ß", "漢", "€", "😀", "e\u{301}"]

    static func string(_ random: inout SplitMix64, pieces count: Int) -> String {
        (0..<count).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
    }

    /// A text for these secrets: random pieces, with whole variants, pieces of variants (3 to 12
    /// bytes, cut anywhere, even inside a character) and variants with one byte changed spliced in.
    static func text(_ random: inout SplitMix64, variants: [[UInt8]]) -> [UInt8] {
        var text: [UInt8] = []
        for _ in 0..<(1 + Int(random.next() % 8)) {
            switch random.next() % 5 {
            case 0, 1: text += Array(string(&random, pieces: Int(random.next() % 12)).utf8)
            case 2 where !variants.isEmpty:
                text += variants[Int(random.next() % UInt64(variants.count))]
            case 3 where !variants.isEmpty:
                let variant = variants[Int(random.next() % UInt64(variants.count))]
                let length = min(variant.count, 3 + Int(random.next() % 10))
                let start = Int(random.next() % UInt64(variant.count - length + 1))
                text += variant[start..<(start + length)]
            case 4 where !variants.isEmpty:
                var variant = variants[Int(random.next() % UInt64(variants.count))]
                variant[Int(random.next() % UInt64(variant.count))] ^= UInt8(1 + random.next() % 255)
                text += variant
            default: text.append(UInt8(truncatingIfNeeded: random.next()))
            }
        }
        return text
    }

    @Test func theScrubberMasksExactlyWhatTheSetLookupOfEveryWindowMasked() {
        var random = SplitMix64(state: 59)
        var masked = 0
        for round in 0..<400 {
            let secrets = (0..<(1 + Int(random.next() % 3))).map { _ in
                Self.string(&random, pieces: 1 + Int(random.next() % (round % 4 == 0 ? 4 : 24)))
            }
            let reference = Reference(secrets: secrets)
            let scrubber = SecretScrubber(secrets: secrets)
            #expect(scrubber.variants == reference.variants && scrubber.mask == reference.mask)
            for _ in 0..<6 {
                let text = Self.text(&random, variants: reference.variants)
                let expected = reference.scrub(text)
                #expect(scrubber.scrub(text) == expected, "secrets \(secrets.debugDescription), text \(text)")
                if expected != text { masked += 1 }
                // The same through `String` (valid UTF-8 only: the preview decodes first).
                let string = String(decoding: text, as: UTF8.self)
                #expect(
                    scrubber.scrub(string) == String(decoding: reference.scrub(Array(string.utf8)), as: UTF8.self),
                    "secrets \(secrets.debugDescription), text \(string.debugDescription)")
                for cut in [0, text.count / 3, text.count / 2, text.count] {
                    let kept = Array(text[..<cut])
                    #expect(scrubber.cutSecretLength(atEndOf: kept) == reference.cutSecretLength(atEndOf: kept))
                }
            }
        }
        // The generator reaches the masking paths, not only texts with nothing to mask.
        #expect(masked > 1_000)
    }

    @Test func aTextWithNoSecretIsReturnedAsItIs() {
        let scrubber = SecretScrubber(secrets: ["Bearer tok-0123456789abcdef"])
        let text = String(repeating: "nothing secret here, ", count: 50)
        #expect(scrubber.scrub(text) == text)
        #expect(scrubber.scrub(Array(text.utf8)) == Array(text.utf8))
        #expect(SecretScrubber.none.isEmpty && SecretScrubber.none.scrub(text) == text)
    }

    @Test func aChangedTokenIsNeverScrubbedWithTheSetBuiltForTheOldOne() {
        let cache = SecretScrubberCache(capacity: 2)
        // No 8-byte run in common (a shared one, `Bearer t`, would be masked in both).
        let old = "AAAAAAAAAAAAAAAA-1"
        let new = "BBBBBBBBBBBBBBBB-2"
        let text = "old \(old) new \(new)"
        #expect(cache.scrubber(for: [old]).scrub(text) == "old *** new BBBBBBBBBBBBBBBB-2")
        #expect(cache.scrubber(for: [new]).scrub(text) == "old AAAAAAAAAAAAAAAA-1 new ***")
        #expect(cache.scrubber(for: [old]).scrub(text) == "old *** new BBBBBBBBBBBBBBBB-2")
        // A secret added to the set, or the same secrets in another order, is another set.
        #expect(cache.scrubber(for: [old, new]).scrub(text) == "old *** new ***")
        #expect(cache.scrubber(for: [new, old]).scrub(text) == "old *** new ***")
        // Canonically equivalent spellings are equal `String`s, but their bytes (and so their
        // echoes) differ: each gets its own scrubber.
        let composed = "caf\u{E9}-token-123"
        let decomposed = "cafe\u{301}-token-123"
        #expect(composed == decomposed)
        let echo = "< \(decomposed) >"
        #expect(cache.scrubber(for: [composed]).scrub(echo) != "< *** >")
        #expect(cache.scrubber(for: [decomposed]).scrub(echo) == "< *** >")
        #expect(cache.scrubber(for: [composed]).scrub("< \(composed) >") == "< *** >")
    }

    @Test func theCacheKeepsOnlyTheLastSetsAndNoneTooShortToScrub() {
        let cache = SecretScrubberCache(capacity: 3)
        #expect(cache.scrubber(for: []).isEmpty && cache.scrubber(for: ["abc"]).isEmpty)
        #expect(cache.count == 0)
        for index in 0..<10 {
            let token = "token-\(index)-0123456789"
            #expect(cache.scrubber(for: [token]).scrub("x \(token) y") == "x *** y")
            #expect(cache.count == min(index + 1, 3))
        }
    }

    @Test func concurrentRequestsWithDifferentTokensEachGetTheirOwnScrubber() async {
        let cache = SecretScrubberCache(capacity: 2)
        let failures = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var failures = 0
                    for round in 0..<200 {
                        // Five tokens with no 8-byte run in common: `AAAA…`, `BBBB…`…
                        let token = String(repeating: "ABCDE".map(String.init)[(task + round) % 5], count: 16)
                        let other = String(repeating: "ABCDE".map(String.init)[(task + round + 1) % 5], count: 16)
                        let scrubbed = cache.scrubber(for: [token]).scrub("\(token) \(other)")
                        if scrubbed != "*** \(other)" { failures += 1 }
                    }
                    return failures
                }
            }
            return await group.reduce(0, +)
        }
        #expect(failures == 0)
    }

    @Test func aLoggingBehaviorScrubsEachRequestsOwnTokenFromItsEcho() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/v1/me", reply: .handler { request in
            .text("you sent \(request.headers["Authorization"] ?? "")", status: 200)
        })
        let sink = CapturingLogSink(levels: [.info])
        let tokens = ["Bearer tok-1111111111111111", "Bearer tok-2222222222222222", "Bearer tok-1111111111111111"]
        let client = NetworkClient(baseURL: try #require(URL(string: "https://api.example.com/v1")), transport: mock) {
            LoggingBehavior(sink: sink, bodyPreviewLimit: 256)
        }
        for token in tokens {
            _ = try await client.send(Request<Data>(path: "/me", headers: ["Authorization": token]))
        }
        let lines = sink.entries.map(\.message)
        #expect(lines.count == 3)
        for line in lines {
            #expect(line.hasSuffix("body: you sent ***"), "\(line)")
            #expect(!line.contains("tok-"), "\(line)")
        }
    }
}
