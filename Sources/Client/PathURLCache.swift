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
