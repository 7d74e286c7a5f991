@testable import Conveyor
import ConveyorTesting
import Foundation
import Testing

/// Contract rule 19 for event streams: a reconnect is a retry, and spends from the origin's
/// retry budget; a refused one ends the stream with what ended its last connection.
@Suite struct EventStreamBudgetTests {
    func client(_ transport: ScriptedEventTransport, budget: RetryBudget?) -> NetworkClient {
        var configuration = NetworkClient.Configuration(clock: ImmediateClock())
        configuration.retryBudget = budget
        return NetworkClient(baseURL: URL(string: "http://127.0.0.1:9/")!, transport: transport, configuration: configuration)
    }

    /// Connections that fail before any event: each reconnect spends, and a refused one ends the
    /// stream with what ended the last connection, before the stream's own limit of failures.
    @Test(arguments: [true, false])
    func reconnectsAfterFailuresSpendTheBudget(budgeted: Bool) async {
        let transport = ScriptedEventTransport([], then: .init(status: 0))
        let budget = RetryBudget(ratio: 0, minimumPerSecond: 0.3, clock: ManualClock())  // 3 retries
        var options = EventStreamOptions()
        options.maxConsecutiveFailures = 8
        var failure: NetworkError?
        do {
            for try await _ in client(transport, budget: budgeted ? budget : nil).events(Request<Data>(path: "/s"), options: options) {}
        } catch let error as NetworkError {
            failure = error
        } catch {
            Issue.record("not a NetworkError: \(error)")
        }
        #expect(failure?.name == "connectionFailed")  // what ended the last connection
        if budgeted {
            #expect(transport.requests.count == 4)  // the first connection and three reconnects
            let origin = Origin(URL(string: "http://127.0.0.1:9/")!)!
            #expect(budget.snapshot(for: origin) == .init(requests: 1, retries: 3, refused: 1, available: 0))
        } else {
            #expect(transport.requests.count == 8)
        }
    }

    /// A reconnect after a connection that delivered events is counted, never refused: the stream
    /// was working, and the events it delivered are what the caller asked for.
    @Test func reconnectsAfterEventsAreCountedNotRefused() async throws {
        let transport = ScriptedEventTransport(Array(repeating: .init(chunks: ["id: 1\ndata: x\n\n"], ending: .fail), count: 30))
        let budget = RetryBudget(ratio: 0, minimumPerSecond: 0, clock: ManualClock())
        var events = 0
        for try await _ in client(transport, budget: budget).events(Request<Data>(path: "/s")) { events += 1 }
        #expect(events == 30)
        let origin = Origin(URL(string: "http://127.0.0.1:9/")!)!
        #expect(budget.snapshot(for: origin) == .init(requests: 1, retries: 0, refused: 0, available: 0, exempt: 30))
    }

    /// The default budget runs on the client's retry clock: a stream whose reconnects wait their
    /// delays (a second or more) is never refused, however long it lives.
    @Test func aStreamThatWaitsItsDelaysKeepsReconnecting() async throws {
        let connection = ScriptedEventTransport.Connection(chunks: ["id: 1\ndata: x\n\n"], ending: .fail)
        let transport = ScriptedEventTransport(Array(repeating: connection, count: 300))
        var events = 0
        for try await _ in client(transport, budget: nil).events(Request<Data>(path: "/s")) { events += 1 }
        let budgeted = ScriptedEventTransport(Array(repeating: connection, count: 300))
        let clock = ImmediateClock()
        let defaultClient = NetworkClient(
            baseURL: URL(string: "http://127.0.0.1:9/")!, transport: budgeted, configuration: .init(clock: clock))
        var budgetedEvents = 0
        for try await _ in defaultClient.events(Request<Data>(path: "/s")) { budgetedEvents += 1 }
        #expect(events == 300 && budgetedEvents == 300)
        #expect(budgeted.requests.count == transport.requests.count)
    }
}
