import ConveyorPipeline
import ConveyorTesting
import Foundation
import Testing

/// `CacheBehavior` alone, on a `MockTransport` and an injected clock: every rule of RFC 9111 it
/// claims, each test failing without its rule. `mock.requests` counts what reached the "server".
@Suite struct CacheBehaviorTests {
    let mock = MockTransport(baseURL: apiURL)
    let now = FakeNow()
    let log = OutcomeLog()

    func client(_ storage: any CacheStorage = MemoryCacheStorage()) -> NetworkClient {
        cacheClient(mock, now: now, storage: storage, log: log)
    }

    func get(_ client: NetworkClient, _ path: String = "/a", headers: HTTPHeaders = [:]) async throws -> HTTPResponse {
        try await client.send(Request<HTTPResponse>(path: path, headers: headers))
    }

    func text(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }

    // MARK: Freshness

    @Test func maxAgeIsFreshUntilItsLastSecondAndStaleAtIt() async throws {
        let client = client()
        mock.enqueue(.text("one", headers: ["Cache-Control": "max-age=60"]), .text("two"))
        #expect(text(try await get(client)) == "one")
        now.advance(59.9)
        let hit = try await get(client)
        #expect(text(hit) == "one" && mock.requests.count == 1)
        #expect(hit.headers["Age"] == "59")  // RFC 9111 §5.1
        #expect(hit.status == 200)
        now.advance(0.1)  // age 60 == max-age: stale (fresh only while lifetime > age)
        #expect(text(try await get(client)) == "two")
        #expect(mock.requests.count == 2)
        #expect(log.all == [.miss, .hit, .miss])
    }

    @Test func theAgeCountsTheDateAndAgeHeadersAndTheTimeInFlight() async throws {
        let client = client()
        // Generated 30 s ago (Date), so 30 s of its 60 are left.
        mock.enqueue(.text("dated", headers: ["Cache-Control": "max-age=60", "Date": httpDate(now.date.addingTimeInterval(-30))]))
        _ = try await get(client, "/dated")
        now.advance(29)
        #expect(try await get(client, "/dated").headers["Age"] == "59")
        now.advance(1)
        mock.enqueue(.text("new"))
        #expect(text(try await get(client, "/dated")) == "new")

        // An upstream cache held it 50 s (Age): 10 s left.
        mock.enqueue(.text("aged", headers: ["Cache-Control": "max-age=60", "Age": "50"]))
        _ = try await get(client, "/aged")
        now.advance(9)
        #expect(text(try await get(client, "/aged")) == "aged")
        now.advance(1)
        mock.enqueue(.text("new"))
        #expect(text(try await get(client, "/aged")) == "new")
    }

    @Test func expiresGivesTheLifetimeMaxAgeWinsAndAnInvalidExpiresIsStale() async throws {
        let client = client()
        let date = httpDate(now.date)
        mock.enqueue(.text("expires", headers: ["Date": date, "Expires": httpDate(now.date.addingTimeInterval(100))]))
        _ = try await get(client, "/e")
        now.advance(99)
        #expect(text(try await get(client, "/e")) == "expires")
        now.advance(1)
        mock.enqueue(.text("refetched"))
        #expect(text(try await get(client, "/e")) == "refetched")

        // max-age overrides Expires (RFC 9111 §5.3).
        mock.enqueue(.text("both", headers: ["Cache-Control": "max-age=10", "Expires": httpDate(now.date.addingTimeInterval(1000))]))
        _ = try await get(client, "/both")
        now.advance(10)
        mock.enqueue(.text("refetched"))
        #expect(text(try await get(client, "/both")) == "refetched")

        // `Expires: 0` is already expired: with no validator it is not even stored.
        mock.enqueue(.text("zero", headers: ["Expires": "0"]), .text("zero again"))
        _ = try await get(client, "/zero")
        #expect(text(try await get(client, "/zero")) == "zero again")
        #expect(mock.requests.count == 6)
    }

