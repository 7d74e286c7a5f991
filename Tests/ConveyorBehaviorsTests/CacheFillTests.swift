import ConveyorPipeline
import ConveyorTesting
import Foundation
import Testing

@testable import ConveyorBehaviors

/// `CacheBehavior` with a storage that coordinates fills (`CacheFillCoordinating`), on a scripted
/// coordinator: who fetches, who waits, what a waiter gets, and that every lease it takes ends,
/// whatever the exchange did. The PostgreSQL coordinator is proven across processes in the
/// Integrations package (SharedCacheFillTests).
@Suite struct CacheFillTests {
    let mock = MockTransport(baseURL: apiURL)
    let now = FakeNow()
    let log = OutcomeLog()

    func get(_ client: NetworkClient, token: String? = nil) async throws -> String {
        var headers: HTTPHeaders = [:]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return String(decoding: try await client.send(Request<HTTPResponse>(path: "/cold", headers: headers)).body, as: UTF8.self)
    }

    /// What another process's fill leaves: a shared answer, "filled", for `/cold`.
    static func storeFilled(in storage: Coordinated, at date: Date) async {
        let entry = CacheBehavior.storable(
            HTTPResponse(
                status: 200, headers: ["Cache-Control": "public, max-age=60"], body: Data("filled".utf8),
                request: HTTPRequest(method: .get, url: URL(string: "https://api.test/v1/cold")!)),
            credentials: "", requestControl: CacheControl(), requestTime: date, responseTime: date)
        if let entry { await storage.base.store(entry, for: "https://api.test/v1/cold") }
    }

    @Test func theFillerFetchesStoresAndEndsItsLeaseSayingWhatItStored() async throws {
        let storage = Coordinated(turns: [.fill, .fill])
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        mock.enqueue(.text("public", headers: ["Cache-Control": "public, max-age=60"]))
        #expect(try await get(client, token: "a") == "public")
        mock.enqueue(.text("mine", headers: ["Cache-Control": "private, max-age=60"]))
        now.advance(61)
        #expect(try await get(client, token: "a") == "mine")
        #expect(storage.ended == [.sharedAnswer, .privateAnswer] && storage.outstanding == 0)
        // A hit asks for no turn.
        #expect(try await get(client, token: "a") == "mine" && storage.begun == 2)
    }

    @Test func aLeaseEndsWhenTheExchangeFails() async throws {
        let storage = Coordinated(turns: [.fill])
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        mock.enqueue(.failure(URLError(.timedOut)))
        await #expect(throws: NetworkError.self) { try await get(client) }
        #expect(storage.ended == [.nothing] && storage.outstanding == 0)
    }

    @Test func aWaiterIsAnsweredWithWhatTheFillerStoredWithoutTheNetwork() async throws {
        let storage = Coordinated(turns: [.wait])
        // While it waits, another process stores the answer.
        storage.duringWait = { [now] storage in await Self.storeFilled(in: storage, at: now.date) }
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        #expect(try await get(client, token: "a") == "filled")
        #expect(mock.requests.isEmpty && log.last == .hit && storage.waits == 1)
    }

    @Test func aFillerLooksOnceMoreBeforeAskingTheOrigin() async throws {
        // Between this request's lookup and its turn, another process stored the answer and
        // released its lease: the turn is taken, the entry found, the lease ended, no request sent.
        let storage = Coordinated(turns: [.fill])
        storage.duringBegin = { [now] storage in await Self.storeFilled(in: storage, at: now.date) }
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        #expect(try await get(client) == "filled")
        #expect(mock.requests.isEmpty && storage.ended == [.nothing] && storage.outstanding == 0)
    }

    /// A waiter waits within its request's deadline: a total timeout that passes while another
    /// process's fill is awaited ends the request with `.timedOut` then, not when the fill ends.
    @Test func aWaiterWaitsWithinItsRequestsTotalTimeout() async throws {
        let clock = ManualClock()
        let storage = Coordinated(turns: [.wait])
        // A fill that does not end while the request waits; 60 s so that a regression fails
        // instead of hanging. Whether the fill had ended when the request did is what counts,
        // not how long the request took: a busy machine can delay any task by seconds.
        let fillEnded = Locked(false)
        storage.duringWait = { _ in
            clock.advance(by: .seconds(3))
            if (try? await Task.sleep(for: .seconds(60))) != nil { fillEnded.withLock { $0 = true } }
        }
        var configuration = NetworkClient.Configuration(clock: ImmediateClock(), timeoutClock: clock)
        configuration.totalTimeout = .seconds(2)
        let client = NetworkClient(baseURL: apiURL, transport: mock, configuration: configuration) {
            CacheBehavior(storage: storage, now: now.function)
        }
        let error = await #expect(throws: NetworkError.self) { try await get(client) }
        #expect(error == .timedOut, "\(String(describing: error))")
        #expect(!fillEnded.withLock { $0 }, "the request waited for the fill's end, past its deadline")
        #expect(mock.requests.isEmpty)
    }

