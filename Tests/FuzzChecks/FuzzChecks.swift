import Foundation

// In this package the checks use `package` declarations; FuzzTesting/ is another package, so
// there they import the modules @testable (it builds them with -enable-testing and defines
// CONVEYOR_FUZZING). A plain import here keeps `swift build -c release` of this package working.
#if CONVEYOR_FUZZING
    @testable import ConveyorBehaviors
    @testable import ConveyorPipeline
    @testable import ConveyorTesting
#else
    import ConveyorBehaviors
    import ConveyorPipeline
    import ConveyorTesting
#endif

/// One check per parser of outside bytes: each takes arbitrary bytes, runs the parser, and
/// returns a description of what went wrong (an oracle that failed), or `nil`. A trap or a
/// sanitizer report is a failure too, found by running the check.
///
/// The same checks run in two places: the libFuzzer targets in `FuzzTesting/` (one executable
/// per check, which traps on a non-`nil` answer so that libFuzzer keeps the input), and the
/// ordinary test suite, which replays every input committed under `FuzzTesting/Corpus/<name>/`.
public enum FuzzChecks {
    /// Every check by the name of its target and of its corpus folder.
    public static let all: [(name: String, check: @Sendable ([UInt8]) -> String?)] = [
        ("http-date", httpDate),
        ("retry-after", retryAfter),
        ("cache-control", cacheControl),
        ("vary", vary),
        ("content-range", contentRange),
        ("content-type", contentType),
        ("cache-entry", cacheEntry),
        ("redactor", redactor),
        ("event-stream", eventStream),
        ("set-cookie", setCookie),
        ("redirect", redirect),
        ("framing", framing),
        ("har", har),
    ]

    /// The check named `name`.
    public static func check(named name: String) -> (@Sendable ([UInt8]) -> String?)? {
        all.first { $0.name == name }?.check
    }

    // MARK: - HAR files

    /// A HAR file (any bytes) loaded for replay, then each request it records (up to eight, and
    /// two of its own) sent back to it: loading and answering end in an archive, a response or a
    /// typed error, never a trap (a negative `_conveyorBodyLimit` trapped `prefix`), and a
    /// response answers with the status and bytes the file holds.
    @Sendable public static func har(_ bytes: [UInt8]) -> String? {
        guard let replay = try? HARReplayTransport(data: Data(bytes), mode: .lenient) else { return nil }
        var requests: [HTTPRequest] = []
        for (method, url, body) in replay.recordedRequests.prefix(8) {
            guard let url = URL(string: url), HTTPMethod(rawValue: method).isToken else { continue }
            requests.append(HTTPRequest(method: HTTPMethod(rawValue: method), url: url, body: body.map { Data($0.utf8) }))
        }
        if let any = URL(string: "https://a.example/p?x=1") {
            requests.append(HTTPRequest(url: any))
            requests.append(HTTPRequest(method: .post, url: any, body: Data(repeating: 0x61, count: 70)))
        }
        for request in requests {
            do {
                let response = try replay.answer(request)
                if response.request != request { return "a response for another request" }
            } catch is HARReplayTransport.Unmatched {
            } catch let error as NetworkError {
                if error.name.isEmpty { return "an unnamed error" }
            } catch {
                return "an error that is neither Unmatched nor a NetworkError: \(type(of: error))"
            }
        }
        return nil
    }

    // MARK: - Event streams

    /// The event-stream parser: the input is a stream, cut into chunks at places the input also
    /// chooses; the events must not depend on the cuts, no id may hold NUL, CR or LF, no data CR,
    /// and the limits hold.
    @Sendable public static func eventStream(_ bytes: [UInt8]) -> String? {
        guard bytes.count > 2 else { return nil }
        let limit = 16 + Int(bytes[0]) * 4
        let stream = Array(bytes[2...])
        func parse(cuts seed: UInt8) -> Result<[ServerSentEvent], EventStreamError> {
            var parser = ServerSentEventParser(maxLineLength: limit, maxEventSize: limit * 2)
            var events: [ServerSentEvent] = []
            var offset = 0
            var step = Int(seed)
            while offset < stream.count {
                step = (step &* 31 &+ 7) & 0xFF
                let end = seed == 0 ? stream.count : min(stream.count, offset + 1 + step % 9)
                do throws(EventStreamError) {
                    try parser.parse(Data(stream[offset..<end]), into: &events)
                } catch {
                    return .failure(error)
                }
                offset = end
            }
            return .success(events)
        }
        let whole = parse(cuts: 0)
        let cut = parse(cuts: bytes[1] | 1)
        switch (whole, cut) {
        case (.success(let a), .success(let b)):
            guard a == b else { return "the events depend on where the stream was cut: \(a.count) and \(b.count)" }
            for event in a {
                if let id = event.id, id.utf8.contains(where: { $0 == 0 || $0 == 0x0A || $0 == 0x0D }) {
                    return "an id holds NUL, CR or LF"
                }
                if event.data.utf8.contains(0x0D) { return "data holds CR" }
                // The limit counts bytes as received; each malformed byte becomes U+FFFD (3 bytes).
                if event.data.utf8.count + event.event.utf8.count > (limit * 2 + 1) * 3 { return "an event passed the size limit" }
            }
            return nil
        case (.failure, .failure):
            return nil  // a limit, whichever chunk showed it
        default:
            return "one cut hit a limit and the other did not: \(whole) and \(cut)"
        }
    }

