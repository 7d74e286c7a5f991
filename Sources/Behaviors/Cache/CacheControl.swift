import ConveyorPipeline

/// The `Cache-Control` directives the cache acts on (RFC 9111 §5.2), from every `Cache-Control`
/// field of a request or a response. Unknown directives are ignored; names compare
/// case-insensitively; a quoted value may contain commas.
struct CacheControl: Sendable, Equatable {
    /// `max-age`, in seconds. An invalid value (`max-age=soon`) reads as 0: stale, the safe side.
    var maxAge: Int?
    /// `s-maxage` (a shared cache's lifetime; here only a permission to store, RFC 9111 §3.5).
    var sharedMaxAge: Int?
    /// `min-fresh` (request): the response must stay fresh this many more seconds.
    var minFresh: Int?
    var noStore = false
    /// `no-cache`, qualified or not (the qualified form is treated as the unqualified one).
    var noCache = false
    var isPublic = false
    var isPrivate = false
    var mustRevalidate = false
    /// `only-if-cached` (request): answer from storage or with 504.
    var onlyIfCached = false

    /// The largest delta-seconds RFC 9111 §1.2.2 asks a cache to keep (2^31).
    static let maximumDelta = 2_147_483_648

    init() {}

    /// The directives of every `Cache-Control` field in `headers`.
    init(_ headers: HTTPHeaders) {
        for field in headers where HTTPHeaders.namesEqual(field.name, "Cache-Control") { parse(field.value) }
    }

    /// The directives of one field value.
    init(parsing value: String) { parse(value) }

    private mutating func parse(_ value: String) {
        for directive in Self.split(value) {
            let parts = directive.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingSpaces.lowercased()
            let argument = parts.count == 2 ? Self.unquote(parts[1].trimmingSpaces) : nil
            switch name {
            case "max-age": maxAge = Self.merge(maxAge, Self.seconds(argument))
            case "s-maxage": sharedMaxAge = Self.merge(sharedMaxAge, Self.seconds(argument))
            case "min-fresh": minFresh = max(minFresh ?? 0, Self.seconds(argument))
            case "no-store": noStore = true
            case "no-cache": noCache = true
            case "public": isPublic = true
            case "private": isPrivate = true
            case "must-revalidate": mustRevalidate = true
            case "only-if-cached": onlyIfCached = true
            default: continue
            }
        }
    }

    /// Two values for one lifetime: the shorter wins (RFC 9111 §4.2.1 allows treating the
    /// response as stale; the shorter is the closer safe choice).
    private static func merge(_ old: Int?, _ new: Int) -> Int { old.map { min($0, new) } ?? new }

    /// delta-seconds: digits only; too large is 2^31; missing or invalid is 0.
    private static func seconds(_ argument: String?) -> Int {
        guard let argument, !argument.isEmpty,
            argument.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return 0 }
        return min(Int(argument.prefix(11)) ?? maximumDelta, maximumDelta)
    }

    private static func unquote(_ text: Substring) -> String {
        guard text.count >= 2, text.first == "\"", text.last == "\"" else { return String(text) }
        return String(text.dropFirst().dropLast())
    }

    /// Splits at commas outside quoted strings.
    static func split(_ value: String) -> [Substring] {
        var parts: [Substring] = []
        var start = value.startIndex
        var quoted = false
        var index = value.startIndex
        while index < value.endIndex {
            let character = value[index]
            if character == "\"" { quoted.toggle() } else if character == ",", !quoted {
                parts.append(value[start..<index])
                start = value.index(after: index)
            }
            index = value.index(after: index)
        }
        parts.append(value[start...])
        return parts.filter { !$0.trimmingSpaces.isEmpty }
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaces: Substring {
        let isText: (Character) -> Bool = { $0 != " " && $0 != "\t" }
        guard let first = firstIndex(where: isText), let last = lastIndex(where: isText) else { return self[endIndex...] }
        return self[first...last]
    }
}
