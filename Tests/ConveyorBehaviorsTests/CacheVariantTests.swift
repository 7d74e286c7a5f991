import ConveyorPipeline
import ConveyorTesting
import Foundation
import Testing

@testable import ConveyorBehaviors

/// Private answers kept per identity (a variant key per identity of a URL): what Docs/Caching.md
/// promises in "Credentials" and "A cache shared by a fleet", on both storages that keep variants,
/// with a `MockTransport` and an injected clock.
@Suite struct CacheVariantTests {
    let mock = MockTransport(baseURL: apiURL)
    let now = FakeNow()
    let log = OutcomeLog()

    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case memory, disk
        var testDescription: String { rawValue }
        func storage(_ directory: URL = temporaryDirectory()) -> any CacheStorage {
            switch self {
            case .memory: MemoryCacheStorage()
            case .disk: DiskCacheStorage(directory: directory)
            }
        }
    }

    func get(_ client: NetworkClient, _ path: String = "/inbox", token: String? = nil) async throws -> String {
        var headers: HTTPHeaders = [:]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        let response = try await client.send(Request<HTTPResponse>(path: path, headers: headers))
        return String(decoding: response.body, as: UTF8.self)
    }

    static let privately: HTTPHeaders = ["Cache-Control": "private, max-age=600"]

    // MARK: - Identities side by side

    @Test(arguments: Kind.allCases) func privateAnswersOfTwoIdentitiesLiveSideBySide(_ kind: Kind) async throws {
        let client = cacheClient(mock, now: now, storage: kind.storage(), log: log)
        mock.enqueue(.text("a's inbox", headers: Self.privately), .text("b's inbox", headers: Self.privately))
        #expect(try await get(client, token: "a") == "a's inbox")
        #expect(try await get(client, token: "b") == "b's inbox")
        // A, B, A: before variants, B's answer replaced A's and the third request went out.
        #expect(try await get(client, token: "a") == "a's inbox")
        #expect(try await get(client, token: "b") == "b's inbox")
        #expect(mock.requests.count == 2 && log.all == [.miss, .miss, .hit, .hit])
        // No credentials: neither private answer.
        mock.enqueue(.text("anonymous"))
        #expect(try await get(client) == "anonymous" && mock.requests.count == 3)
    }

    @Test func aStorageWithoutVariantsKeepsOneEntryPerURLAsBefore() async throws {
        let client = cacheClient(mock, now: now, storage: OneEntryPerURL(), log: log)
        mock.enqueue(
            .text("a's inbox", headers: Self.privately), .text("b's inbox", headers: Self.privately),
            .text("a's again", headers: Self.privately))
        _ = try await get(client, token: "a")
        _ = try await get(client, token: "b")
        #expect(try await get(client, token: "a") == "a's again" && mock.requests.count == 3)
    }

    @Test(arguments: Kind.allCases) func oneLookupFindsTheOwnVariantOrElseTheSharedAnswer(_ kind: Kind) async throws {
        let storage = CountingStorage(kind.storage())
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        mock.enqueue(.text("public", headers: ["Cache-Control": "public, max-age=600"]))
        mock.enqueue(.text("a's", headers: Self.privately))
        #expect(try await get(client, "/shared", token: "a") == "public")
        #expect(try await get(client, "/shared", token: "b") == "public")  // a shared answer, via b's variant key
        #expect(try await get(client, "/mine", token: "a") == "a's")
        mock.enqueue(.text("b's", headers: Self.privately))
        #expect(try await get(client, "/mine", token: "b") == "b's")
        #expect(storage.lookups == 4, "one lookup per request")
    }

    @Test(arguments: Kind.allCases) func anUnsafeMethodRemovesTheAnswersOfEveryIdentity(_ kind: Kind) async throws {
        let client = cacheClient(mock, now: now, storage: kind.storage(), log: log)
        for who in ["a", "b", "c"] { mock.enqueue(.text("\(who) v1", headers: Self.privately)) }
        for who in ["a", "b", "c"] { _ = try await get(client, token: who) }
        for who in ["a", "b"] { #expect(try await get(client, token: who) == "\(who) v1") }
        // c changes the inbox; a's and b's answers are gone too (and c's own).
        mock.enqueue(.text("posted"))
        _ = try await client.send(Request<HTTPResponse>(method: .post, path: "/inbox", headers: ["Authorization": "Bearer c"]))
        for who in ["a", "b", "c"] { mock.enqueue(.text("\(who) v2", headers: Self.privately)) }
        for who in ["a", "b", "c"] { #expect(try await get(client, token: who) == "\(who) v2") }

        // A same-origin Location of a PUT removes that URL's answers for every identity too.
        for who in ["a", "b"] { mock.enqueue(.text("\(who) item", headers: Self.privately)) }
        for who in ["a", "b"] { _ = try await get(client, "/items/1", token: who) }
        mock.enqueue(.text("put", headers: ["Location": "/v1/items/1"]))
        _ = try await client.send(Request<HTTPResponse>(method: .put, path: "/items", headers: ["Authorization": "Bearer c"]))
        for who in ["a", "b"] { mock.enqueue(.text("\(who) item v2", headers: Self.privately)) }
        for who in ["a", "b"] { #expect(try await get(client, "/items/1", token: who) == "\(who) item v2") }
    }

    @Test func aDiskVariantOneInstanceWroteIsRemovedByAnotherSharingTheDirectory() async throws {
        let directory = temporaryDirectory()
        let first = DiskCacheStorage(directory: directory)
        let second = DiskCacheStorage(directory: directory)
        let writer = cacheClient(mock, now: now, storage: first)
        let remover = cacheClient(mock, now: now, storage: second)
        mock.enqueue(.text("a's", headers: Self.privately))
        _ = try await get(writer, token: "a")
        mock.enqueue(.text("posted"))
        _ = try await remover.send(Request<HTTPResponse>(method: .delete, path: "/inbox"))
        mock.enqueue(.text("a's again", headers: Self.privately))
        #expect(try await get(writer, token: "a") == "a's again")
    }

    // MARK: - Accounts

    enum UserID: RequestContextKey { static let defaultValue: String? = nil }

    @Test func anAccountKeepsItsPrivateAnswersWhenItsTokenChanges() async throws {
        let asked = Locked(0)
        let client = NetworkClient(baseURL: apiURL, transport: mock) {
            log
            CacheBehavior(storage: MemoryCacheStorage(), now: now.function, account: { _, context in
                asked.withLock { $0 += 1 }
                return context[UserID.self]
            })
        }
        func get(_ token: String?, as user: String?) async throws -> String {
            var request = Request<HTTPResponse>(path: "/me")
            if let token { request.headers["Authorization"] = "Bearer \(token)" }
            if let user { request = request.setting(UserID.self, to: user) }
            return String(decoding: try await client.send(request).body, as: UTF8.self)
        }
        mock.enqueue(.text("user 42", headers: Self.privately), .text("user 43", headers: Self.privately))
        #expect(try await get("token-1", as: "42") == "user 42")
        #expect(try await get("token-2", as: "42") == "user 42")  // refreshed token, same account: a hit
        #expect(try await get("token-3", as: "43") == "user 43")
        #expect(mock.requests.count == 2)
        // An account is never a credentials' identity, nor a request without credentials one.
        mock.enqueue(.text("token-1 unnamed", headers: Self.privately), .text("nobody"))
        #expect(try await get("token-1", as: nil) == "token-1 unnamed")
        let before = asked.withLock { $0 }
        #expect(try await get(nil, as: "42") == "nobody")
        #expect(asked.withLock { $0 } == before, "the account is never asked for a request without credentials")
    }

    // MARK: - Digests

    @Test func theKeyedDigestIsHMACSHA256() {
        // RFC 4231, test cases 2 and 6 (a key longer than a block).
        #expect(SHA256.hexString(SHA256.hmac(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)))
            == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        let long = [UInt8](repeating: 0xaa, count: 131)
        #expect(SHA256.hexString(SHA256.hmac(key: long, message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
            == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        let keyed = CacheCredentialDigest.keyed(Array("0123456789abcdef".utf8))
        let other = CacheCredentialDigest.keyed(Array("0123456789abcdeF".utf8))
        #expect(keyed.digest("authorization:Bearer a").hasPrefix("hmac:"))
        #expect(keyed.digest("x") != other.digest("x") && keyed.digest("x") != CacheCredentialDigest.sha256.digest("x"))
    }

    @Test func aKeyedStorageHoldsNoDigestAGuessCouldConfirm() async throws {
        let storage = Reading(MemoryCacheStorage(), digest: .keyed(Array("fleet-secret-0123456789".utf8)))
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        var varied = Self.privately
        varied["Vary"] = "Authorization"
        mock.enqueue(.text("a's", headers: varied), .text("public", headers: ["Cache-Control": "public, max-age=60"]))
        _ = try await get(client, token: "guessable")
        _ = try await get(client, "/open", token: "guessable")
        // What a reader who guessed the token computes, unkeyed:
        let guess = SHA256.hex("authorization:Bearer guessable")
        let entries = storage.stored.withLock { $0 }
        #expect(entries.count == 2)
        for (key, entry) in entries {
            let text = key + entry.credentials + entry.varyValues.map { $0.value ?? "" }.joined()
            #expect(!text.contains(guess) && !text.contains(SHA256.hex("Bearer guessable")) && !text.contains("guessable"))
            #expect(entry.credentials.contains("hmac:"))
        }
        #expect(entries.contains { $0.value.varyValues.contains { $0.value?.hasPrefix("hmac:") == true } })
        // The same client finds both again.
        let again = try await get(client, token: "guessable")
        let shared = try await get(client, "/open", token: "other")
        #expect(again == "a's" && shared == "public")
        #expect(mock.requests.count == 2)
    }

    @Test func aStorageThatKeepsNoDigestStoresNoPrivateAnswerAndSharesWithoutTheFetcher() async throws {
        let storage = Reading(MemoryCacheStorage(), digest: .none)
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        mock.enqueue(.text("a's", headers: Self.privately), .text("a's again", headers: Self.privately))
        #expect(try await get(client, token: "a") == "a's")
        #expect(try await get(client, token: "a") == "a's again")
        var varied: HTTPHeaders = ["Cache-Control": "public, max-age=60", "Vary": "Authorization"]
        mock.enqueue(.text("varied", headers: varied))
        _ = try await get(client, "/varied", token: "a")
        varied["Vary"] = nil
        mock.enqueue(.text("public", headers: ["Cache-Control": "public, max-age=600, s-maxage=60"]))
        _ = try await get(client, "/open", token: "a")
        let entries = storage.stored.withLock { $0 }
        #expect(entries.count == 1 && entries.values.first?.credentials == "*", "\(entries.values.map(\.credentials))")
        // Its fetcher is not known: everyone, a too, reuses it by s-maxage (60 s), not max-age.
        now.advance(61)
        mock.enqueue(.text("public again", headers: ["Cache-Control": "public, max-age=600, s-maxage=60"]))
        #expect(try await get(client, "/open", token: "a") == "public again")
    }

    // MARK: - Bounds

    @Test func variantsStayWithinTheBoundAndTheirIndexFollowsEvictions() async throws {
        let storage = MemoryCacheStorage(maxBytes: 64 * 1024)
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        for user in 0..<1_000 {
            mock.enqueue(.text(String(repeating: "x", count: 500) + "\(user)", headers: Self.privately))
            _ = try await get(client, token: "user-\(user)")
            #expect(storage.totalBytes <= 64 * 1024)
        }
        let index = storage.variantIndex
        #expect(index.urls == 1 && index.keys == storage.count && storage.count < 1_000)
        // The most recent users still hit.
        let latest = try await get(client, token: "user-999")
        #expect(latest.hasSuffix("999") && mock.requests.count == 1_000)
        await storage.removeVariants(of: "https://api.test/v1/inbox")
        #expect(storage.count == 0 && storage.variantIndex.keys == 0)
    }
}

/// A storage that keeps one entry per URL (a storage written before variants).
private actor OneEntryPerURL: CacheStorage {
    var entries: [String: CachedResponse] = [:]
    func entry(for key: String) -> CachedResponse? { entries[key] }
    func store(_ entry: CachedResponse, for key: String) { entries[key] = entry }
    func removeEntry(for key: String) { entries[key] = nil }
    func removeAll() { entries = [:] }
}

/// Counts the lookups of the storage it wraps.
private final class CountingStorage: CacheStorage {
    let base: any CacheStorage
    private let count = Locked(0)
    var lookups: Int { count.withLock { $0 } }
    init(_ base: any CacheStorage) { self.base = base }
    func entry(for key: String) async -> CachedResponse? {
        count.withLock { $0 += 1 }
        return await base.entry(for: key)
    }
    func store(_ entry: CachedResponse, for key: String) async { await base.store(entry, for: key) }
    func removeEntry(for key: String) async { await base.removeEntry(for: key) }
    func removeAll() async { await base.removeAll() }
    var keepsVariants: Bool { base.keepsVariants }
    func removeVariants(of key: String) async { await base.removeVariants(of: key) }
}

/// Keeps what is stored where a test can read it, asking for a given digest.
private final class Reading: CacheStorage {
    let base: MemoryCacheStorage
    let credentialDigest: CacheCredentialDigest
    let stored = Locked<[String: CachedResponse]>([:])
    init(_ base: MemoryCacheStorage, digest: CacheCredentialDigest) {
        self.base = base
        credentialDigest = digest
    }
    func entry(for key: String) async -> CachedResponse? { await base.entry(for: key) }
    func store(_ entry: CachedResponse, for key: String) async {
        stored.withLock { $0[key] = entry }
        await base.store(entry, for: key)
    }
    func removeEntry(for key: String) async {
        _ = stored.withLock { $0.removeValue(forKey: key) }
        await base.removeEntry(for: key)
    }
    func removeAll() async { await base.removeAll() }
    var keepsVariants: Bool { true }
    func removeVariants(of key: String) async { await base.removeVariants(of: key) }
}