    // MARK: - Headers

    /// An HTTP-date: any bytes give a date or `nil`; a date read back from its IMF-fixdate
    /// form is the same date.
    @Sendable public static func httpDate(_ bytes: [UInt8]) -> String? {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        guard let date = HTTPDate.parse(bytes: bytes[...], now: now) else { return nil }
        let text = HTTPDate.format(date)
        guard let again = HTTPDate.parse(text, now: now) else { return "\(date) formats as \(text), which does not parse" }
        return again == date ? nil : "\(date) formats as \(text), which parses as \(again)"
    }

    /// `Retry-After`: a wait between zero and the longest Conveyor waits, or `nil`.
    @Sendable public static func retryAfter(_ bytes: [UInt8]) -> String? {
        guard let delay = RetryAfter.delay(from: String(decoding: bytes, as: UTF8.self), now: Date()) else { return nil }
        return delay >= .zero && delay <= .conveyorMaximum ? nil : "a wait of \(delay)"
    }

    /// `Cache-Control`: lifetimes between 0 and 2^31.
    @Sendable public static func cacheControl(_ bytes: [UInt8]) -> String? {
        let control = CacheControl(parsing: String(decoding: bytes, as: UTF8.self))
        for value in [control.maxAge, control.sharedMaxAge, control.minFresh].compactMap({ $0 })
        where value < 0 || value > CacheControl.maximumDelta {
            return "a lifetime of \(value)"
        }
        return nil
    }

    /// `Vary`: distinct, lowercased, non-empty names.
    @Sendable public static func vary(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        let names = Vary.names(in: ["Vary": text, "vary": text])
        guard Set(names).count == names.count else { return "duplicate names \(names)" }
        if let bad = names.first(where: { $0.isEmpty || $0.utf8.contains { $0 >= 0x41 && $0 <= 0x5A } }) {
            return "name \(bad.debugDescription)"
        }
        return nil
    }

    /// `Content-Range`: first ≤ last < complete length.
    @Sendable public static func contentRange(_ bytes: [UInt8]) -> String? {
        guard let range = ContentRange(String(decoding: bytes, as: UTF8.self)) else { return nil }
        guard range.first >= 0, range.first <= range.last else { return "range \(range.first)-\(range.last)" }
        if let length = range.completeLength, range.last >= length { return "last \(range.last) of \(length)" }
        return nil
    }

    /// `Content-Type`: a non-empty, lowercased type and subtype.
    @Sendable public static func contentType(_ bytes: [UInt8]) -> String? {
        guard let type = MediaType(String(decoding: bytes, as: UTF8.self)) else { return nil }
        guard !type.type.isEmpty, !type.subtype.isEmpty, type.type == type.type.lowercased(),
            type.subtype == type.subtype.lowercased()
        else { return "type \(type.type)/\(type.subtype)" }
        _ = type.isJSON || type.isFormURLEncoded
        return nil
    }

    // MARK: - Cookies

    /// The URLs a `Set-Cookie` can come from in the checks: names, an IP address, a port, a path.
    static let cookieOrigins = [
        "https://api.example.com/v1/items", "http://example.com/", "https://127.0.0.1:8443/a/b/",
        "http://sub.api.example.com/x/y?z=1", "https://example.com/deep/path/file.json",
        "https://evil.co.uk/", "http://example.com./", "https://a.other.kawasaki.jp/", "https://ai/",
    ].compactMap(URL.init(string:))
    /// Sites no response from ``cookieOrigins`` may set a cookie for.
    static let otherSites = [
        "https://elsewhere.test/", "https://notexample.com/", "https://example.com.evil.test/", "https://com/",
        "https://127.0.0.2:8443/a/b/", "https://bank.co.uk/", "https://evil.com./", "https://b.other.kawasaki.jp/",
        "https://evil.ai/",
    ].compactMap(URL.init(string:))