    @Test func noHeuristicFreshnessALastModifiedAloneIsRevalidatedEveryTime() async throws {
        let client = client()
        let modified = httpDate(now.date.addingTimeInterval(-86_400 * 365))
        mock.enqueue(.text("body", headers: ["Last-Modified": modified]), .status(304))
        _ = try await get(client)
        now.advance(1)
        let second = try await get(client)
        #expect(text(second) == "body" && second.status == 200)
        #expect(mock.requests.count == 2)
        #expect(mock.requests[1].headers["If-Modified-Since"] == modified)
        #expect(log.last == .revalidated)
    }

    @Test func aResponseWithNoLifetimeAndNoValidatorIsNotStored() async throws {
        let client = client()
        mock.enqueue(.text("one"), .text("two"))
        _ = try await get(client)
        #expect(text(try await get(client)) == "two")
        #expect(mock.requests[1].headers["If-None-Match"] == nil)
    }

    // MARK: no-store, no-cache, private, request directives

    @Test func noStoreInTheResponseOrTheRequestKeepsNothing() async throws {
        let storage = MemoryCacheStorage()
        let client = client(storage)
        mock.enqueue(.text("secret", headers: ["Cache-Control": "no-store, max-age=60"]))
        _ = try await get(client)
        #expect(storage.count == 0)
        mock.enqueue(.text("fine", headers: ["Cache-Control": "max-age=60"]))
        _ = try await get(client, headers: ["Cache-Control": "no-store"])
        #expect(storage.count == 0)
        #expect(log.all == [.miss, .bypassed])
    }

    @Test func noCacheInTheResponseRevalidatesEveryUse() async throws {
        let client = client()
        mock.enqueue(.text("v1", headers: ["Cache-Control": "no-cache, max-age=600", "ETag": "\"v1\""]), .status(304))
        _ = try await get(client)
        #expect(text(try await get(client)) == "v1")  // within max-age, still asked
        #expect(mock.requests.count == 2 && mock.requests[1].headers["If-None-Match"] == "\"v1\"")
    }

    @Test func privateResponsesAreStoredByThisPrivateCache() async throws {
        let client = client()
        mock.enqueue(.text("mine", headers: ["Cache-Control": "private, max-age=60"]))
        _ = try await get(client)
        #expect(text(try await get(client)) == "mine" && mock.requests.count == 1)
    }

    @Test func theRequestsNoCacheAndMaxAgeZeroRevalidateAFreshEntry() async throws {
        let client = client()
        mock.enqueue(.text("v1", headers: ["Cache-Control": "max-age=600", "ETag": "\"v1\""]), .status(304), .status(304))
        _ = try await get(client)
        _ = try await get(client, headers: ["Cache-Control": "no-cache"])
        _ = try await get(client, headers: ["Cache-Control": "max-age=0"])
        #expect(mock.requests.count == 3)
        #expect(mock.requests.dropFirst().allSatisfy { $0.headers["If-None-Match"] == "\"v1\"" })
        #expect(log.all == [.miss, .revalidated, .revalidated])
        _ = try await get(client)  // the plain request: still fresh
        #expect(mock.requests.count == 3)
    }

