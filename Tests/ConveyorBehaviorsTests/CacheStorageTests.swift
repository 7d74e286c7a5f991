import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// The two storages: the memory LRU's byte bound, and the disk store's persistence, damage
/// handling, bound and what it never writes.
@Suite struct CacheStorageTests {
    let now = FakeNow()

    func entry(_ body: String, headers: HTTPHeaders = ["Cache-Control": "max-age=600"]) -> CachedResponse {
        CachedResponse(status: 200, headers: headers, body: Data(body.utf8), receivedAt: now.date)
    }

    // MARK: Memory

    @Test func theMemoryStorageEvictsTheLeastRecentlyUsedToStayUnderItsBound() async {
        let size = entry(String(repeating: "x", count: 1_000)).byteCount + 1  // + the key's one byte
        let storage = MemoryCacheStorage(maxBytes: 2 * size + size / 2)  // room for two
        await storage.store(entry(String(repeating: "a", count: 1_000)), for: "a")
        await storage.store(entry(String(repeating: "b", count: 1_000)), for: "b")
        _ = await storage.entry(for: "a")  // a is now the most recently used
        await storage.store(entry(String(repeating: "c", count: 1_000)), for: "c")
        #expect(await storage.entry(for: "b") == nil)
        #expect(await storage.entry(for: "a") != nil)
        #expect(await storage.entry(for: "c") != nil)
        #expect(storage.totalBytes <= storage.maxBytes && storage.count == 2)

        // Larger than the whole bound: not stored, and nothing else is evicted for it.
        await storage.store(entry(String(repeating: "z", count: 10_000)), for: "z")
        #expect(await storage.entry(for: "z") == nil && storage.count == 2)
        // Replacing a key does not count it twice.
        await storage.store(entry(String(repeating: "A", count: 1_000)), for: "a")
        #expect(storage.count == 2 && storage.totalBytes <= storage.maxBytes)
        await storage.removeAll()
        #expect(storage.count == 0 && storage.totalBytes == 0)
    }

    @Test func theMemoryStorageStaysBoundedUnderRandomChurn() async {
        var random = SplitMix64(state: 7)
        let storage = MemoryCacheStorage(maxBytes: 20_000)
        var model: [String] = []  // keys, least recently used first (a reference LRU)
        var sizes: [String: Int] = [:]
        for _ in 0..<3_000 {
            let key = "k\(random.next() % 40)"
            if random.next() % 3 == 0 {
                let hit = await storage.entry(for: key) != nil
                #expect(hit == model.contains(key))
                if hit { model.removeAll { $0 == key }; model.append(key) }
            } else {
                let value = entry(String(repeating: "v", count: Int(random.next() % 3_000)))
                let cost = value.byteCount + key.utf8.count
                await storage.store(value, for: key)
                model.removeAll { $0 == key }
                sizes[key] = cost
                if cost <= 20_000 {
                    while model.reduce(0, { $0 + (sizes[$1] ?? 0) }) + cost > 20_000 { model.removeFirst() }
                    model.append(key)
                }
            }
            #expect(storage.totalBytes <= 20_000)
            #expect(storage.count == model.count)
        }
    }

    // MARK: Disk

    @Test func theDiskStorageSurvivesANewInstanceAndANewClient() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let mock = MockTransport(baseURL: apiURL)
        mock.enqueue(.text("kept", headers: ["Cache-Control": "max-age=600", "ETag": "\"k\""]))
        _ = try await cacheClient(mock, now: now, storage: DiskCacheStorage(directory: directory)).send(Request<String>(path: "/k"))