    /// `Set-Cookie`, through a ``CookieJar``: the input chooses the URL that answered and one to
    /// four header values (any bytes). Whatever the jar keeps has a name, no control character,
    /// the size limit, a path, `Secure` only from `https`, and a domain the answering host
    /// domain-matches (itself for a host-only cookie; never an IP address's parent, never a bare
    /// label, never a public suffix), `__Secure-` and `__Host-` names (in any case) only with
    /// `Secure` from `https`, `__Host-` host-only at `/`; the jar stays within its limits, the `Cookie` header it writes holds no control
    /// character, and no other site is sent anything.
    @Sendable public static func setCookie(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let url = cookieOrigins[input.choose(cookieOrigins.count)]
        let count = 1 + input.choose(4)
        var values: [String] = []
        for index in 0..<count {
            // The last value takes the rest of the input; the others a length the input chooses.
            let length = index == count - 1 ? max(0, input.bytes.count - input.offset) : input.choose(512)
            values.append(String(decoding: input.bytes(length), as: UTF8.self))
        }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let jar = CookieJar(now: { now })
        jar.store(setCookies: values, from: url)
        guard let host = url.host?.lowercased() else { return nil }
        let cookies = jar.cookies
        if cookies.count > CookieJar.maximumCount { return "\(cookies.count) cookies kept" }
        for cookie in cookies {
            if cookie.name.isEmpty { return "a cookie without a name from \(values.debugDescription)" }
            if (cookie.name + cookie.value).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                return "a control character kept in \(cookie.name.debugDescription)=\(cookie.value.debugDescription)"
            }
            if cookie.name.utf8.count + cookie.value.utf8.count > CookieJar.maximumSize { return "an oversized cookie kept" }
            if !cookie.path.hasPrefix("/") { return "path \(cookie.path.debugDescription)" }
            if cookie.secure && url.scheme != "https" { return "a Secure cookie from \(url)" }
            if cookie.hostOnly ? cookie.domain != host : !(host == cookie.domain || host.hasSuffix("." + cookie.domain)) {
                return "domain \(cookie.domain.debugDescription) kept from \(host)"
            }
            if !cookie.hostOnly && cookie.domain != host && (!cookie.domain.contains(".") || isIPAddress(host)) {
                return "domain \(cookie.domain.debugDescription) kept from \(host)"
            }
            if !cookie.hostOnly && PublicSuffixes.isPublicSuffix(cookie.domain) {
                return "a cookie for the public suffix \(cookie.domain.debugDescription) kept from \(host)"
            }
            let lowered = cookie.name.lowercased()
            if (lowered.hasPrefix("__secure-") || lowered.hasPrefix("__host-")) && !(cookie.secure && url.scheme == "https") {
                return "a prefixed cookie \(cookie.name.debugDescription) kept without Secure over https"
            }
            if lowered.hasPrefix("__host-") && (!cookie.hostOnly || cookie.path != "/") {
                return "a __Host- cookie with a domain or a path other than /"
            }
            if cookies.filter({ $0.domain == cookie.domain }).count > CookieJar.maximumPerDomain {
                return "more than \(CookieJar.maximumPerDomain) cookies for \(cookie.domain)"
            }
        }
        for target in [url] + cookieOrigins {
            if let header = jar.header(for: target), header.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
                return "a control character in the Cookie header \(header.debugDescription)"
            }
        }
        for site in otherSites {
            if let header = jar.header(for: site) { return "\(site) is sent \(header.debugDescription)" }
        }
        return nil
    }

    /// An IP address rather than a name (RFC 6265 §5.1.3): a cookie for it is host-only.
    static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || (!host.isEmpty && host.allSatisfy { $0 == "." || $0.isNumber })
    }

    // MARK: - Redirects

    /// Where the redirect checks start from.
    static let redirectOrigins = [
        "https://api.example.com/v1/items?page=2", "http://127.0.0.1:8080/a/b", "https://example.com:8443/",
        "http://[::1]:9/x",
    ].compactMap(URL.init(string:))

    /// A `Location` (any bytes) through ``RedirectPolicy``, after a status, method and hop count
    /// the input chooses, from a request that carries every kind of credential header. A followed
    /// hop goes to an `http`/`https` URL with a host, which reads back as the same origin from
    /// its own text (a transport that parses it again connects where the policy judged); to
    /// another origin it carries no sensitive header; its method and body are the status's
    /// (RFC 9110 §15.4); the hop count is capped; and a final response from another origin
    /// delivers no `Set-Cookie`.
    @Sendable public static func redirect(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let start = redirectOrigins[input.choose(redirectOrigins.count)]
        let status = [301, 302, 303, 307, 308, 300, 304, 200][input.choose(8)]
        let method: HTTPMethod = [.get, .post, .head, .put][input.choose(4)]
        let soFar = input.choose(12)
        let policy = RedirectPolicy(maximumRedirects: input.choose(11))
        var request = HTTPRequest(
            method: method, url: start,
            headers: [
                "Authorization": "Bearer a", "Cookie": "s=1", "X-API-Key": "k", "X-Tenant-Secret": "t", "X-Custom-Cred": "c",
                "Accept": "application/json", "Content-Type": "application/json",
            ],
            body: method == .post || method == .put ? Data("{}".utf8) : nil)
        request.sensitiveHeaders = request.sensitiveHeaders.adding(["X-Custom-Cred"])
        let location = String(decoding: input.bytes(max(0, input.bytes.count - input.offset)), as: UTF8.self)

        switch policy.step(status: status, location: location, after: request, redirectsSoFar: soFar) {
        case .deliver:
            return nil
        case .tooManyRedirects:
            return soFar >= policy.maximumRedirects ? nil : "too many redirects after \(soFar) of \(policy.maximumRedirects)"
        case .follow(let next):
            guard [301, 302, 303, 307, 308].contains(status) else { return "followed a \(status)" }
            guard soFar < policy.maximumRedirects else { return "followed redirect \(soFar + 1) of \(policy.maximumRedirects)" }
            guard let scheme = next.url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                let origin = Origin(next.url)
            else { return "followed \(location.debugDescription) to \(next.url)" }
            guard let reparsed = URL(string: next.url.absoluteString), Origin(reparsed) == origin else {
                return "\(next.url.absoluteString.debugDescription) reads back as another origin"
            }
            let crossOrigin = Origin(start) != origin
            if crossOrigin, let kept = next.headers.first(where: { request.sensitiveHeaders.contains($0.name) }) {
                return "\(kept.name) kept on a redirect from \(start) to \(next.url)"
            }
            let becomesGET = (status == 303 && method != .head) || ((status == 301 || status == 302) && method == .post)
            if becomesGET {
                if next.method != .get || next.body != nil || next.headers["Content-Type"] != nil {
                    return "a \(status) after \(method) went on as \(next.method) with its body"
                }
            } else if next.method != method || next.body != request.body {
                return "a \(status) after \(method) went on as \(next.method)"
            }
            let delivered = policy.delivering(["Set-Cookie": "s=2", "Content-Type": "text/plain"], from: next.url, askedFor: start)
            if crossOrigin && delivered["Set-Cookie"] != nil { return "\(next.url) set a cookie for \(start)" }
            if !crossOrigin && delivered["Set-Cookie"] == nil { return "a same-origin Set-Cookie was removed" }
            return nil
        }
    }

    // MARK: - Response framing

    /// The names the framing check draws from: the one the policy counts, in three cases, and
    /// others (one a byte longer, one a byte shorter, one as long but ending past ASCII).
    static let framingNames = [
        "Content-Length", "content-length", "CONTENT-LENGTH", "Content-Type", "X-Trace", "Content-Lengths",
        "Content-Lengt", "Content-Leng\u{0127}",
    ]
    /// Value pieces the framing check splices: digits, separators, every byte the policy looks
    /// for (CR, LF, NUL, the lead byte of U+FFFD), other controls it leaves alone, and UTF-8
    /// beyond ASCII that is valid (obs-text, kept) or not (replaced with U+FFFD, refused).
    static let framingPieces: [[UInt8]] = [
        Array("0".utf8), Array("42".utf8), Array("9".utf8), Array(",".utf8), Array(" ".utf8), Array("-".utf8),
        [0x0D], [0x0A], [0x00], [0x09], [0x1B], [0x7F], [0xEF], [0xEF, 0xBF, 0xBD], [0xEF, 0xBB, 0xBF], [0xC3, 0xA9],
        [0xFF], [0xC3], [0xE2, 0x82],
    ]

    /// ``FramingPolicy`` against a reference written from its rules (RFC 9112 §6.3, §2.2): the
    /// input chooses one to eight fields, each name from a list or of any bytes, each value
    /// spliced from pieces or of any bytes (decoded as UTF-8, as transports do). A head is
    /// refused exactly when one field breaks a rule: a second `Content-Length` (any case), one
    /// that is empty or not all digits, a CR, LF or NUL in a name or value, a U+FFFD in either.
    /// The first such field is the one reported, under a rule it breaks, by its name only when
    /// the name is printable ASCII (`?` otherwise; a length as `Content-Length`); the description
    /// holds no value.
    /// ``HTTPHeaders/namesEqual(_:_:)`` agrees with its iterating form on every pair of names.
    @Sendable public static func framing(_ bytes: [UInt8]) -> String? {
        let fields = framingFields(bytes).map { HTTPHeaders.Field(name: $0.name, value: $0.value) }
        for a in fields {
            for b in fields where HTTPHeaders.namesEqual(a.name, b.name) != HTTPHeaders.namesEqualIterating(a.name, b.name) {
                return "namesEqual and its iterating form disagree on \(a.name.debugDescription) and \(b.name.debugDescription)"
            }
        }

        // The reference: the first field that breaks a rule, and every rule it breaks.
        func folded(_ text: String) -> [UInt8] { text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 } }
        func broken(_ text: String) -> Set<MalformedResponse.Rule> {
            var rules: Set<MalformedResponse.Rule> = []
            if text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) { rules.insert(.controlCharacter) }
            if text.unicodeScalars.contains("\u{FFFD}") { rules.insert(.notUTF8) }
            return rules
        }
        var expected: (field: HTTPHeaders.Field, rules: Set<MalformedResponse.Rule>)?
        var lengths = 0
        for field in fields {
            var rules = broken(field.name).union(broken(field.value))
            if folded(field.name) == Array("content-length".utf8) {
                lengths += 1
                if lengths > 1 || field.value.isEmpty || !field.value.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
                    rules.insert(.contentLength)
                }
            }
            if !rules.isEmpty {
                expected = (field, rules)
                break
            }
        }

        let head = HTTPHeaders(fields)
        let shown = fields.map { "\($0.name.debugDescription): \($0.value.debugDescription)" }.joined(separator: ", ")
        do throws(NetworkError) {
            try FramingPolicy.check(head)
            if let expected { return "accepted \(shown), whose \(expected.field.name.debugDescription) breaks \(expected.rules)" }
            return nil
        } catch {
            guard case .transportFailed = error, let malformed = error.underlying as? MalformedResponse else {
                return "refused \(shown) with \(error), not a MalformedResponse"
            }
            guard let expected else { return "refused \(shown), which breaks no rule: \(malformed)" }
            guard expected.rules.contains(malformed.rule) else {
                return "refused \(shown) for \(malformed.rule), but its first bad field breaks \(expected.rules)"
            }
            // A length is reported under its standard spelling, whatever the field's case.
            let printable = expected.field.name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
            let named = malformed.rule == .contentLength ? "Content-Length" : printable ? expected.field.name : "?"
            guard malformed.header == named else {
                return "refused \(shown) naming \(malformed.header.debugDescription), not \(expected.field.name.debugDescription)"
            }
            guard malformed.description == "malformed response: \(malformed.rule.rawValue) (\(malformed.header))" else {
                return "the refusal reads \(malformed.description.debugDescription)"
            }
            return nil
        }
    }

    /// The head the `framing` check makes of `bytes`, as name and value pairs.
    package static func framingFields(_ bytes: [UInt8]) -> [(name: String, value: String)] {
        var input = FuzzInput(bytes)
        var fields: [(name: String, value: String)] = []
        for _ in 0..<(1 + input.choose(8)) {
            let name: String
            if input.choose(4) == 0 {
                name = String(decoding: input.bytes(1 + input.choose(12)), as: UTF8.self)
            } else {
                name = framingNames[input.choose(framingNames.count)]
            }
            var value: [UInt8] = []
            if input.choose(4) == 0 {
                value = input.bytes(input.choose(24))
            } else {
                for _ in 0..<input.choose(6) { value += framingPieces[input.choose(framingPieces.count)] }
            }
            fields.append((name, String(decoding: value, as: UTF8.self)))
        }
        return fields
    }

    // MARK: - Cache entries

    /// A cache entry read from disk: the bytes get a valid checksum (so the structure behind it
    /// is what is fuzzed); whatever decodes encodes back to the same entry.
    @Sendable public static func cacheEntry(_ bytes: [UInt8]) -> String? {
        var data = Data(CachedResponse.magic + [CachedResponse.formatVersion] + bytes)
        withUnsafeBytes(of: FNV1a.hash(data).bigEndian) { data.append(contentsOf: $0) }
        for candidate in [data, Data(bytes)] {
            guard let entry = CachedResponse(encoded: candidate) else { continue }
            guard let again = CachedResponse(encoded: entry.encoded()) else { return "a decoded entry does not decode again" }
            if again != entry { return "an entry changed in a round trip" }
        }
        return nil
    }

    // MARK: - The redactor

    /// The redactor against two oracles.
    ///
    /// 1. Structure: the input chooses a JSON document, a form body or a URL in which values
    ///    under hidden names (escaped key names, whitespace and newlines between tokens,
    ///    nesting, arrays, objects, fragments) hold a secret with `§` in it; no other text has a
    ///    `§`. Without telling the redactor the secret, no `§` (in any spelling) may survive, at
    ///    any preview limit.
    /// 2. Known secrets: the input chooses a secret (any bytes) and a text with the secret
    ///    spliced in as sent, percent-encoded or JSON-escaped; once the redactor knows the
    ///    secret, neither it nor any 8-byte piece of it may survive.
    /// 3. Ambiguous names (`key`, `session`, `pin`, `code`…): under each the input puts either a
    ///    value holding `§` (never shown) or a value that is plainly no credential for that name
    ///    (a literal, lowercase words, a small integer), which must be shown as it is, in JSON
    ///    and in a form.
    /// 4. The rule by meaning is one rule whatever the spelling: a name of rule words the input
    ///    picks (heads, metadata, flags, qualifiers, ordinary words) has the same verdict in snake,
    ///    kebab, dotted, camel, Pascal and upper spelling, and a JSON value and a form value under
    ///    it are hidden exactly when the verdict says.
    @Sendable public static func redactor(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let redactor = Redactor()
        switch input.choose(5) {
        case 3: return ambiguousValues(&input, redactor)
        case 4: return spellings(&input, redactor)
        case 0:
            let (body, isForm) = structuredBody(&input)
            let limit = 1 + input.choose(body.utf8.count + 16)
            let preview = redactor.preview(
                Data(body.utf8), contentType: isForm ? "application/x-www-form-urlencoded" : "application/json; charset=utf-8",
                limit: limit)
            return leaksMarker(preview) ? "a hidden value survived: \(body.debugDescription) gave \(preview.debugDescription)" : nil
        case 1:
            let url = structuredURL(&input)
            guard let parsed = URL(string: url) else { return nil }
            let shown = redactor.redact(parsed)
            return leaksMarker(shown) ? "a hidden item survived: \(url) gave \(shown)" : nil
        default:
            let secret = String(decoding: input.bytes(4 + input.choose(40)), as: UTF8.self)
            guard secret.utf8.count >= 4 else { return nil }
            var text = String(decoding: input.bytes(input.choose(200)), as: UTF8.self)
            for _ in 0..<(1 + input.choose(3)) {
                let spelled: String
                switch input.choose(3) {
                case 0: spelled = secret
                case 1: spelled = String(decoding: SecretScrubber.percentEncoded(Array(secret.utf8), allowed: SecretScrubber.isUnreserved, upper: true), as: UTF8.self)
                default: spelled = jsonEscaped(secret)
                }
                let at = text.index(text.startIndex, offsetBy: input.choose(text.count + 1))
                text.insert(contentsOf: spelled, at: at)
            }
            let scrubbed = redactor.scrub(text, [secret])
            if let piece = survivingPiece(of: secret, in: scrubbed) {
                return "\(piece.debugDescription) of secret \(secret.debugDescription) survived in \(scrubbed.debugDescription)"
            }
            let preview = redactor.preview(Data(text.utf8), contentType: "text/plain", limit: 1 + input.choose(text.utf8.count + 8), scrubbing: [secret])
            if let piece = survivingPiece(of: secret, in: preview) {
                return "\(piece.debugDescription) of secret \(secret.debugDescription) survived in preview \(preview.debugDescription)"
            }
            return nil
        }
    }

    /// Ambiguous names with values that are plainly no credential for them (shown) or hold the
    /// marker (hidden).
    static func ambiguousValues(_ input: inout FuzzInput, _ redactor: Redactor) -> String? {
        let names: [(name: String, plain: [String])] = [
            ("key", ["\"theme\"", "\"dark_mode\"", "\"notifications.email\"", "42", "-1", "true", "null"]),
            ("session", ["\"active\"", "\"expired session\"", "false", "7"]),
            ("auth", ["\"basic\"", "\"none\"", "true"]), ("sign", ["-1", "\"positive\"", "null"]),
            ("code", ["\"invalid_grant\"", "\"not-found\"", "null"]), ("pin", ["true", "false", "null"]),
            ("otp", ["false", "null"]), ("X-Session", ["\"active\"", "null"]),
        ]
        var members: [String] = []
        var shown: [String] = []
        var formPairs: [String] = []
        var formShown: [String] = []
        for _ in 0..<(1 + input.choose(5)) {
            let (name, plain) = names[input.choose(names.count)]
            if input.choose(2) == 0 {
                let value = plain[input.choose(plain.count)]
                members.append("\"\(name)\":" + spaces[input.choose(spaces.count)] + value)
                shown.append("\"\(name)\":" + value)
                // In a form the same words are text: `true` is a word there (hidden under `pin`).
                if value.hasPrefix("\""), name != "pin", name != "otp" {
                    let word = String(value.dropFirst().dropLast()).replacingOccurrences(of: " ", with: "+")
                    formPairs.append("\(name)=\(word)")
                    formShown.append("\(name)=\(word)")
                }
            } else {
                members.append("\"\(name)\":\"" + jsonEscaped(secretValue(&input)) + "\"")
                let value = SecretScrubber.percentEncoded(Array(secretValue(&input).utf8), allowed: SecretScrubber.isUnreserved, upper: true)
                formPairs.append(name + "=" + String(decoding: value, as: UTF8.self))
            }
        }
        let body = "{" + members.joined(separator: ",") + "}"
        // A preview's limit is on what it shows, and a mask (`***`, 3 bytes) can be longer than
        // the value it hides (`§`, 2 bytes): room for the whole body with every value masked.
        let room = 3 * body.utf8.count + 1
        let preview = redactor.preview(Data(body.utf8), contentType: "application/json", limit: room)
        if leaksMarker(preview) { return "a hidden value survived: \(body.debugDescription) gave \(preview.debugDescription)" }
        // Compared without the whitespace between tokens (the words inside a value keep theirs).
        func squeezed(_ text: String) -> String { String(text.unicodeScalars.filter { !" \n\r\t".unicodeScalars.contains($0) }) }
        for member in shown where !squeezed(preview).contains(squeezed(member)) {
            return "\(member) was not shown: \(body.debugDescription) gave \(preview.debugDescription)"
        }
        let form = formPairs.joined(separator: "&")
        let formPreview = redactor.preview(Data(form.utf8), contentType: "application/x-www-form-urlencoded", limit: 3 * form.utf8.count + 1)
        if leaksMarker(formPreview) { return "a hidden form value survived: \(form) gave \(formPreview)" }
        for pair in formShown where !formPreview.contains(pair) { return "\(pair) was not shown: \(form) gave \(formPreview)" }
        return nil
    }

    /// Words of the rule's every role, for names the input composes.
    static let ruleWords = [
        "token", "key", "code", "secret", "password", "nonce", "verifier", "crumb", "sign", "hmac", "session", "sid",
        "auth", "pin", "otp", "api", "access", "private", "public", "client", "page", "next", "method", "type", "endpoint",
        "check", "expires", "at", "count", "name", "is", "allow", "required", "hint", "value", "hash", "id", "user",
        "account", "mfa", "oob", "one", "time", "cvc", "signature", "cookie", "consent", "x", "status", "country", "seed",
        "phrase", "theme", "monkey", "author", "secretary", "connect", "primary", "reset", "device",
    ]

    /// A name of rule words in every spelling that keeps its words apart: one verdict, and the
    /// redactor hides a value under it exactly when the verdict is not `.plain` (an ambiguous
    /// name's value here looks generated).
    static func spellings(_ input: inout FuzzInput, _ redactor: Redactor) -> String? {
        let words = (0..<(1 + input.choose(4))).map { _ in ruleWords[input.choose(ruleWords.count)] }
        let capitalized = words.map { $0.prefix(1).uppercased() + $0.dropFirst() }
        let snake = words.joined(separator: "_")
        let verdict = SecretName.verdict(snake)
        for spelled in [
            words.joined(separator: "-"), words.joined(separator: "."), snake.uppercased(), capitalized.joined(separator: "-"),
            (words.first ?? "") + capitalized.dropFirst().joined(), capitalized.joined(),
        ] where SecretName.verdict(spelled) != verdict {
            return "\(spelled) is \(SecretName.verdict(spelled)), \(snake) is \(verdict)"
        }
        let value = "Qz9" + marker + "Kx7"
        let json = "{\"\(snake)\":\"\(value)\"}"
        let preview = redactor.preview(Data(json.utf8), contentType: "application/json", limit: 4096)
        if leaksMarker(preview) != (verdict == .plain) { return "\(snake) (\(verdict)) gave \(preview)" }
        let form = snake + "=" + String(decoding: SecretScrubber.percentEncoded(Array(value.utf8), allowed: SecretScrubber.isUnreserved, upper: true), as: UTF8.self)
        let formPreview = redactor.preview(Data(form.utf8), contentType: "application/x-www-form-urlencoded", limit: 4096)
        if leaksMarker(formPreview) != (verdict == .plain) { return "\(snake) (\(verdict)) gave \(formPreview)" }
        return nil
    }

    /// The marker every generated hidden value holds, and its spellings.
    static let marker = "§"
    /// Whether `text` holds the marker in any spelling the generator uses.
    public static func leaksMarker(_ text: String) -> Bool {
        let lower = text.lowercased()
        return text.contains(marker) || lower.contains("%c2%a7") || lower.contains("\\u00a7")
    }

    /// The secret whole, JSON-escaped, or any 8-byte piece of it, if `text` still holds one.
    static func survivingPiece(of secret: String, in text: String) -> String? {
        let haystack = Array(text.utf8)
        var needles = [Array(secret.utf8), Array(jsonEscaped(secret).utf8)]
        let raw = Array(secret.utf8)
        if raw.count > 8 { for start in 0...(raw.count - 8) { needles.append(Array(raw[start..<(start + 8)])) } }
        for needle in needles where needle.count >= 4 && haystack.count >= needle.count {
            for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
                return String(decoding: needle, as: UTF8.self)
            }
        }
        return nil
    }

    static func jsonEscaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += "\\u" + hex4(scalar.value, upper: false)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Four hex digits (a UTF-16 unit below 0x10000).
    static func hex4(_ value: UInt32, upper: Bool) -> String {
        let digits = Array(upper ? "0123456789ABCDEF" : "0123456789abcdef")
        return String((0..<4).map { digits[Int(value >> UInt32(12 - 4 * $0) & 0xF)] })
    }

    /// Secret names by meaning (contract rule 12), each spelled by the input (``spelledName(_:_:)``).
    static let hiddenNames = [
        "access_token", "password", "Token", "client_secret", "API_KEY", "refresh_token", "Authorization",
        "api_token", "private_token", "oauth_token_secret", "bearer_token", "aws_secret_access_key", "access_key",
        "current_password", "password_confirmation", "passcode", "session_id", "x_functions_key", "mfa_code",
        "user[password]", "api[key]", "auth[token]",
    ]
    /// Secret names hidden in every spelling that keeps their words apart (run together, `sign`,
    /// `crumb` or `hint` is no longer a word of its own).
    static let wordHiddenNames = [
        "code_verifier", "x_wp_nonce", "cb_access_sign", "jenkins_crumb", "x_shopify_hmac_sha256", "oob_code",
        "x_jfrog_art_api", "id_token_hint", "x_hub_signature_256", "otp_attempt", "one_time_code", "payment_method_nonce",
        "x_sentry_auth", "listen_key", "seed_phrase", "aws_access_key_id",
    ]
    static func anyHiddenName(_ input: inout FuzzInput) -> String {
        let all = hiddenNames + wordHiddenNames
        return all[input.choose(all.count)]
    }
    static let plainNames = ["id", "name", "note", "list", "nested", "data", "state", "token_type", "max_tokens", "keyboard", "author"]

    /// A name in a spelling the input chooses: as written, snake, kebab, dotted, camel, Pascal,
    /// upper, or run together.
    static func spelledName(_ name: String, _ input: inout FuzzInput) -> String {
        guard !name.contains("[") else { return name }
        let words = name.lowercased().split(whereSeparator: { $0 == "_" || $0 == "-" }).map(String.init)
        let capitalized = words.map { $0.prefix(1).uppercased() + $0.dropFirst() }
        let runTogether = !wordHiddenNames.contains(name)
        switch input.choose(runTogether ? 8 : 6) {
        case 0: return words.joined(separator: "_")
        case 1: return words.joined(separator: "-")
        case 2: return words.joined(separator: ".")
        case 3: return (words.first ?? "") + capitalized.dropFirst().joined()
        case 4: return capitalized.joined()
        case 5: return words.joined(separator: "_").uppercased()
        case 6: return words.joined()
        default: return name
        }
    }
    static let plainText = Array("abcXYZ 019-_./+=&?:,{}[]\"\\\n\té")
    static let secretText = Array("Qz9-_./+= &%\"\\\né")
    static let spaces = ["", " ", "\n", "\t", "\r\n", "  \n "]

    static func plainValue(_ input: inout FuzzInput) -> String {
        String((0..<input.choose(8)).map { _ in plainText[input.choose(plainText.count)] })
    }

    static func secretValue(_ input: inout FuzzInput) -> String {
        var secret = String((0..<input.choose(12)).map { _ in secretText[input.choose(secretText.count)] })
        secret.insert(contentsOf: marker, at: secret.index(secret.startIndex, offsetBy: input.choose(secret.count + 1)))
        return secret
    }

    /// A key name spelled with JSON escapes in random places.
    static func escapedKey(_ name: String, _ input: inout FuzzInput) -> String {
        var out = ""
        for scalar in name.unicodeScalars {
            switch input.choose(4) {
            case 0: out += "\\u" + hex4(scalar.value, upper: false)
            case 1: out += "\\u" + hex4(scalar.value, upper: true)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func structuredBody(_ input: inout FuzzInput) -> (String, isForm: Bool) {
        if input.choose(4) == 0 {
            var pairs: [String] = []
            for _ in 0..<(1 + input.choose(4)) {
                if input.choose(2) == 0 {
                    let name = spelledName(anyHiddenName(&input), &input)
                    let encodedName = name.utf8.map { byte in
                        input.choose(3) == 0 ? "%" + hex4(UInt32(byte), upper: true).suffix(2) : String(UnicodeScalar(byte))
                    }.joined()
                    let value = SecretScrubber.percentEncoded(Array(secretValue(&input).utf8), allowed: SecretScrubber.isUnreserved, upper: input.choose(2) == 0)
                    pairs.append(encodedName + "=" + String(decoding: value, as: UTF8.self))
                } else {
                    pairs.append(plainNames[input.choose(plainNames.count)] + "=" + String(decoding: SecretScrubber.percentEncoded(Array(plainValue(&input).utf8), allowed: SecretScrubber.isUnreserved, upper: true), as: UTF8.self))
                }
            }
            return (pairs.joined(separator: "&"), true)
        }
        return (jsonValue(&input, depth: 0, hidden: false), false)
    }

    /// A JSON value; under a hidden key (`hidden`) every string holds the marker.
    static func jsonValue(_ input: inout FuzzInput, depth: Int, hidden: Bool) -> String {
        func space() -> String { spaces[input.choose(spaces.count)] }
        let kind = depth > 3 ? input.choose(3) : input.choose(6)
        switch kind {
        case 0: return "\"" + jsonEscaped(hidden ? secretValue(&input) : plainValue(&input)) + "\""
        case 1: return hidden ? "\"" + jsonEscaped(secretValue(&input)) + "\"" : String(input.choose(100_000))
        case 2: return hidden ? "\"" + jsonEscaped(secretValue(&input)) + "\"" : ["true", "false", "null"][input.choose(3)]
        case 3:
            let elements = (0..<input.choose(4)).map { _ in space() + jsonValue(&input, depth: depth + 1, hidden: hidden) + space() }
            return "[" + elements.joined(separator: ",") + "]"
        default:
            var members: [String] = []
            for _ in 0..<input.choose(5) {
                let isHidden = input.choose(2) == 0
                let name = isHidden ? spelledName(anyHiddenName(&input), &input) : plainNames[input.choose(plainNames.count)]
                let key = "\"" + escapedKey(name, &input) + "\""
                members.append(space() + key + space() + ":" + space() + jsonValue(&input, depth: depth + 1, hidden: hidden || isHidden) + space())
            }
            return "{" + members.joined(separator: ",") + "}"
        }
    }

    static func structuredURL(_ input: inout FuzzInput) -> String {
        func items() -> String {
            (0..<(1 + input.choose(3))).map { _ in
                if input.choose(2) == 0 {
                    let value = SecretScrubber.percentEncoded(Array(secretValue(&input).utf8), allowed: SecretScrubber.isUnreserved, upper: input.choose(2) == 0)
                    let name = spelledName(anyHiddenName(&input), &input)
                    let encodedName = String(decoding: SecretScrubber.percentEncoded(Array(name.utf8), allowed: SecretScrubber.isUnreserved, upper: true), as: UTF8.self)
                    return encodedName + "=" + String(decoding: value, as: UTF8.self)
                }
                return plainNames[input.choose(plainNames.count)] + "=x"
            }.joined(separator: "&")
        }
        var url = "https://app.example/cb"
        if input.choose(2) == 0 { url += "?" + items() }
        if input.choose(3) > 0 { url += "#" + (input.choose(2) == 0 ? "/route?" : "") + items() }
        return url
    }
}

/// Reads choices from fuzz input; when the bytes run out every choice is 0.
public struct FuzzInput {
    var bytes: [UInt8]
    var offset = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// A number in `0..<count` (0 when `count` is 0 or the input is used up).
    mutating func choose(_ count: Int) -> Int {
        guard count > 1 else { return 0 }
        var value = 0
        var range = 1
        while range < count {
            value = value << 8 | Int(next())
            range <<= 8
        }
        return value % count
    }

    mutating func next() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in next() } }
}
