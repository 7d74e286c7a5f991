import ConveyorPipeline

/// A ``CacheStorage`` in memory: least recently used entries are evicted first, and the total
/// ``CachedResponse/byteCount`` never exceeds `maxBytes`. An entry larger than the bound is not
/// stored. Nothing survives the process.
///
/// ```swift
/// let cache = CacheBehavior(storage: MemoryCacheStorage(maxBytes: 20 * 1024 * 1024))
/// ```
public final class MemoryCacheStorage: CacheStorage {
    /// The most bytes the entries may take together.
    package let maxBytes: Int
    private let state: Locked<LRUList>

    /// Creates an empty storage.
    /// - Parameter maxBytes: The most bytes the entries may take together; 10 MiB by default.
    public init(maxBytes: Int = 10 * 1024 * 1024) {
        self.maxBytes = max(0, maxBytes)
        state = Locked(LRUList())
    }

    /// The entry for a key, which becomes the most recently used. For a variant key, the
    /// variant's entry or, when it has none, the URL's.
    public func entry(for key: String) async -> CachedResponse? {
        state.withLock { list in
            if let found = list.get(key) { return found }
            guard let url = CacheBehavior.urlKey(of: key) else { return nil }
            return list.get(String(url))
        }
    }

    /// Stores an entry, evicting the least recently used ones until it fits.
    public func store(_ entry: CachedResponse, for key: String) async {
        let cost = entry.byteCount + key.utf8.count
        let limit = maxBytes
        state.withLock { list in
            list.remove(key)
            guard cost <= limit else { return }
            while list.totalCost + cost > limit, list.removeLeastRecentlyUsed() {}
            list.insert(key, entry, cost: cost)
        }
    }

    /// Removes a key's entry.
    public func removeEntry(for key: String) async {
        state.withLock { $0.remove(key) }
    }

    /// Keeps a private answer per identity: `true`.
    public var keepsVariants: Bool { true }

    /// Removes the URL's entry and every variant of it.
    /// - Parameter key: A URL's key.
    public func removeVariants(of key: String) async {
        state.withLock { list in
            list.remove(key)
            for variant in list.variants[key] ?? [] { list.remove(variant) }
        }
    }

    /// Removes every entry.
    public func removeAll() async {
        state.withLock { $0 = LRUList() }
    }

    /// How many entries are stored.
    package var count: Int { state.withLock { $0.index.count } }
    /// How many URLs have variants, and how many variant keys are indexed (for tests: the index
    /// follows the entries, evictions included).
    package var variantIndex: (urls: Int, keys: Int) {
        state.withLock { list in (list.variants.count, list.variants.values.reduce(0) { $0 + $1.count }) }
    }
    /// The entries' total cost in bytes.
    package var totalBytes: Int { state.withLock { $0.totalCost } }
}

/// A doubly linked list over an array of slots plus a key index: every operation is O(1).
struct LRUList {
    struct Node {
        var key: String
        var entry: CachedResponse
        var cost: Int
        var newer: Int
        var older: Int
    }

    private var slots: [Node?] = []
    private var free: [Int] = []
    private(set) var index: [String: Int] = [:]
    /// The variant keys stored, by their URL's key.
    private(set) var variants: [String: Set<String>] = [:]
    /// Most and least recently used slots; -1 when empty.
    private var newest = -1
    private var oldest = -1
    private(set) var totalCost = 0

    mutating func get(_ key: String) -> CachedResponse? {
        guard let slot = index[key], let node = slots[slot] else { return nil }
        unlink(slot)
        linkAsNewest(slot)
        return node.entry
    }

    mutating func insert(_ key: String, _ entry: CachedResponse, cost: Int) {
        let node = Node(key: key, entry: entry, cost: cost, newer: -1, older: -1)
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            slots[slot] = node
        } else {
            slot = slots.count
            slots.append(node)
        }
        index[key] = slot
        if let url = CacheBehavior.urlKey(of: key) { variants[String(url), default: []].insert(key) }
        totalCost += cost
        linkAsNewest(slot)
    }

    mutating func remove(_ key: String) {
        guard let slot = index.removeValue(forKey: key) else { return }
        forgetVariant(key)
        release(slot)
    }

    private mutating func forgetVariant(_ key: String) {
        guard let url = CacheBehavior.urlKey(of: key).map(String.init) else { return }
        variants[url]?.remove(key)
        if variants[url]?.isEmpty == true { variants[url] = nil }
    }

    /// Removes the oldest entry; `false` when there is none.
    mutating func removeLeastRecentlyUsed() -> Bool {
        guard oldest >= 0, let node = slots[oldest] else { return false }
        index[node.key] = nil
        forgetVariant(node.key)
        release(oldest)
        return true
    }

    private mutating func release(_ slot: Int) {
        unlink(slot)
        totalCost -= slots[slot]?.cost ?? 0
        slots[slot] = nil
        free.append(slot)
    }

    private mutating func unlink(_ slot: Int) {
        guard let node = slots[slot] else { return }
        if node.newer >= 0 { slots[node.newer]?.older = node.older } else { newest = node.older }
        if node.older >= 0 { slots[node.older]?.newer = node.newer } else { oldest = node.newer }
        slots[slot]?.newer = -1
        slots[slot]?.older = -1
    }

    private mutating func linkAsNewest(_ slot: Int) {
        slots[slot]?.older = newest
        slots[slot]?.newer = -1
        if newest >= 0 { slots[newest]?.newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}
