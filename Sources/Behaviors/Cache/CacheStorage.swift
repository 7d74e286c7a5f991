/// Where ``CacheBehavior`` keeps responses: one ``CachedResponse`` per key (the cache makes the
/// key from the request's URL; what a request must match besides it travels in the entry).
///
/// Conveyor has two: ``MemoryCacheStorage`` (the default, a size-bounded LRU) and
/// ``DiskCacheStorage`` (files in a directory, kept across launches). A storage of your own must
/// be safe to call from many requests at once and must stay bounded; it may drop anything at any
/// time (a cache is allowed to forget). It never throws: a storage that cannot read or write
/// behaves as a miss.
///
/// ```swift
/// actor DictionaryStorage: CacheStorage {
///     var entries: [String: Data] = [:]
///     func entry(for key: String) -> CachedResponse? { entries[key].flatMap(CachedResponse.init(encoded:)) }
///     func store(_ entry: CachedResponse, for key: String) { entries[key] = entry.encoded() }
///     func removeEntry(for key: String) { entries[key] = nil }
///     func removeAll() { entries = [:] }
/// }
/// ```
public protocol CacheStorage: Sendable {
    /// The entry stored for a key, or `nil`.
    /// - Parameter key: The key.
    func entry(for key: String) async -> CachedResponse?
    /// Stores an entry, replacing the key's previous one. A storage may decline (an entry larger
    /// than its bound) and may evict others to make room.
    /// - Parameters:
    ///   - entry: The response to keep.
    ///   - key: The key.
    func store(_ entry: CachedResponse, for key: String) async
    /// Removes the key's entry, if any.
    /// - Parameter key: The key.
    func removeEntry(for key: String) async
    /// Removes every entry (on sign-out, say).
    func removeAll() async
}
