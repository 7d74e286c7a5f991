package import ConveyorPipeline
package import Foundation

/// What a response says about the origin's quota: how many more requests it accepts, and when
/// that count starts again.
///
/// Read from, most restrictive first when several are present:
/// - `Retry-After` on a `429` or `503`: nothing more until then;
/// - `RateLimit` (the IETF httpapi draft): the structured form `"default";r=50;t=30` (one member
///   per policy; the one with the fewest remaining counts) and the earlier `limit=100,
///   remaining=50, reset=30`; `RateLimit-Policy`'s `q` gives a policy's limit;
/// - `RateLimit-Remaining` / `RateLimit-Reset` / `RateLimit-Limit` (the draft's first versions);
/// - `X-RateLimit-Remaining` / `X-RateLimit-Reset` / `X-RateLimit-Limit` (GitHub, Twitter,
///   Reddit, Discord…), where a reset above 10⁹ is a Unix time and anything else seconds from now.
///
/// A count with no reset says nothing usable and is ignored, as is any value that is not a
/// number. A reset is clamped to ``longestReset`` (an hour), so no server can stop an origin for
/// longer with one answer.
package struct AnnouncedRateLimit: Equatable, Sendable {
    /// How many more requests the origin accepts before ``reset``.
    package var remaining: Int
    /// How long from the response until the count starts again.
    package var reset: Duration
    /// How many requests the origin accepts per window, when it says.
    package var limit: Int?

    /// The longest reset taken from a response: one hour (GitHub's window; a longer one would let
    /// a single wrong header stop every request to the origin, and nothing would be sent to
    /// correct it).
    package static let longestReset = Duration.seconds(3_600)

    package init(remaining: Int, reset: Duration, limit: Int? = nil) {
        self.remaining = max(0, remaining)
        self.reset = min(reset.clampedForConveyor, Self.longestReset)
        self.limit = limit.map { max(0, $0) }
    }

    /// The most restrictive announcement in `response`'s headers, or `nil` when it makes none.
    /// - Parameters:
    ///   - status: The response's status (`Retry-After` counts on a `429` or `503`).
    ///   - headers: The response's header fields.
    ///   - now: The current time, for HTTP-dates and Unix times.
    package static func parse(status: Int, headers: HTTPHeaders, now: @autoclosure () -> Date) -> AnnouncedRateLimit? {
        guard mayAnnounce(status: status, headers: headers) else { return nil }
        let now = now()
        var found: [AnnouncedRateLimit] = []
        if status == 429 || status == 503, let value = headers["Retry-After"],
            let wait = RetryAfter.delay(from: value, now: now)
        {
            found.append(AnnouncedRateLimit(remaining: 0, reset: wait))
        }
        let structured = headers.values(for: "RateLimit")
        if !structured.isEmpty {
            found += policies(structured.joined(separator: ","), limits: headers.values(for: "RateLimit-Policy"))
        }
        for (remainingName, resetName, limitName, unixTimes) in [
            ("RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Limit", false),
            ("X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Limit", true),
        ] {
            guard let remaining = headers[remainingName].flatMap(number), let reset = headers[resetName].flatMap(number)
            else { continue }
            let limit = headers[limitName].flatMap(number)
            // A Unix time (seconds since 1970) is above 10⁹; a wait in seconds never is.
            let seconds = unixTimes && reset > 1e9 ? reset - now.timeIntervalSince1970 : reset
            found.append(
                AnnouncedRateLimit(
                    remaining: whole(remaining), reset: .clampedSeconds(seconds), limit: limit.map(whole)))
        }
        return found.min { $0.isMoreRestrictive(than: $1) }
    }

    /// Whether any field could announce something: a name starting `ratelimit` or `x-ratelimit`,
    /// or `Retry-After` on a `429`/`503`. Most answers have none, and are passed over with one
    /// look at each name's first bytes.
    static func mayAnnounce(status: Int, headers: HTTPHeaders) -> Bool {
        let retrying = status == 429 || status == 503
        for field in headers {
            var name = field.name.utf8[...]
            if name.first.map(HeaderBytes.lower) == 0x78, name.dropFirst().first == 0x2D {  // "x-"
                name = name.dropFirst(2)
            }
            guard let first = name.first.map(HeaderBytes.lower), first == 0x72, name.count >= 9 else { continue }  // "r"
            let prefix = name.prefix(9).lazy.map(HeaderBytes.lower)
            if prefix.elementsEqual("ratelimit".utf8) { return true }
            if retrying, prefix.elementsEqual("retry-aft".utf8) { return true }
        }
        return false
    }

    /// Whether this announcement allows less than `other`: fewer remaining, or as few for longer.
    func isMoreRestrictive(than other: AnnouncedRateLimit) -> Bool {
        remaining != other.remaining ? remaining < other.remaining : reset > other.reset
    }

    /// The policies of a `RateLimit` field: each member with `r` and `t` (or `remaining` and
    /// `reset`) is one; members holding one `key=value` each (the earlier form) make one together.
    private static func policies(_ field: String, limits: [String]) -> [AnnouncedRateLimit] {
        var quotas: [String: Int] = [:]
        for member in HeaderBytes.listMembers(Array(limits.joined(separator: ",").utf8)[...]) {
            let (name, parameters) = parameters(of: member)
            if let q = parameters["q"].flatMap(number) { quotas[name] = whole(q) }
        }
        var result: [AnnouncedRateLimit] = []
        var loose: [String: Double] = [:]
        for member in HeaderBytes.listMembers(Array(field.utf8)[...]) {
            let (name, parameters) = parameters(of: member)
            let remaining = (parameters["r"] ?? parameters["remaining"]).flatMap(number)
            let reset = (parameters["t"] ?? parameters["reset"]).flatMap(number)
            if let remaining, let reset {
                let limit = (parameters["limit"] ?? parameters["q"]).flatMap(number).map(whole) ?? quotas[name]
                result.append(AnnouncedRateLimit(remaining: whole(remaining), reset: .clampedSeconds(reset), limit: limit))
            } else {
                for (key, value) in parameters { if let value = number(value) { loose[key] = value } }
            }
        }
        if let remaining = loose["remaining"], let reset = loose["reset"] {
            result.append(
                AnnouncedRateLimit(
                    remaining: whole(remaining), reset: .clampedSeconds(reset), limit: loose["limit"].map(whole)))
        }
        return result
    }

    /// A list member's name (its bare item, unquoted, or empty) and its `key=value` parameters
    /// (keys lowercased, values unquoted).
    private static func parameters(of member: ArraySlice<UInt8>) -> (String, [String: String]) {
        var name = ""
        var parameters: [String: String] = [:]
        for (index, piece) in member.split(separator: 0x3B, omittingEmptySubsequences: true).enumerated() {
            let piece = HeaderBytes.trimmed(piece)
            guard let equals = piece.firstIndex(of: 0x3D) else {
                if index == 0 { name = String(decoding: HeaderBytes.unquoted(piece), as: UTF8.self) }
                continue
            }
            let key = String(decoding: HeaderBytes.trimmed(piece[..<equals]).map(HeaderBytes.lower), as: UTF8.self)
            let value = HeaderBytes.unquoted(HeaderBytes.trimmed(piece[(equals + 1)...]))
            parameters[key] = String(decoding: value, as: UTF8.self)
        }
        return (name, parameters)
    }

    /// A non-negative decimal number (`30`, `598.0`, `1470173023.123`); `nil` for anything else.
    private static func number(_ text: String) -> Double? {
        let bytes = HeaderBytes.trimmed(Array(text.utf8)[...])
        guard !bytes.isEmpty, bytes.count <= 32,
            bytes.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E }),
            bytes.first != 0x2E, bytes.filter({ $0 == 0x2E }).count <= 1,
            let value = Double(String(decoding: bytes, as: UTF8.self)), value.isFinite
        else { return nil }
        return value
    }

    /// A count: rounded down, at most `Int32.max`.
    private static func whole(_ value: Double) -> Int { Int(min(value.rounded(.down), Double(Int32.max))) }
}
