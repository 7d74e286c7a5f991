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
/// The cache is a table of ``capacity`` slots in pairs: a key may live in either slot of the
/// pair its hash names (FNV-1a over the key's bytes, a few instructions per byte). A key whose
/// pair is full replaces the entry in its first slot, so paths that never repeat (`/movies/123`,
/// `/movies/124`, …) cost one lookup and one store and cannot grow memory, while the paths an app
/// uses all the time are back after their next request. (A `Dictionary` that started over when full cost about 900 instructions per
/// hit, its `Hasher` 350 of them; this table about 500, most of it the lock, the hash and the
/// byte comparison.)
final class PathURLCache: Sendable {
    struct Key: Sendable {
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

        /// FNV-1a (64-bit) of the path's bytes, a separator, and the query's bytes.
        var hash: UInt64 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            Self.mix(path, into: &hash)
            hash = (hash ^ 0xFF) &* 0x100_0000_01b3  // 0xFF never occurs in UTF-8
            Self.mix(query, into: &hash)
            return hash
        }

        private static func mix(_ string: String, into hash: inout UInt64) {
            if string.isEmpty { return }  // most requests have no query
            var string = string  // `withUTF8` makes a non-native string contiguous first
            string.withUTF8 { bytes in
                for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            }
        }
    }

    /// Entries per client.
    static let capacity = 256

    private struct Entry: Sendable {
        let key: Key
        let url: URL
    }

    private let slots = Locked<[Entry?]>(Array(repeating: nil, count: PathURLCache.capacity))

    /// The first slot of `key`'s pair.
    private static func pair(of key: Key) -> Int {
        let hash = key.hash
        return Int(truncatingIfNeeded: (hash ^ (hash >> 32)) % UInt64(capacity / 2)) * 2
    }

    /// The cached URL for `key`, if any.
    func url(for key: Key) -> URL? {
        let first = Self.pair(of: key)
        return slots.withLock { slots in
            if let entry = slots[first], entry.key == key { return entry.url }
            if let entry = slots[first + 1], entry.key == key { return entry.url }
            return nil
        }
    }

    /// Remembers a URL built for `key`.
    func store(_ url: URL, for key: Key) {
        let first = Self.pair(of: key)
        slots.withLock { slots in
            let slot = slots[first] == nil || slots[first + 1] != nil ? first : first + 1
            slots[slot] = Entry(key: key, url: url)
        }
    }

    /// How many URLs are cached (for tests).
    var count: Int { slots.withLock { $0.reduce(0) { $1 == nil ? $0 : $0 + 1 } } }
}
