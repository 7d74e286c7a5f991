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

    /// Every delay is jittered and stays between the floor and its cap, whatever the server asks.
    @Test func everyDelayIsJitteredBetweenTheFloorAndTheCap() {
        var options = EventStreamOptions()
        options.jitter = 0.2
        var random = SplitMix64(state: 16)
        for _ in 0..<2000 {
            let base = Duration.milliseconds(Int64(random.next() % 400_000))
            let failures = Int(random.next() % 12)
            let draw = Double(random.next() >> 11) / Double(1 << 53)
            let delay = options.delay(base: base, failures: failures, random: draw)
            #expect(delay >= options.minReconnectDelay)
            #expect(delay <= (failures > 0 ? options.maxReconnectDelay : options.maxRetryDelay))
        }
        let low = options.delay(base: .seconds(10), failures: 0, random: 0)
        let high = options.delay(base: .seconds(10), failures: 0, random: 1)
        #expect(low == .seconds(8) && high == .seconds(12))
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
