import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

@testable import ConveyorBehaviors

/// A gate finds a request's record (a circuit, a limiter's account) by its client's scope when
/// the request goes to the client's base origin, and by its origin otherwise: never another
/// origin's record, whichever clients share the gate and wherever their requests go.
@Suite struct OriginRecordsTests {
    final class Record {
        let name: String
        init(_ name: String) { self.name = name }
    }

    static let a = Origin(URL(string: "https://a.test")!)!
    static let b = Origin(URL(string: "https://b.test")!)!

    /// A request of the client `scope` belongs to, to `url`; to the client's base origin unless
    /// `targets` is false.
    func request(of scope: ClientScope, to url: String = "https://any.test/", targets: Bool = true) -> RequestContext {
        RequestContext(request: HTTPRequest(url: URL(string: url)!), scope: scope, targetsBaseOrigin: targets)
    }

    @Test func aScopeFindsOnlyItsOwnClientsRecord() {
        var records = OriginRecords<Record>()
        let scopeA = ClientScope(origin: Self.a)
        let scopeB = ClientScope(origin: Self.b)
        guard case .missing(let origin) = records.find(context: request(of: scopeA)) else {
            Issue.record("found a record in an empty table")
            return
        }
        #expect(origin == Self.a)
        records.insert(Record("a"), for: origin, context: request(of: scopeA))
        guard case .found(let found) = records.find(context: request(of: scopeA)) else {
            Issue.record("not found")
            return
        }
        #expect(found.name == "a")
        // Another client's scope is not the last one: its request is found by its own origin.
        guard case .missing(let missing) = records.find(context: request(of: scopeB)) else {
            Issue.record("b's request found a record")
            return
        }
        #expect(missing == Self.b)
        records.insert(Record("b"), for: Self.b, context: request(of: scopeB))
        // The last record is b's now: a's scope finds a's record (by a's origin).
        guard case .found(let again) = records.find(context: request(of: scopeA)) else {
            Issue.record("a's record is gone")
            return
        }
        #expect(again.name == "a")
        // A request of a's client to another origin (not its base origin: found by its origin,
        // though a's scope found the last record) finds that origin's record.
        guard
            case .found(let other) = records.find(context: request(of: scopeA, to: "https://b.test/x", targets: false))
        else {
            Issue.record("b's record is gone")
            return
        }
        #expect(other.name == "b")
        // And an origin alone finds its record.
        guard case .found(let byOrigin) = records.find(context: nil, origin: Self.a) else {
            Issue.record("a's record is gone")
            return
        }
        #expect(byOrigin.name == "a")
        // A record removed is not found by the scope that found it last.
        _ = records.find(context: request(of: scopeB))
        records[Self.b] = nil
        guard case .missing = records.find(context: request(of: scopeB)) else {
            Issue.record("a removed record was found")
            return
        }
        // A request with no origin (a client without a base URL, a URL without a host).
        guard case .noOrigin = records.find(context: request(of: ClientScope(origin: nil), to: "file:///x")) else {
            Issue.record("a request without an origin found a record")
            return
        }
    }

    /// Two clients with different base origins share one breaker, and each also sends to the
    /// other's origin by an absolute URL: every attempt is counted in its own origin's circuit.
    @Test func clientsSharingABreakerEachCountInTheirOwnOriginsCircuit() async {
        // Half of an origin's attempts failing opens its circuit.
        let breaker = CircuitBreaker(options: .init(failureRatio: 0.5, minimumThroughput: 1), clock: ManualClock())
        let mock = MockTransport()
        // `/fail` fails on a.test only.
        mock.stub(nil, "/fail", reply: .handler { request in .status(request.url.host == "a.test" ? 503 : 200) })
        mock.stub(nil, "/ok", reply: .status(200))
        func client(_ base: String) -> NetworkClient {
            var configuration = NetworkClient.Configuration(clock: ImmediateClock())
            configuration.retryBudget = nil
            return NetworkClient(baseURL: URL(string: base)!, transport: mock, configuration: configuration) {
                CircuitBreakerBehavior(breaker)
            }
        }
        let clientA = client("https://a.test")
        let clientB = client("https://b.test")
        func sent(_ client: NetworkClient, _ path: String) async -> Bool {
            do {
                try await client.send(Request<Void>(path: path))
                return true
            } catch {
                return false
            }
        }
        // Each client's last record is its own origin's, then the other's, in turn.
        #expect(await sent(clientA, "/ok"))
        #expect(await sent(clientB, "/ok"))
        #expect(await sent(clientA, "https://b.test/fail"))  // b.test answers: b's circuit stays closed
        #expect(await sent(clientB, "/ok"))
        #expect(breaker.state(of: Self.b) == .closed)
        #expect(!(await sent(clientB, "https://a.test/fail")))  // opens a's circuit, from b's client
        #expect(breaker.state(of: Self.a) != .closed)
        #expect(breaker.state(of: Self.b) == .closed)
        // a's client is refused at once; b's client still sends to b, and to a not at all.
        let before = mock.requests.count
        #expect(!(await sent(clientA, "/ok")))
        #expect(await sent(clientB, "/ok"))
        #expect(await sent(clientA, "https://b.test/ok"))
        #expect(!(await sent(clientB, "https://a.test/ok")))
        #expect(!(await sent(clientA, "/ok")))
        #expect(mock.requests.count == before + 2)
        #expect(mock.requests.suffix(2).allSatisfy { $0.url.host == "b.test" })
    }
}
