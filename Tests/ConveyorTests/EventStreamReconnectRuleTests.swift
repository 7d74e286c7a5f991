@testable import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A reconnect is a retry (contract rule 16): the idempotency rule `RetryBehavior` follows, two
/// answers never joined, a floor, a cap and jitter on every delay, and one ending for a storm on
/// every transport.
@Suite struct EventStreamReconnectRuleTests {
    struct Delta: Decodable, Sendable { let text: String }

    /// A POST with a JSON body, as an LLM API's completion request.
    func post(_ path: String) -> Request<Data> {
        Request<Data>(method: .post, path: path, body: .data(Data(#"{"text":"hi"}"#.utf8), contentType: "application/json"))
    }

    func client(_ transport: some HTTPTransport, clock: ImmediateClock, @RequestBehaviorBuilder behaviors: () -> [any RequestBehavior] = { [] }) -> NetworkClient {
        NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/")!, transport: transport,
            configuration: .init(clock: clock), behaviors: behaviors)
    }

    /// The guide's `complete()` against an LLM-style server that sends no ids and drops after two
    /// deltas. Before: the POST was sent again and the caller got `HelloHi there` as a success.
    @Test func aPostStreamIsNotSentAgainAndItsAnswersAreNeverJoined() async throws {
        let transport = ScriptedEventTransport([
            .init(chunks: [#"data: {"text":"Hello"}"# + "\n\n", #"data: {"text":" world"}"# + "\n\n"], ending: .fail),
            .init(chunks: [#"data: {"text":"Hi there"}"# + "\n\n", "data: [DONE]\n\n"], ending: .end),
        ])
        let request = post("/v1/complete")
        var answer = ""
        var failure: NetworkError?
        do {
            for try await delta in client(transport, clock: ImmediateClock()).events(request, decoding: Delta.self, until: "[DONE]") {
                answer += delta.text
            }
        } catch let error as NetworkError {
            failure = error
        }
        #expect(answer == "Hello world")
        #expect(transport.requests.count == 1, "the POST was sent again")
        #expect(failure?.name == "notRetryable")
        #expect(failure?.after?.name == "connectionFailed")
    }

    /// An idempotency key (or the opt-in) lets a POST stream reconnect, but only where the server
    /// can resume it: after events with no id the new connection would start another answer.
    @Test func aKeyOrTheOptInAllowsAResumeButNeverASecondAnswer() async throws {
        // With a key and no ids: events were delivered, nothing to resume from.
        let noIDs = ScriptedEventTransport([.init(chunks: ["data: a\n\n"], ending: .fail)])
        var keyed = client(noIDs, clock: ImmediateClock()) { IdempotencyKeyBehavior() }
            .events(post("/s")).makeAsyncIterator()
        #expect(try await keyed.next()?.data == "a")
        await #expect { _ = try await keyed.next() } throws: { ($0 as? NetworkError)?.name == "notRetryable" }
        #expect(noIDs.requests.count == 1)

        // With a key and ids: the server resumes after Last-Event-ID.
        let withIDs = ScriptedEventTransport([
            .init(chunks: ["id: 1\ndata: a\n\n"], ending: .fail), .init(chunks: ["id: 2\ndata: b\n\n"], ending: .end),
        ])
        var seen: [String] = []
        for try await event in client(withIDs, clock: ImmediateClock(), behaviors: { IdempotencyKeyBehavior() })
            .events(post("/s"))
        {
            seen.append(event.data)
        }
        #expect(seen == ["a", "b"])
        #expect(withIDs.requests.map { $0.headers["Last-Event-ID"] } == [nil, "1", "2"])
        let keys = Set(withIDs.requests.compactMap { $0.headers["Idempotency-Key"] })
        #expect(keys.count == 1, "one key on every connection")

        // The opt-in, and a connection refused before any event: sent again.
        let refused = ScriptedEventTransport([.init(status: 0), .init(chunks: ["data: x\n\n", "data: [DONE]\n\n"], ending: .hang)])
        var options = EventStreamOptions()
        options.resendsNonIdempotentRequests = true
        options.endMarker = "[DONE]"
        var got: [String] = []
        for try await event in client(refused, clock: ImmediateClock())
            .events(post("/s"), options: options)
        {
            got.append(event.data)
        }
        #expect(got == ["x"])
        #expect(refused.requests.count == 2)

        // Without either, even a refused connection is not sent again.
        let plain = ScriptedEventTransport([.init(status: 0), .init(chunks: ["data: x\n\n"], ending: .end)])
        await #expect {
            for try await _ in client(plain, clock: ImmediateClock()).events(post("/s")) {}
        } throws: { ($0 as? NetworkError)?.name == "notRetryable" }
        #expect(plain.requests.count == 1)
    }

    /// A server that sends `retry: 0` and a comment, then closes. Before: any line reset the
    /// failure count and the delay had no floor (20,000 connections in 30 s). Now the comment is
    /// no sign of life: the connections back off from the floor and the stream ends after
    /// `maxConsecutiveFailures` of them with `.connectionFailed`.
    @Test func aRetryZeroStormBacksOffFromTheFloorAndEnds() async throws {
        let storm = ScriptedEventTransport([], then: .init(chunks: ["retry: 0\n: ping\n\n"], ending: .end))
        let clock = ImmediateClock()
        var options = EventStreamOptions()
        options.jitter = 0
        await #expect {
            for try await _ in client(storm, clock: clock).events(Request<Data>(path: "/s"), options: options) {}
        } throws: { ($0 as? NetworkError)?.name == "connectionFailed" }
        #expect(storm.requests.count == 5)
        #expect(clock.sleeps == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2)])
    }

    /// Every delay is jittered and stays between the floor and its cap (before jitter), whatever
    /// the server asks: never below the server's `retry:` (lowered to `maxRetryDelay`), the
    /// `reconnectDelay` or `minReconnectDelay`, and at most a fifth above its cap.
    @Test func everyDelayIsJitteredBetweenTheFloorAndTheCap() {
        var options = EventStreamOptions()
        options.jitter = 0.2
        var random = SplitMix64(state: 16)
        for _ in 0..<2000 {
            let base = Duration.milliseconds(Int64(random.next() % 400_000))
            let failures = Int(random.next() % 12)
            let draw = Double(random.next() >> 11) / Double(1 << 53)
            let floor = max(options.minReconnectDelay, min(base, options.maxRetryDelay))
            let delay = options.delay(base: min(base, options.maxRetryDelay), failures: failures, random: draw)
            #expect(delay >= floor)
            let cap = failures > 0 ? max(floor, options.maxReconnectDelay) : floor
            #expect(delay <= cap * 1.2)
        }
        // Before: 80–120 % of the delay (8 s for a server's 10 s).
        let low = options.delay(base: .seconds(10), failures: 0, random: 0)
        let high = options.delay(base: .seconds(10), failures: 0, random: 1)
        #expect(low == .seconds(10) && high == .seconds(12))
        // A server's retry: above maxReconnectDelay stays the floor after failures too.
        #expect(options.delay(base: .seconds(60), failures: 3, random: 0) == .seconds(60))
        options.jitter = 0
        #expect(options.delay(base: .seconds(7), failures: 0, random: 0.9) == .seconds(7))
    }

    /// Issue 56, item 1: with a reconnection time of 7 s (a server's `retry:` or
    /// `reconnectDelay`) the stream waited 6.02 s; jitter spread the delay below it. Now every
    /// wait is at least 7 s, and at most 8.4 s.
    @Test(arguments: [true, false])
    func aReconnectNeverWaitsLessThanTheServersRetryOrTheReconnectDelay(fromServer: Bool) async throws {
        let connection = ScriptedEventTransport.Connection(
            chunks: [(fromServer ? "retry: 7000\n" : "") + "id: 1\ndata: x\n\n"], ending: .fail)
        let transport = ScriptedEventTransport(Array(repeating: connection, count: 200))
        let clock = ImmediateClock()
        var options = EventStreamOptions()
        if !fromServer { options.reconnectDelay = .seconds(7) }
        var count = 0
        for try await _ in client(transport, clock: clock).events(Request<Data>(path: "/s"), options: options) { count += 1 }
        #expect(count == 200)
        let sleeps = clock.sleeps
        #expect(sleeps.count == 200)
        #expect(sleeps.allSatisfy { $0 >= .seconds(7) && $0 <= .milliseconds(8400) }, "\(sleeps.min()!) ... \(sleeps.max()!)")
        #expect(Set(sleeps).count > 150, "spread")
    }

    /// Issue 56, item 2: in a storm of 500 failed connections with `jitter = 0.2`, every upward
    /// draw was clamped to the 2 s cap (234 distinct waits of 494 at the cap): half the clients at
    /// the cap came back at the same instant. Now the cap is the cap before jitter: waits there
    /// spread over 2–2.4 s, and none is below the floor.
    @Test func waitsAtTheCapStaySpreadInAStorm() async throws {
        let storm = ScriptedEventTransport([], then: .init(status: 0))
        let clock = ImmediateClock()
        var options = EventStreamOptions()
        options.jitter = 0.2
        options.maxReconnectDelay = .seconds(2)
        options.maxConsecutiveFailures = 501
        await #expect {
            for try await _ in client(storm, clock: clock).events(Request<Data>(path: "/s"), options: options) {}
        } throws: { ($0 as? NetworkError)?.name == "connectionFailed" }
        let sleeps = clock.sleeps
        #expect(sleeps.count == 500)
        #expect(sleeps.allSatisfy { $0 >= .seconds(1) }, "below the reconnect delay")
        let atCap = Array(sleeps.dropFirst())  // 1 s, then 2 s doubled: the cap
        #expect(atCap.allSatisfy { $0 >= .seconds(2) && $0 <= .milliseconds(2400) })
        // 53-bit draws over 400 ms in nanoseconds: a repeat is a one-in-a-thousand event, and
        // ten would take a broken generator.
        #expect(Set(atCap).count > atCap.count - 10, "\(Set(atCap).count) distinct of \(atCap.count)")
        #expect(atCap.min()! < .milliseconds(2050) && atCap.max()! > .milliseconds(2350), "spread over the interval")

        // The same storm from seeded draws, exactly: all 500 distinct, in every tenth of the interval.
        var random = SplitMix64(state: 56)
        let seeded = (1...500).map { failures in
            options.delay(base: .seconds(1), failures: failures + 1, random: Double(random.next() >> 11) / Double(1 << 53))
        }
        #expect(Set(seeded).count == 500)
        let tenths = Set(seeded.map { min(9, Int((($0 - .seconds(2)) / .milliseconds(40)).rounded(.down))) })
        #expect(tenths == Set(0..<10))
    }

    /// FoundationNetworking reports a server that closes before any byte as
    /// `URLError(.badServerResponse)` (a `.transportFailed`), AsyncHTTPClient as a closed
    /// connection: the stream that gives up ends with `.connectionFailed` on both.
    @Test func aStormOfEmptyRepliesEndsWithConnectionFailedWhateverTheTransportSaid() async throws {
        let transport = EmptyReplyTransport()
        await #expect {
            for try await _ in client(transport, clock: ImmediateClock()).events(Request<Data>(path: "/s")) {}
        } throws: { error in
            guard let error = error as? NetworkError, error.name == "connectionFailed" else { return false }
            return (error.underlying as? URLError)?.code == .badServerResponse
        }
        #expect(transport.count.withLock { $0 } == 5)
    }

    final class EmptyReplyTransport: HTTPTransport, Sendable {
        let count = Locked(0)
        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            count.withLock { $0 += 1 }
            throw URLError(.badServerResponse)
        }
    }
}
