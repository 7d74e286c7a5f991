public import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A ``CacheStorage`` of files in a directory: entries survive a new client and a new launch.
///
/// ```swift
/// let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0]
/// let storage = DiskCacheStorage(directory: caches.appendingPathComponent("api-cache"))
/// let client = NetworkClient(baseURL: api) { CacheBehavior(storage: storage) }
/// ```
///
/// - One file per entry, named by the SHA-256 of its key (the URL is not readable from the name),
///   in ``CachedResponse``'s versioned format with a checksum. Files are created readable by the
///   owner only (0600).
/// - A write goes to a temporary file that is then renamed over the entry, so a reader (this
///   process or another) sees the old file or the new one, never half of one.
/// - A file that is truncated, damaged, of another format version or larger than the bound is a
///   miss and is deleted. Nothing in a file can make it crash.
/// - The files together stay under `maxBytes`: the least recently used (by this process, and by
///   modification date for files found at start) are deleted first. A hit touches the file's date.
/// - Two processes may share a directory: each sees the other's files (a lookup reads the file,
///   whether or not it knew of it), a rename never exposes a partial file, and an entry one
///   removes is a miss for the other. Each counts the bound over the files it knows, so until
///   one of them restarts the directory may hold up to the sum of their bounds.
/// - A directory that cannot be created or written makes every store a no-op and every lookup a miss.
public actor DiskCacheStorage: CacheStorage {
    /// The directory the files live in.
    package nonisolated let directory: URL
    /// The most bytes the files may take together.
    package nonisolated let maxBytes: Int

    private struct Record {
        var size: Int
        var lastUse: Date
    }

    /// File name → record; read from the directory on first use.
    private var records: [String: Record]?
    private var totalBytes = 0

    static let fileExtension = "cache"
    static let temporaryExtension = "tmp"
    /// A temporary file older than this is left over from a crash and is deleted at start.
    static let abandonedTemporaryAge: TimeInterval = 600

    /// Creates a storage over a directory, which is created when first needed. Nothing is read
    /// until the first call.
    /// - Parameters:
    ///   - directory: The directory; give each cache its own (files of other kinds in it are left alone).
    ///   - maxBytes: The most bytes the files may take together; 50 MiB by default.
    public init(directory: URL, maxBytes: Int = 50 * 1024 * 1024) {
        self.directory = directory
        self.maxBytes = max(0, maxBytes)
    }

    /// The entry for a key, read from its file; a damaged file is deleted. For a variant key, the
    /// variant's entry or, when it has none, the URL's.
    public func entry(for key: String) async -> CachedResponse? {
        loadIfNeeded()
        if let found = read(Self.fileName(for: key)) { return found }
        guard let url = CacheBehavior.urlKey(of: key) else { return nil }
        return read(Self.fileName(for: String(url)))
    }

    /// Keeps a private answer per identity (a file per variant): `true`.
    public nonisolated var keepsVariants: Bool { true }

    /// Deletes the URL's file and every variant's file, this process's and any other's.
    /// - Parameter key: A URL's key.
    public func removeVariants(of key: String) async {
        loadIfNeeded()
        delete(Self.fileName(for: key))
        let prefix = SHA256.hex(key) + "-"
        for file in listEntryFiles() where file.name.hasPrefix(prefix) { delete(file.name) }
    }

    private func read(_ name: String) -> CachedResponse? {
        let url = directory.appendingPathComponent(name)
        guard let size = fileSize(url) else {
            forget(name)
            return nil
        }
        guard size <= maxBytes, let data = try? Data(contentsOf: url), let entry = CachedResponse(encoded: data) else {
            delete(name)
            return nil
        }
        let now = Date()
        try? FileManager.default.setAttributes([.modificationDate: now], ofItemAtPath: url.path)
        remember(name, Record(size: data.count, lastUse: now))
        return entry
    }

    /// Writes an entry's file, deleting the least recently used files until it fits.
    public func store(_ entry: CachedResponse, for key: String) async {
        loadIfNeeded()
        let name = Self.fileName(for: key)
        let data = entry.encoded()
        guard data.count <= maxBytes else {
            delete(name)
            return
        }
        forget(name)
        evict(toFit: data.count)
        let temporary = directory.appendingPathComponent("\(UUID().uuidString).\(Self.temporaryExtension)")
        let created = FileManager.default.createFile(
            atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600])
        guard created, rename(temporary.path, directory.appendingPathComponent(name).path) == 0 else {
            try? FileManager.default.removeItem(at: temporary)
            return
        }
        remember(name, Record(size: data.count, lastUse: Date()))
    }

    /// Deletes a key's file.
    public func removeEntry(for key: String) async {
        loadIfNeeded()
        delete(Self.fileName(for: key))
    }

    /// Deletes every entry's file (other files in the directory are left alone).
    public func removeAll() async {
        loadIfNeeded()
        for name in listEntryFiles().map(\.name) { delete(name) }
        records = [:]
        totalBytes = 0
    }

    /// The total size of the files this storage knows of.
    package var knownBytes: Int {
        loadIfNeeded()
        return totalBytes
    }

    /// The entry file of a key (for tests that damage one).
    package nonisolated func fileURL(for key: String) -> URL { directory.appendingPathComponent(Self.fileName(for: key)) }

    /// A URL's file is named by the SHA-256 of its key; a variant's by that of its URL's key, `-`,
    /// and that of the variant key (so a URL's variants are found by name).
    static func fileName(for key: String) -> String {
        guard let url = CacheBehavior.urlKey(of: key) else { return "\(SHA256.hex(key)).\(fileExtension)" }
        return "\(SHA256.hex(String(url)))-\(SHA256.hex(key)).\(fileExtension)"
    }

    // MARK: - Index

    private func loadIfNeeded() {
        guard records == nil else { return }
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var found: [String: Record] = [:]
        var total = 0
        for file in listEntryFiles() {
            found[file.name] = Record(size: file.size, lastUse: file.date)
            total += file.size
        }
        records = found
        totalBytes = total
        removeAbandonedTemporaries()
        evict(toFit: 0)
    }

    private func remember(_ name: String, _ record: Record) {
        forget(name)
        records?[name] = record
        totalBytes += record.size
    }

    private func forget(_ name: String) {
        if let old = records?.removeValue(forKey: name) { totalBytes -= old.size }
    }

    private func delete(_ name: String) {
        forget(name)
        try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
    }

    /// Deletes least recently used files until `incoming` more bytes fit under the bound.
    private func evict(toFit incoming: Int) {
        guard totalBytes + incoming > maxBytes, let records else { return }
        for (name, _) in records.sorted(by: { $0.value.lastUse < $1.value.lastUse }) {
            guard totalBytes + incoming > maxBytes else { return }
            delete(name)
        }
    }

    private func listEntryFiles() -> [(name: String, size: Int, date: Date)] {
        let keys: [URLResourceKey] = [.fileSizeKey, .contentModificationDateKey, .isRegularFileKey]
        let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: keys)) ?? []
        return files.compactMap { url in
            guard url.pathExtension == Self.fileExtension, let values = try? url.resourceValues(forKeys: Set(keys)),
                values.isRegularFile == true
            else { return nil }
            return (url.lastPathComponent, values.fileSize ?? 0, values.contentModificationDate ?? .distantPast)
        }
    }

    private func removeAbandonedTemporaries() {
        let files = (try? FileManager.default.contentsOfDirectory(
            at: directory, includingPropertiesForKeys: [.contentModificationDateKey])) ?? []
        for url in files where url.pathExtension == Self.temporaryExtension {
            let date = (try? url.resourceValues(forKeys: [.contentModificationDateKey]))?.contentModificationDate
            if let date, Date().timeIntervalSince(date) > Self.abandonedTemporaryAge {
                try? FileManager.default.removeItem(at: url)
            }
        }
    }

    private func fileSize(_ url: URL) -> Int? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
            (attributes[.type] as? FileAttributeType) == .typeRegular
        else { return nil }
        return (attributes[.size] as? NSNumber)?.intValue
    }
}