        let log = OutcomeLog()
        let second = cacheClient(mock, now: now, storage: DiskCacheStorage(directory: directory), log: log)
        now.advance(10)
        let response = try await second.send(Request<HTTPResponse>(path: "/k"))
        #expect(String(decoding: response.body, as: UTF8.self) == "kept")
        #expect(response.headers["ETag"] == "\"k\"" && response.headers["Age"] == "10")
        #expect(mock.requests.count == 1 && log.last == .hit)
    }

    @Test func aDamagedFileIsAMissAndIsDeleted() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = entry("a body that is long enough to cut somewhere in the middle")
        let encoded = good.encoded()
        var flipped = encoded
        flipped[flipped.count / 2] ^= 0x01
        var otherVersion = encoded
        otherVersion[4] = 99
        let damages: [(String, Data)] = [
            ("truncated", encoded.prefix(encoded.count - 5)), ("half", encoded.prefix(encoded.count / 2)),
            ("empty", Data()), ("garbage", Data("not a cache file at all, just text".utf8)),
            ("bit flip", flipped), ("another version", otherVersion),
        ]
        for (name, bytes) in damages {
            let storage = DiskCacheStorage(directory: directory)
            await storage.store(good, for: name)
            let file = storage.fileURL(for: name)
            try bytes.write(to: file)
            #expect(await storage.entry(for: name) == nil, "\(name)")
            #expect(!FileManager.default.fileExists(atPath: file.path), "\(name) was not deleted")
            // A new instance that finds a damaged file at start treats it the same way.
            await storage.store(good, for: name)
            try bytes.write(to: file)
            #expect(await DiskCacheStorage(directory: directory).entry(for: name) == nil)
        }
        // And an intact file still reads back.
        let storage = DiskCacheStorage(directory: directory)
        await storage.store(good, for: "intact")
        #expect(await DiskCacheStorage(directory: directory).entry(for: "intact") == good)
    }

    @Test func theDiskStorageStaysUnderItsBoundEvictingTheLeastRecentlyUsed() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let size = entry(String(repeating: "x", count: 2_000)).encoded().count
        let storage = DiskCacheStorage(directory: directory, maxBytes: 3 * size)
        for key in ["a", "b", "c"] {
            await storage.store(entry(String(repeating: "x", count: 2_000)), for: key)
        }
        _ = await storage.entry(for: "a")
        await storage.store(entry(String(repeating: "x", count: 2_000)), for: "d")
        #expect(await storage.entry(for: "b") == nil)
        #expect(await storage.entry(for: "a") != nil)
        #expect(directorySize(directory) <= 3 * size)
        // Too large for the bound: not written.
        await storage.store(entry(String(repeating: "x", count: 4 * size)), for: "huge")
        #expect(!FileManager.default.fileExists(atPath: storage.fileURL(for: "huge").path))
        // A smaller bound applies to what a new instance finds.
        let smaller = DiskCacheStorage(directory: directory, maxBytes: size)
        #expect(await smaller.knownBytes <= size)
        #expect(directorySize(directory) <= size)
        await smaller.removeAll()
        #expect(directorySize(directory) == 0)
    }

    @Test func theDiskNeverHoldsACredentialOrASetCookie() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let mock = MockTransport(baseURL: apiURL)
        mock.enqueue(
            .text(
                "body", headers: ["Cache-Control": "private, max-age=600", "Vary": "Authorization, Cookie", "Set-Cookie": "sid=COOKIE-SECRET-1",
                    "X-Auth-Token": "HEADER-SECRET-2"]))
        let client = cacheClient(mock, now: now, storage: DiskCacheStorage(directory: directory))
        _ = try await client.send(
            Request<String>(path: "/me", headers: ["Authorization": "Bearer TOKEN-SECRET-3", "Cookie": "sid=COOKIE-SECRET-4"]))
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        #expect(files.count == 1)
        let bytes = try files.map { try Data(contentsOf: $0) }.reduce(Data(), +)
        for secret in ["COOKIE-SECRET-1", "HEADER-SECRET-2", "TOKEN-SECRET-3", "COOKIE-SECRET-4", "/me"] {
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret) was written to disk")
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: files[0].path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        // And the entry still serves the same credentials.
        let again = try await client.send(
            Request<String>(path: "/me", headers: ["Authorization": "Bearer TOKEN-SECRET-3", "Cookie": "sid=COOKIE-SECRET-4"]))
        #expect(again == "body" && mock.requests.count == 1)
    }

    @Test func aBadDirectoryMakesEveryCallAMissNeverACrash() async throws {
        let file = temporaryDirectory().appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        let storage = DiskCacheStorage(directory: file.appendingPathComponent("cache"))  // under a file
        await storage.store(entry("x"), for: "k")
        #expect(await storage.entry(for: "k") == nil)
        await storage.removeAll()
    }

    func directorySize(_ directory: URL) -> Int {
        let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        return files.reduce(0) { $0 + ((try? Data(contentsOf: $1).count) ?? 0) }
    }
}
