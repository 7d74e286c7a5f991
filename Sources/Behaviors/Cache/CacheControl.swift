import ConveyorPipeline

/// The `Cache-Control` directives the cache acts on (RFC 9111 §5.2), from every `Cache-Control`
/// field of a request or a response. Unknown directives are ignored; names compare
/// case-insensitively; a quoted value may contain commas.
package struct CacheControl: Sendable, Equatable {
    /// `max-age`, in seconds. An invalid value (`max-age=soon`) reads as 0: stale, the safe side.
    package var maxAge: Int?
    /// `s-maxage`: a permission to store and share (RFC 9111 §3.5), and the lifetime by which
    /// other credentials than the fetcher's reuse a shared answer (§5.2.2.10).
    package var sharedMaxAge: Int?
    /// `min-fresh` (request): the response must stay fresh this many more seconds.
    package var minFresh: Int?
    var noStore = false
    /// `no-cache`, qualified or not (the qualified form is treated as the unqualified one).
    var noCache = false
    var isPublic = false
    var isPrivate = false
    var mustRevalidate = false
    /// `only-if-cached` (request): answer from storage or with 504.
    var onlyIfCached = false

    /// `public`, or an `s-maxage`, without `private`: the server lets any cache give the response
    /// to anyone (RFC 9111 §3.5), so it is not tied to the credentials that fetched it.
    var allowsSharing: Bool { (isPublic || sharedMaxAge != nil) && !isPrivate }

    /// The largest delta-seconds RFC 9111 §1.2.2 asks a cache to keep (2^31).
    package static let maximumDelta = 2_147_483_648

    init() {}

    /// The directives of every `Cache-Control` field in `headers`.
    init(_ headers: HTTPHeaders) {
        for field in headers where HTTPHeaders.namesEqual(field.name, "Cache-Control") { parse(field.value) }
    }

    /// The directives of one field value.
    package init(parsing value: String) { parse(value) }

    private mutating func parse(_ value: String) {
        do {
            for directive in HeaderBytes.listMembers(Array(value.utf8)[...]) {
                let equals = directive.firstIndex(of: UInt8(ascii: "="))
                let name = HeaderBytes.trimmed(directive[..<(equals ?? directive.endIndex)])
                let argument = equals.map { HeaderBytes.unquoted(HeaderBytes.trimmed(directive[($0 + 1)...])) }
                if HeaderBytes.equalsIgnoringCase(name, "max-age") {
                    maxAge = Self.merge(maxAge, Self.seconds(argument))
                } else if HeaderBytes.equalsIgnoringCase(name, "s-maxage") {
                    sharedMaxAge = Self.merge(sharedMaxAge, Self.seconds(argument))
                } else if HeaderBytes.equalsIgnoringCase(name, "min-fresh") {
                    minFresh = max(minFresh ?? 0, Self.seconds(argument))
                } else if HeaderBytes.equalsIgnoringCase(name, "no-store") {
                    noStore = true
                } else if HeaderBytes.equalsIgnoringCase(name, "no-cache") {
                    noCache = true
                } else if HeaderBytes.equalsIgnoringCase(name, "public") {
                    isPublic = true
                } else if HeaderBytes.equalsIgnoringCase(name, "private") {
                    isPrivate = true
                } else if HeaderBytes.equalsIgnoringCase(name, "must-revalidate") {
                    mustRevalidate = true
                } else if HeaderBytes.equalsIgnoringCase(name, "only-if-cached") {
                    onlyIfCached = true
                }
            }
        }
    }

    /// Two values for one lifetime: the shorter wins (RFC 9111 §4.2.1 allows treating the
    /// response as stale; the shorter is the closer safe choice).
    private static func merge(_ old: Int?, _ new: Int) -> Int { old.map { min($0, new) } ?? new }

    /// delta-seconds: digits only; too large is 2^31; missing or invalid is 0.
    private static func seconds(_ argument: ArraySlice<UInt8>?) -> Int {
        argument.flatMap { HeaderBytes.digits($0, cap: maximumDelta) } ?? 0
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