    @Test func onlyIfCachedAnswers504WithoutTheServerWhenNothingIsFresh() async throws {
        let client = client()
        await #expect(throws: NetworkError.unacceptableStatus(HTTPResponse(status: 504, request: HTTPRequest(url: apiURL)))) {
            _ = try await get(client, headers: ["Cache-Control": "only-if-cached"])
        }
        #expect(mock.requests.isEmpty)
    }

    @Test func requestsWithTheirOwnConditionsOrRangesAndOtherMethodsAreBypassed() async throws {
        let client = client()
        mock.enqueue(.text("stored", headers: ["Cache-Control": "max-age=60", "ETag": "\"a\""]))
        _ = try await get(client)
        mock.enqueue(.text("asked"), .text("ranged"), .text("head"), .text("options"))
        #expect(text(try await get(client, headers: ["If-None-Match": "\"mine\""])) == "asked")
        #expect(mock.requests.last?.headers["If-None-Match"] == "\"mine\"")
        #expect(text(try await get(client, headers: ["Range": "bytes=0-1"])) == "ranged")
        _ = try await client.send(Request<HTTPResponse>(method: .head, path: "/a"))
        _ = try await client.send(Request<HTTPResponse>(method: .options, path: "/a"))
        #expect(log.all == [.miss, .bypassed, .bypassed, .bypassed, .bypassed])
        #expect(text(try await get(client)) == "stored")  // HEAD and OPTIONS invalidated nothing
        #expect(mock.requests.count == 5)
    }

    // MARK: Validation

    @Test func anETag304BecomesTheStored200WithTheHeadersOfThe304() async throws {
        let client = client()
        mock.enqueue(.text("body", headers: ["Cache-Control": "max-age=10", "ETag": "\"v1\"", "X-Version": "1", "Content-Type": "text/plain"]))
        _ = try await get(client)
        now.advance(11)
        mock.enqueue(.status(304, headers: ["Cache-Control": "max-age=120", "ETag": "\"v1\"", "X-Version": "2", "Content-Length": "0"]))
        let revalidated = try await get(client)
        #expect(mock.requests.last?.headers["If-None-Match"] == "\"v1\"")
        #expect(revalidated.status == 200 && text(revalidated) == "body")
        #expect(revalidated.headers["X-Version"] == "2")  // updated from the 304 (RFC 9111 §4.3.4)
        #expect(revalidated.headers["Content-Type"] == "text/plain")  // kept
        #expect(revalidated.headers["Content-Length"] == nil)  // the 304's own length is not the body's
        #expect(revalidated.request.headers["If-None-Match"] == "\"v1\"")  // what was sent
        #expect(log.last == .revalidated)
        // Stored again with the new lifetime: fresh for 120 s from the revalidation.
        now.advance(100)
        let hit = try await get(client)
        #expect(hit.headers["X-Version"] == "2" && mock.requests.count == 2 && log.last == .hit)
    }

    @Test func aLastModified304BecomesTheStored200() async throws {
        let client = client()
        let modified = "Tue, 15 Nov 1994 12:45:26 GMT"
        mock.enqueue(.text("page", headers: ["Cache-Control": "max-age=1", "Last-Modified": modified]))
        _ = try await get(client)
        now.advance(5)
        mock.enqueue(.status(304))
        #expect(text(try await get(client)) == "page")
        #expect(mock.requests.last?.headers["If-Modified-Since"] == modified)
        #expect(mock.requests.last?.headers["If-None-Match"] == nil)
    }

    @Test func a304ForAnotherETagIsNotUsedTheResourceIsFetchedAgain() async throws {
        let client = client()
        mock.enqueue(.text("old", headers: ["Cache-Control": "no-cache", "ETag": "\"old\""]))
        _ = try await get(client)
        mock.enqueue(.status(304, headers: ["ETag": "\"other\""]), .text("current", headers: ["ETag": "\"new\""]))
        #expect(text(try await get(client)) == "current")
        #expect(mock.requests.count == 3 && mock.requests[2].headers["If-None-Match"] == nil)
    }

    @Test func aNewResponseThatMayNotBeStoredRemovesTheOldEntry() async throws {
        let storage = MemoryCacheStorage()
        let client = client(storage)
        mock.enqueue(.text("v1", headers: ["Cache-Control": "max-age=1", "ETag": "\"1\""]), .text("v2", headers: ["Cache-Control": "no-store"]))
        _ = try await get(client)
        now.advance(2)
        #expect(text(try await get(client)) == "v2")
        #expect(storage.count == 0)
    }

    @Test func aServerErrorDuringRevalidationFailsTheCallerButKeepsTheEntry() async throws {
        let storage = MemoryCacheStorage()
        let client = client(storage)
        mock.enqueue(.text("v1", headers: ["Cache-Control": "max-age=1", "ETag": "\"1\""]), .status(503), .status(304))
        _ = try await get(client)
        now.advance(2)
        await #expect(throws: NetworkError.self) { _ = try await get(client) }  // never served stale
        #expect(storage.count == 1)
        #expect(text(try await get(client)) == "v1" && log.last == .revalidated)
    }

    // MARK: Vary

    @Test func varyMatchesOnTheNominatedHeadersAndStarNeverMatches() async throws {
        let client = client()
        mock.enqueue(.text("deutsch", headers: ["Cache-Control": "max-age=60", "Vary": "Accept-Language"]))
        _ = try await get(client, headers: ["Accept-Language": "de"])
        #expect(text(try await get(client, headers: ["Accept-Language": "de", "X-Other": "1"])) == "deutsch")
        #expect(mock.requests.count == 1)
        mock.enqueue(.text("français", headers: ["Cache-Control": "max-age=60", "Vary": "Accept-Language"]))
        #expect(text(try await get(client, headers: ["Accept-Language": "fr"])) == "français")
        mock.enqueue(.text("none"))
        #expect(text(try await get(client)) == "none")  // absent ≠ present
        #expect(mock.requests.count == 3)

        mock.enqueue(.text("star", headers: ["Cache-Control": "max-age=60", "Vary": "*"]), .text("star again"))
        _ = try await get(client, "/star")
        #expect(text(try await get(client, "/star")) == "star again")
    }

    // MARK: Invalidation

    @Test func aSuccessfulUnsafeMethodRemovesTheURLAndSameOriginLocations() async throws {
        let storage = MemoryCacheStorage()
        let client = client(storage)
        for path in ["/items", "/items/7", "/elsewhere"] {
            mock.enqueue(.text(path, headers: ["Cache-Control": "max-age=600"]))
            _ = try await get(client, path)
        }
        mock.enqueue(.text("https://other.test/x", headers: ["Cache-Control": "max-age=600"]))
        _ = try await get(client, "https://other.test/x")
        #expect(storage.count == 4)

        mock.enqueue(.status(500))
        _ = try? await client.send(Request<Void>(method: .post, path: "/items"))
        #expect(storage.count == 4)  // an error status changed nothing

        mock.enqueue(.status(201, headers: ["Location": "/v1/items/7", "Content-Location": "https://other.test/x"]))
        try await client.send(Request<Void>(method: .post, path: "/items"))
        #expect(storage.count == 2)  // /items and the same-origin Location; not the other origin's
        mock.enqueue(.text("fresh list"))
        #expect(text(try await get(client, "/items")) == "fresh list")
        _ = try await get(client, "/elsewhere")
        _ = try await get(client, "https://other.test/x")
        #expect(mock.requests.count == 7)

        for method: HTTPMethod in [.put, .patch, .delete] {
            mock.enqueue(.text("again", headers: ["Cache-Control": "max-age=600"]), .status(204))
            _ = try await get(client, "/m")
            try await client.send(Request<Void>(method: method, path: "/m"))
            mock.enqueue(.text("after \(method)"))
            #expect(text(try await get(client, "/m")) == "after \(method)")
        }
    }

    @Test func anUnsafeMethodWhoseConnectionFailedStillInvalidates() async throws {
        let storage = MemoryCacheStorage()
        let client = client(storage)
        mock.enqueue(.text("list", headers: ["Cache-Control": "max-age=600"]), .failure(URLError(.networkConnectionLost)))
        _ = try await get(client, "/items")
        _ = try? await client.send(Request<Void>(method: .post, path: "/items"))
        #expect(storage.count == 0)
    }

    // MARK: Credentials

    @Test func aResponseToACredentialedRequestIsStoredOnlyWithPermission() async throws {
        let storage = MemoryCacheStorage()
        let client = client(storage)
        let auth: HTTPHeaders = ["Authorization": "Bearer token-a"]
        mock.enqueue(.text("private data", headers: ["Cache-Control": "max-age=60"]))
        _ = try await get(client, headers: auth)
        #expect(storage.count == 0)
        for permission in ["public, max-age=60", "private, max-age=60", "s-maxage=60, max-age=60", "must-revalidate, max-age=60"] {
            await storage.removeAll()
            mock.enqueue(.text(permission, headers: ["Cache-Control": permission]))
            _ = try await get(client, headers: auth)
            #expect(text(try await get(client, headers: auth)) == permission, "\(permission)")
        }
        #expect(mock.requests.count == 5)
        // The same holds for any credential header, a cookie too.
        mock.enqueue(.text("cookie", headers: ["Cache-Control": "max-age=60"]))
        _ = try await get(client, "/c", headers: ["Cookie": "session=abcdef"])
        #expect(storage.count == 1)  // only the last permitted one
    }

    @Test func differentCredentialsNeverShareAPrivateOrUnmarkedEntry() async throws {
        let client = client()
        let permissions = ["private, max-age=60", "must-revalidate, max-age=60", "public, private, max-age=60",
            "s-maxage=60, private"]
        for (index, permission) in permissions.enumerated() {
            mock.enqueue(.text("for a", headers: ["Cache-Control": permission]))
            _ = try await get(client, "/p\(index)", headers: ["Authorization": "Bearer token-a"])
            mock.enqueue(.text("for b", headers: ["Cache-Control": permission]))
            #expect(text(try await get(client, "/p\(index)", headers: ["Authorization": "Bearer token-b"])) == "for b")
            mock.enqueue(.text("anonymous", headers: ["Cache-Control": permission]))
            #expect(text(try await get(client, "/p\(index)")) == "anonymous")
            mock.enqueue(.text("with a key", headers: ["Cache-Control": permission]))
            #expect(text(try await get(client, "/p\(index)", headers: ["X-API-Key": "key-1"])) == "with a key")
        }
        #expect(mock.requests.count == 16)
        // The same key: a hit (private and must-revalidate are stored for their credentials).
        #expect(text(try await get(client, "/p0", headers: ["X-API-Key": "key-1"])) == "with a key")
        #expect(mock.requests.count == 16)
    }

    /// `public` (or `s-maxage`) without `private`: the server says any cache may give the answer
    /// to anyone (RFC 9111 §3.5), what a cache shared by a fleet relies on; `Vary: Authorization`
    /// still keeps it per credential.
    @Test func aPublicAnswerIsUsedWhateverTheCredentials() async throws {
        let client = client()
        for (index, permission) in ["public, max-age=60", "s-maxage=60, max-age=60"].enumerated() {
            mock.enqueue(.text("for a", headers: ["Cache-Control": permission]))
            _ = try await get(client, "/p\(index)", headers: ["Authorization": "Bearer token-a"])
            #expect(text(try await get(client, "/p\(index)", headers: ["Authorization": "Bearer token-b"])) == "for a")
            #expect(text(try await get(client, "/p\(index)")) == "for a")
            #expect(text(try await get(client, "/p\(index)", headers: ["Cookie": "sid=1"])) == "for a")
        }
        #expect(mock.requests.count == 2)
        mock.enqueue(.text("for a", headers: ["Cache-Control": "public, max-age=60", "Vary": "Authorization"]))
        _ = try await get(client, "/varied", headers: ["Authorization": "Bearer token-a"])
        mock.enqueue(.text("for b", headers: ["Cache-Control": "public, max-age=60", "Vary": "Authorization"]))
        #expect(text(try await get(client, "/varied", headers: ["Authorization": "Bearer token-b"])) == "for b")
        #expect(mock.requests.count == 4)
    }

    /// `s-maxage=0` (RFC 9111 §5.2.2.10, with §3.5): another credential may have the answer only
    /// after the origin confirmed it to that credential. Without a validator its request goes to
    /// the origin whole; the credentials that fetched it keep `max-age` (a private cache's rule).
    @Test func sMaxAgeZeroSendsEveryOtherCredentialToTheOrigin() async throws {
        let client = client()
        let alice: HTTPHeaders = ["Authorization": "Bearer alice"]
        let bob: HTTPHeaders = ["Authorization": "Bearer bob"]
        mock.enqueue(.text("Alice's payroll", headers: ["Cache-Control": "max-age=3600, s-maxage=0"]))
        _ = try await get(client, headers: alice)
        #expect(text(try await get(client, headers: alice)) == "Alice's payroll" && log.last == .hit)
        mock.enqueue(.text("forbidden", status: 403))
        await #expect(throws: NetworkError.self) { _ = try await get(client, headers: bob) }
        #expect(mock.requests.count == 2 && mock.requests.last?.headers["Authorization"] == "Bearer bob")
        // Nor to a request with no credential at all.
        mock.enqueue(.text("Alice's payroll", headers: ["Cache-Control": "max-age=3600, s-maxage=0"]))
        _ = try await get(client, "/b", headers: alice)
        mock.enqueue(.text("sign in", status: 401))
        await #expect(throws: NetworkError.self) { _ = try await get(client, "/b") }
        #expect(mock.requests.count == 4)
    }

    /// With a validator, another credential's request is a conditional one carrying its own
    /// credential: a `304` to it gives it the stored body, a `403` is its answer.
    @Test func sMaxAgeZeroRevalidatesWithTheOtherCredential() async throws {
        let client = client()
        mock.enqueue(.text("report", headers: ["Cache-Control": "public, max-age=3600, s-maxage=0", "ETag": "\"v1\""]))
        _ = try await get(client, headers: ["Authorization": "Bearer alice"])
        mock.enqueue(.status(304, headers: ["ETag": "\"v1\""]))
        #expect(text(try await get(client, headers: ["Authorization": "Bearer bob"])) == "report")
        #expect(log.last == .revalidated)
        #expect(mock.requests.last?.headers["Authorization"] == "Bearer bob")
        #expect(mock.requests.last?.headers["If-None-Match"] == "\"v1\"")
        mock.enqueue(.text("forbidden", status: 403))
        await #expect(throws: NetworkError.self) {
            _ = try await get(client, headers: ["Authorization": "Bearer carol"])
        }
        #expect(mock.requests.count == 3 && mock.requests.last?.headers["Authorization"] == "Bearer carol")
    }

    /// A shared answer lives by `s-maxage` for every credential but the one that fetched it, in
    /// both directions: shorter and longer than `max-age`.
    @Test func otherCredentialsReuseAnAnswerForItsSMaxAgeTheFetcherForItsMaxAge() async throws {
        let client = client()
        let alice: HTTPHeaders = ["Authorization": "Bearer alice"]
        let bob: HTTPHeaders = ["Authorization": "Bearer bob"]
        mock.enqueue(.text("short", headers: ["Cache-Control": "public, max-age=600, s-maxage=5"]))
        _ = try await get(client, "/short", headers: alice)
        now.advance(4.9)
        #expect(text(try await get(client, "/short", headers: bob)) == "short" && log.last == .hit)
        #expect(text(try await get(client, "/short")) == "short" && log.last == .hit)
        now.advance(55.1)  // 60 s: stale for others, fresh for alice
        #expect(text(try await get(client, "/short", headers: alice)) == "short" && log.last == .hit)
        mock.enqueue(.text("short, again"))
        #expect(text(try await get(client, "/short", headers: bob)) == "short, again" && log.last == .miss)
        #expect(mock.requests.count == 2)

        mock.enqueue(.text("long", headers: ["Cache-Control": "public, max-age=5, s-maxage=600"]))
        _ = try await get(client, "/long", headers: alice)
        now.advance(60)
        #expect(text(try await get(client, "/long", headers: bob)) == "long" && log.last == .hit)
        mock.enqueue(.text("long, again"))
        #expect(text(try await get(client, "/long", headers: alice)) == "long, again" && log.last == .miss)
        #expect(mock.requests.count == 4)
    }

    /// An answer fetched with no credential and shared: a request with one is another identity
    /// and reuses it by `s-maxage`; another anonymous request by `max-age`.
    @Test func anAnonymousAnswerIsReusedByCredentialsForItsSMaxAge() async throws {
        let client = client()
        mock.enqueue(.text("catalog", headers: ["Cache-Control": "max-age=600, s-maxage=10"]))
        _ = try await get(client)
        now.advance(30)
        #expect(text(try await get(client)) == "catalog" && log.last == .hit)
        mock.enqueue(.text("catalog for bob", headers: ["Cache-Control": "private, max-age=600"]))
        #expect(text(try await get(client, headers: ["Authorization": "Bearer bob"])) == "catalog for bob")
        #expect(mock.requests.count == 2)
    }

    /// A `304` merged into a stored answer is filtered with the client's own credential names,
    /// as the answer it updates was.
    @Test func a304sHeadersAreFilteredWithTheClientsOwnSensitiveNames() async throws {
        let storage = MemoryCacheStorage()
        let configuration = NetworkClient.Configuration(sensitiveHeaders: .standard.adding(["X-Ledger-Ref"]))
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            log
            CacheBehavior(storage: storage, now: now.function)
        }
        mock.enqueue(.text("ledger", headers: ["Cache-Control": "no-cache", "ETag": "\"v1\"", "X-Ledger-Ref": "first-77"]))
        _ = try await get(client)
        #expect(await storage.entry(for: "https://api.test/v1/a")?.headers.contains("X-Ledger-Ref") == false)
        mock.enqueue(.status(304, headers: ["ETag": "\"v1\"", "X-Ledger-Ref": "second-88", "X-Plain": "ok"]))
        #expect(text(try await get(client)) == "ledger" && log.last == .revalidated)
        let stored = await storage.entry(for: "https://api.test/v1/a")
        #expect(stored?.headers["X-Plain"] == "ok")
        #expect(stored?.headers.contains("X-Ledger-Ref") == false)
    }

    /// A shared answer that a 304 makes `private` is no longer shared: it belongs to whoever
    /// revalidated it.
    @Test func aPublicAnswerRevalidatedAsPrivateBelongsToTheRevalidatingCredentials() async throws {
        let client = client()
        mock.enqueue(.text("shared", headers: ["Cache-Control": "public, no-cache", "ETag": "\"v1\""]))
        _ = try await get(client, headers: ["Authorization": "Bearer token-a"])
        mock.enqueue(.status(304, headers: ["Cache-Control": "private, no-cache", "ETag": "\"v1\""]))
        #expect(text(try await get(client, headers: ["Authorization": "Bearer token-a"])) == "shared")
        mock.enqueue(.text("for b", headers: ["Cache-Control": "private, no-cache", "ETag": "\"v2\""]))
        #expect(text(try await get(client, headers: ["Authorization": "Bearer token-b"])) == "for b")
        // token-b's request went out unconditional: the stored entry was not offered to it.
        #expect(mock.requests.last?.headers["If-None-Match"] == nil && mock.requests.count == 3)
    }

    @Test func setCookieAndCredentialHeadersAreNeverStoredOrReplayed() async throws {
        let storage = MemoryCacheStorage()
        let client = client(storage)
        mock.enqueue(.text("x", headers: ["Cache-Control": "max-age=60", "Set-Cookie": "sid=s3cr3t", "X-Auth-Token": "tok-123", "X-Plain": "ok"]))
        let first = try await get(client)
        #expect(first.headers["Set-Cookie"] == "sid=s3cr3t")  // the caller gets the real response
        let hit = try await get(client)
        #expect(hit.headers["Set-Cookie"] == nil && hit.headers["X-Auth-Token"] == nil && hit.headers["X-Plain"] == "ok")
        let stored = await storage.entry(for: "https://api.test/v1/a")
        #expect(stored?.headers.contains("Set-Cookie") == false)
    }

    // MARK: The answer is judged like the transport's

    @Test func aHitGoesThroughOuterBehaviorsAndTheRequestIsTheAttempts() async throws {
        let recorder = HookRecorder()
        let client = NetworkClient(baseURL: apiURL, transport: mock) {
            RecordingBehavior("outer", recorder: recorder)
            CacheBehavior(now: now.function)
        }
        mock.enqueue(.text("a", headers: ["Cache-Control": "max-age=60"]))
        _ = try await get(client, headers: ["X-Trace": "1"])
        let hit = try await get(client, headers: ["X-Trace": "2"])
        #expect(hit.request.headers["X-Trace"] == "2")
        #expect(recorder.hooks(of: "outer").filter { $0 == .validate }.count == 2)
        #expect(recorder.hooks(of: "outer").last == .afterSuccess)

        // A stored 404 (explicitly fresh) fails the caller as the server's 404 did.
        mock.enqueue(.text("gone", status: 404, headers: ["Cache-Control": "max-age=60"]))
        await #expect(throws: NetworkError.notFound) {
            _ = try await get(client, "/gone")
        }
        await #expect(throws: NetworkError.notFound) {
            _ = try await get(client, "/gone")
        }
        #expect(mock.requests.count == 2)
    }

    @Test func theCacheKeepsTheBehaviorContract() async {
        let storage = MemoryCacheStorage()
        let violations = await BehaviorContractCheck(CacheBehavior(storage: storage)) { storage.count }.run()
        #expect(violations.isEmpty, "\(violations)")
    }
}