    /// A fill that stored nothing (its exchange failed, or its answer may not be kept) hands the
    /// turn on: its waiter asks again, waits again while another holds it, and fetches when the
    /// turn is its own, never at once beside every other waiter.
    @Test func aWaiterWhomTheWaitBroughtNothingAsksForTheTurnAgain() async throws {
        let storage = Coordinated(turns: [.wait, .wait, .fill])
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        mock.enqueue(.text("mine", headers: ["Cache-Control": "public, max-age=60"]))
        #expect(try await get(client) == "mine")
        #expect(storage.begun == 3 && storage.waits == 2 && mock.requests.count == 1)
        #expect(storage.ended == [.sharedAnswer] && storage.outstanding == 0)
    }

    /// After a private answer the storage says `.fetch` (other identities could not use it): the
    /// waiter fetches without a turn.
    @Test func aWaiterTheStorageTellsToFetchFetchesItself() async throws {
        let storage = Coordinated(turns: [.wait, .fetch])
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        mock.enqueue(.text("own", headers: ["Cache-Control": "private, max-age=60"]), .text("again"))
        #expect(try await get(client, token: "a") == "own")
        #expect(try await get(client, token: "b") == "again")
        #expect(mock.requests.count == 2 && storage.waits == 1 && storage.begun == 3 && storage.ended.isEmpty)
    }

    /// A request waits for at most `fillWaits` fills of others, then fetches without a turn: a
    /// storage that keeps saying `.wait` cannot hold it forever.
    @Test func aWaiterWaitsForAtMostSixteenFills() async throws {
        let storage = Coordinated(turns: Array(repeating: .wait, count: 40))
        let client = cacheClient(mock, now: now, storage: storage, log: log)
        mock.enqueue(.text("own"))
        #expect(try await get(client) == "own")
        #expect(CacheBehavior.fillWaits == 16)
        #expect(storage.waits == 16 && storage.begun == 16 && mock.requests.count == 1 && storage.ended.isEmpty)
    }
}

/// A memory storage that coordinates fills by a script of turns and records what it was asked.
final class Coordinated: CacheFillCoordinating {
    enum Turn { case fill, wait, fetch }
    let base = MemoryCacheStorage()
    private let state: Locked<(turns: [Turn], begun: Int, ended: [CacheFillResult], outstanding: Int, waits: Int)>
    var duringWait: (@Sendable (Coordinated) async -> Void)? {
        get { hook.withLock { $0 } }
        set { hook.withLock { $0 = newValue } }
    }
    private let hook = Locked<(@Sendable (Coordinated) async -> Void)?>(nil)
    var duringBegin: (@Sendable (Coordinated) async -> Void)? {
        get { beginHook.withLock { $0 } }
        set { beginHook.withLock { $0 = newValue } }
    }
    private let beginHook = Locked<(@Sendable (Coordinated) async -> Void)?>(nil)

    init(turns: [Turn]) { state = Locked((turns, 0, [], 0, 0)) }
    var begun: Int { state.withLock { $0.begun } }
    var ended: [CacheFillResult] { state.withLock { $0.ended } }
    var outstanding: Int { state.withLock { $0.outstanding } }
    var waits: Int { state.withLock { $0.waits } }

    func entry(for key: String) async -> CachedResponse? { await base.entry(for: key) }
    func store(_ entry: CachedResponse, for key: String) async { await base.store(entry, for: key) }
    func removeEntry(for key: String) async { await base.removeEntry(for: key) }
    func removeAll() async { await base.removeAll() }
    var keepsVariants: Bool { true }
    func removeVariants(of key: String) async { await base.removeVariants(of: key) }

    func beginFill(of key: String) async -> CacheFillTurn {
        await duringBegin?(self)
        return state.withLock { state in
            state.begun += 1
            let turn = state.turns.isEmpty ? .fetch : state.turns.removeFirst()
            switch turn {
            case .fill:
                state.outstanding += 1
                return .fill(CacheFillLease(key: key, holder: UUID()))
            case .wait: return .wait
            case .fetch: return .fetch
            }
        }
    }

    func endFill(_ lease: CacheFillLease, stored: CacheFillResult) async {
        state.withLock { state in
            state.outstanding -= 1
            state.ended.append(stored)
        }
    }

    func waitForFill(of key: String) async {
        state.withLock { $0.waits += 1 }
        await duringWait?(self)
    }
}
