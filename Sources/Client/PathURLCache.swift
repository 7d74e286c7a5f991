import ConveyorPipeline
import Foundation

/// The URLs one client has built for relative paths, so a path the app requests again skips
/// Foundation's URL parser.
///
/// Building a URL is a pure function of the client's base URL (fixed), the request's path and
/// its encoded query, so a cached URL is exactly the one building would make again. Parsing is
/// about half of a request's fixed overhead on Linux (BENCHMARKS.md), and apps request the
/// same few paths over and over. Only URLs that were built successfully are kept; absolute
/// paths are never cached.
///
/// The cache holds at most ``capacity`` entries. When it is full it starts over, so paths that
/// never repeat (`/movies/123`, `/movies/124`, …) cost one lookup and one insertion and cannot
/// grow memory, while the paths an app uses all the time are back after their next request.
/// (Evicting one arbitrary entry instead clusters a hash table's free slots and made lookups
/// ten times slower under such churn.)
final class PathURLCache: Sendable {
    struct Key: Hashable, Sendable {
        var path: String
        /// The encoded query parameters, `""` for none.
        var query: String

        /// Byte-wise, not `String`'s canonical equivalence: `"/caf\u{E9}"` and `"/cafe\u{301}"`
        /// are equal strings but encode to different URLs.
        static func == (lhs: Key, rhs: Key) -> Bool {
            sameBytes(lhs.path, rhs.path) && sameBytes(lhs.query, rhs.query)
        }

        private static func sameBytes(_ a: String, _ b: String) -> Bool {
            var a = a  // `withUTF8` makes a non-native string contiguous first
            var b = b
            return a.withUTF8 { a in
                b.withUTF8 { b in
                    guard a.count == b.count, let x = a.baseAddress, let y = b.baseAddress else { return a.count == b.count }
                    return memcmp(x, y, a.count) == 0
                }
            }
        }

        func hash(into hasher: inout Hasher) {
            Self.combineBytes(of: path, into: &hasher)
            Self.combineBytes(of: query, into: &hasher)
        }

        private static func combineBytes(of string: String, into hasher: inout Hasher) {
            var string = string  // `withUTF8` makes a non-native string contiguous first
            string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            hasher.combine(string.utf8.count)  // separates the path from the query
        }
    }

    /// Entries per client.
    static let capacity = 256

    private let entries = Locked<[Key: URL]>([:])

    /// The cached URL for `key`, if any.
    func url(for key: Key) -> URL? {
        entries.withLock { $0[key] }
    }

    /// Remembers a URL built for `key`.
    func store(_ url: URL, for key: Key) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = url
        }
    }

    /// How many URLs are cached (for tests).
    var count: Int { entries.withLock { $0.count } }
}
