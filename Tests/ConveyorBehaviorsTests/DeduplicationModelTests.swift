@testable import ConveyorBehaviors
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// Where the sends of the model test wait: at a door (an `intercept` member after the
/// de-duplication) and in the transport, one slot per place and path, until the test lets them go.
/// A parked send whose task is cancelled leaves its slot at once.
final class Switchboard: Sendable {
    struct State {
        var parked: [String: (id: Int, continuation: UnsafeContinuation<MockTransport.Reply?, Never>)] = [:]
        /// How many sends have parked in each slot so far.
        var parks: [String: Int] = [:]
        var nextID = 0
        var watchers: [(id: Int, ready: @Sendable (Set<String>, [String: Int]) -> Bool, continuation: UnsafeContinuation<Void, Never>)] = []

        mutating func readyWatchers() -> [UnsafeContinuation<Void, Never>] {
            let slots = Set(parked.keys)
            let ready = watchers.filter { $0.ready(slots, parks) }.map(\.continuation)
            watchers.removeAll { $0.ready(slots, parks) }
            return ready
        }
    }

    let state = Locked(State())

    /// Waits in `slot` until released; `nil` when the task is cancelled.
    func park(_ slot: String) async -> MockTransport.Reply? {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<MockTransport.Reply?, Never>) in
                let (cancelled, displaced, ready) = state.withLock {
                    state -> (Bool, UnsafeContinuation<MockTransport.Reply?, Never>?, [UnsafeContinuation<Void, Never>]) in
                    if Task.isCancelled { return (true, nil, []) }
                    // A send still parked here was abandoned (its task cancelled, its handler not
                    // yet run): it goes on, as cancelled, so that no task is left waiting.
                    let displaced = state.parked[slot]?.continuation
                    state.parked[slot] = (id, continuation)
                    state.parks[slot, default: 0] += 1
                    return (false, displaced, state.readyWatchers())
                }
                displaced?.resume(returning: nil)
                ready.forEach { $0.resume() }
                if cancelled { continuation.resume(returning: nil) }
            }
        } onCancel: {
            let (continuation, ready) = state.withLock {
                state -> (UnsafeContinuation<MockTransport.Reply?, Never>?, [UnsafeContinuation<Void, Never>]) in
                guard let parked = state.parked[slot], parked.id == id else { return (nil, []) }
                state.parked[slot] = nil
                return (parked.continuation, state.readyWatchers())
            }
            ready.forEach { $0.resume() }
            continuation?.resume(returning: nil)
        }
    }

    /// How many sends have parked in `slot` so far.
    func parks(_ slot: String) -> Int { state.withLock { $0.parks[slot, default: 0] } }

    /// Lets the send parked in `slot` go on with `reply`.
    func release(_ slot: String, with reply: MockTransport.Reply) {
        let (parked, ready) = state.withLock { state -> (UnsafeContinuation<MockTransport.Reply?, Never>?, [UnsafeContinuation<Void, Never>]) in
            let parked = state.parked.removeValue(forKey: slot)
            return (parked?.continuation, state.readyWatchers())
        }
        ready.forEach { $0.resume() }
        parked?.resume(returning: reply)
    }

    /// Suspends until the set of occupied slots satisfies `ready`, or the task is cancelled (the
    /// model and the behavior disagree, and the time limit ended the run).
    func waitUntil(_ ready: @escaping @Sendable (Set<String>) -> Bool) async {
        await waitUntil { slots, _ in ready(slots) }
    }

    /// Suspends until the occupied slots and the count of parks per slot satisfy `ready`.
    func waitUntil(_ ready: @escaping @Sendable (Set<String>, [String: Int]) -> Bool) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if ready(Set(state.parked.keys), state.parks) || Task.isCancelled { return true }
                    state.watchers.append((id, ready, continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let watcher = state.withLock { state -> UnsafeContinuation<Void, Never>? in
                guard let index = state.watchers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.watchers.remove(at: index).continuation
            }
            watcher?.resume()
        }
    }
}

/// The door of the model test: every send parks here before it goes on to the transport.
struct ModelDoor: AttemptIntercepting {
    let board: Switchboard
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        guard await board.park("door " + request.url.path) != nil else { throw NetworkError.cancelled }
        return try await next(request)
    }
}

/// "Attack your own claims": random arrivals, cancellations (leaders included, before or after
/// their call reached the transport: the flight goes with its leader and the earliest caller
/// still waiting sends again) and outcomes, checked against a small reference model of the
/// behavior's rules.
@Suite struct DeduplicationModelTests {
    enum Phase: Equatable { case door, transport }
    struct Flight {
        var leader: Int
        var phase: Phase
    }

    static func result(_ body: () async throws -> String) async -> String {
        do {
            return "body " + (try await body())
        } catch let error as NetworkError {
            switch error {
            case .unacceptableStatus: return "status \(error.status ?? 0)"
            case .cancelled: return "cancelled"
            case .timedOut: return "timedOut"
            case .connectionFailed: return "connectionFailed"
            default: return "\(error)"
            }
        } catch {
            return "\(error)"
        }
    }

    @Test(arguments: 0..<40)
    func randomArrivalsCancellationsAndOutcomesMatchTheModel(seed: UInt64) async throws {
        let finished = await withinTimeLimit(seconds: hangBound) { await Self.run(seed: seed) }
        #expect(finished == true, "seed \(seed): the behavior did not do what the model says (it waited in vain)")
    }

    static func run(seed: UInt64) async -> Bool {
        var random = SplitMix64(state: seed)
        let board = Switchboard()
        let dedup = DeduplicationBehavior()
        let mock = MockTransport(baseURL: apiURL)
        for path in ["/a", "/b"] {
            mock.stub(nil, path, reply: .handler { _ in
                await board.park("transport /v1" + path) ?? .failure(CancellationError())
            })
        }
        let client = NetworkClient(baseURL: apiURL, transport: mock) {
            dedup
            ModelDoor(board: board)
        }

        // The model.
        var flights: [String: Flight] = [:]
        var waiters: [String: [Int]] = [:]  // callers in the order they joined
        var expected: [Int: String] = [:]
        var transportCalls = 0
        var sends = 0
        var tasks: [Int: Task<String, Never>] = [:]
        var pathOf: [Int: String] = [:]
        let callers = 2 + Int(random.next() % 11)
        var arrived = 0
        var bodies = 0

        func totalWaiting() -> Int { waiters.values.map(\.count).reduce(0, +) }
        func slot(_ phase: Phase, _ path: String) -> String { (phase == .door ? "door /v1" : "transport /v1") + path }

        while true {
            if Task.isCancelled {  // the time limit passed: a wait above was in vain
                tasks.values.forEach { $0.cancel() }
                return false
            }
            var kinds: [String] = []
            if arrived < callers { kinds.append("arrive") }
            if totalWaiting() > 0 { kinds.append("cancel") }
            if flights.values.contains(where: { $0.phase == .door }) { kinds.append("open") }
            if flights.values.contains(where: { $0.phase == .transport }) { kinds.append("complete") }
            guard !kinds.isEmpty else { break }
            switch kinds[Int(random.next() % UInt64(kinds.count))] {
            case "arrive":
                let caller = arrived
                arrived += 1
                let path = random.next() % 2 == 0 ? "/a" : "/b"
                pathOf[caller] = path
                let before = totalWaiting()
                waiters[path, default: []].append(caller)
                tasks[caller] = Task { await result { try await client.send(Request<String>(path: path)) } }
                await dedup.calls.waitUntilWaiting(before + 1)
                if flights[path] == nil {
                    flights[path] = Flight(leader: caller, phase: .door)
                    sends += 1
                    let door = slot(.door, path)
                    await board.waitUntil { $0.contains(door) }
                }
            case "cancel":
                let all = waiters.values.flatMap { $0 }.sorted()
                let caller = all[Int(random.next() % UInt64(all.count))]
                guard let path = pathOf[caller], let task = tasks[caller] else { return false }
                // Counted before the cancel: the caller that sends again can park at the door
                // before this task reads the count, and would then wait for one park too many.
                let doorParksBefore = board.parks(slot(.door, path))
                task.cancel()
                expected[caller] = "cancelled"
                waiters[path]?.removeAll { $0 == caller }
                if waiters[path]?.isEmpty == true {
                    flights[path] = nil  // the last caller left: the call is cancelled
                    let (door, transport) = (slot(.door, path), slot(.transport, path))
                    await board.waitUntil { !$0.contains(door) && !$0.contains(transport) }
                } else if let flight = flights[path], flight.leader == caller, let first = waiters[path]?.first {
                    // The leader left: its flight is cancelled at once, wherever it is, and the
                    // earliest caller still waiting sends again (no flight outlives its leader).
                    flights[path] = Flight(leader: first, phase: .door)
                    sends += 1
                    let (door, transport) = (slot(.door, path), slot(.transport, path))
                    let doorParks = doorParksBefore + 1
                    let wasInTransport = flight.phase == .transport
                    await board.waitUntil { slots, parks in
                        parks[door, default: 0] >= doorParks && slots.contains(door)
                            && (!wasInTransport || !slots.contains(transport))
                    }
                }
                #expect(await task.value == "cancelled", "seed \(seed) caller \(caller)")
            case "open":
                let atDoor = flights.filter { $0.value.phase == .door }.map(\.key).sorted()
                let path = atDoor[Int(random.next() % UInt64(atDoor.count))]
                guard let flight = flights[path], let first = waiters[path]?.first else { return false }
                board.release(slot(.door, path), with: .text("open"))
                // A leader that leaves takes its flight with it, so the leader is still here.
                guard waiters[path]?.contains(flight.leader) == true, first >= 0 else { return false }
                flights[path]?.phase = .transport
                transportCalls += 1
                let transport = slot(.transport, path)
                await board.waitUntil { $0.contains(transport) }
            default:  // complete
                let inTransport = flights.filter { $0.value.phase == .transport }.map(\.key).sorted()
                let path = inTransport[Int(random.next() % UInt64(inTransport.count))]
                let (reply, outcome): (MockTransport.Reply, String)
                switch random.next() % 4 {
                case 0:
                    bodies += 1
                    (reply, outcome) = (.text("r\(bodies)"), "body r\(bodies)")
                case 1: (reply, outcome) = (.status(500), "status 500")
                case 2: (reply, outcome) = (.failure(URLError(.timedOut)), "timedOut")
                default: (reply, outcome) = (.failure(URLError(.cannotConnectToHost)), "connectionFailed")
                }
                let done = waiters[path] ?? []
                for caller in done { expected[caller] = outcome }
                flights[path] = nil
                waiters[path] = []
                board.release(slot(.transport, path), with: reply)
                for caller in done {
                    guard let task = tasks[caller] else { return false }
                    #expect(await task.value == outcome, "seed \(seed) caller \(caller)")
                }
            }
        }

        if Task.isCancelled { return false }
        for (caller, task) in tasks { #expect(await task.value == expected[caller], "seed \(seed) caller \(caller)") }
        #expect(mock.requests.count == transportCalls, "seed \(seed)")
        #expect(dedup.calls.sends == sends, "seed \(seed)")
        #expect(dedup.calls.count == 0 && dedup.calls.waiting == 0, "seed \(seed)")
        return true
    }
}
