import Conveyor
import ConveyorTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Many requests to a real server, each task cancelled at a random moment while requests
/// connect, stream and complete. On Linux, FoundationNetworking's `URLSession.data(for:)` cancels
/// its task synchronously inside Swift's cancellation handler, which can deadlock the whole
/// process (swift-corelibs-foundation#5412). Conveyor's transports must finish every request
/// with a response or `.cancelled`. A watchdog exits the process if the storm hangs.
///
/// A storm slows other sessions' requests in the same process while it lasts (seen here: the
/// loopback fault tests, running in parallel, hit their 5 s timeouts), so the two storms run one
/// after the other, and the fault tests give their requests 30 s.
@Suite(.serialized) struct CancellationStormTests {
    @Test(arguments: TransportKind.allCases)
    func aCancellationStormFinishesEveryRequest(kind: TransportKind) async throws {
        let watchdog = Watchdog(seconds: hangBound, "the cancellation storm (\(kind.rawValue))")
        defer { watchdog.disarm() }
        try await LocalServer.withServer { server in
            let client = NetworkClient(baseURL: server.baseURL, transport: kind.make(.ephemeral, connections: 32))
            var generator = SystemRandomNumberGenerator()
            let outcomes = await withTaskGroup(of: String.self) { group in
                for index in 0..<300 {
                    let serverDelay = Double.random(in: 0...0.3, using: &generator)
                    let cancelAfter = Int.random(in: 0...300, using: &generator)
                    // Fast, streaming and slow answers, so cancellations race with every stage.
                    let path = ["/echo", "/bytes?count=200000", "/slow?seconds=\(serverDelay)"][index % 3]
                    let task = Task { () -> String in
                        do throws(NetworkError) {
                            _ = try await client.send(Request<Data>(path: path))
                            return "success"
                        } catch .cancelled {
                            return "cancelled"
                        } catch {
                            return "unexpected: \(error)"
                        }
                    }
                    // Cancellation arrives from another thread at a random moment, as it does
                    // when a user leaves a screen.
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(cancelAfter)) { task.cancel() }
                    group.addTask { await task.value }
                }
                var outcomes: [String] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            #expect(outcomes.count == 300)
            let unexpected = outcomes.filter { $0 != "success" && $0 != "cancelled" }
            #expect(unexpected.isEmpty, "\(unexpected.prefix(5))")
            let succeeded = outcomes.filter { $0 == "success" }.count
            print("STORM \(kind.rawValue): \(succeeded) succeeded, \(outcomes.count - succeeded) cancelled")
            #expect(outcomes.contains("cancelled"))
        }
    }
}

/// Requests cancelled just after their data task starts, while FoundationNetworking looks the
/// request up in the session's `URLCache` on a background queue. A cancel that lands in that
/// window makes FoundationNetworking report the task's failure after the task has left the
/// session's registry, and the process traps ("Trying to access a behaviour for a task that in
/// not in the registry": swift-corelibs-foundation#3296). Conveyor's transports must never cancel
/// into that window. The sessions here have a `URLCache`, as `.default` and `.ephemeral` do.
@Suite(.serialized) struct CancelAtStartTests {
    @Test(arguments: TransportKind.allCases)
    func cancellingRightAfterTheStartNeverTraps(kind: TransportKind) async throws {
        let watchdog = Watchdog(seconds: hangBound, "cancel at start (\(kind.rawValue))")
        defer { watchdog.disarm() }
        try await LocalServer.withServer { server in
            let client = NetworkClient(baseURL: server.baseURL, transport: kind.make(.default, connections: 16))
            var generator = SystemRandomNumberGenerator()
            for _ in 0..<20 {
                let outcomes = await withTaskGroup(of: String.self) { group in
                    for _ in 0..<100 {
                        let spin = Int.random(in: 0...2_000, using: &generator)
                        let task = Task { () -> String in
                            do throws(NetworkError) {
                                _ = try await client.send(Request<Data>(path: "/echo"))
                                return "success"
                            } catch .cancelled {
                                return "cancelled"
                            } catch {
                                return "unexpected: \(error)"
                            }
                        }
                        // Cancel from another thread a few microseconds after the start.
                        Thread.detachNewThread {
                            var x = 0
                            for i in 0..<spin { x &+= i }
                            if x >= 0 { task.cancel() }
                        }
                        group.addTask { await task.value }
                    }
                    var outcomes: [String] = []
                    for await outcome in group { outcomes.append(outcome) }
                    return outcomes
                }
                let unexpected = outcomes.filter { $0 != "success" && $0 != "cancelled" }
                #expect(unexpected.isEmpty, "\(unexpected.prefix(5))")
            }
        }
    }
}

@Suite struct URLSessionTransportCacheTests {
    @Test func onLinuxTheTransportsSessionHasNoURLCacheAndTheCallersConfigurationIsUntouched() {
        let configuration = URLSessionConfiguration.default
        let before = configuration.urlCache
        let transport = URLSessionTransport(configuration: configuration)
        #expect(configuration.urlCache === before)
        #if canImport(FoundationNetworking)
            #expect(before != nil)
            #expect(transport.session.configuration.urlCache == nil)
        #else
            #expect(transport.session.configuration.urlCache != nil)
        #endif
    }
}

/// The two URLSession-based transports the storms run against.
enum TransportKind: String, CaseIterable, CustomTestStringConvertible {
    case conveyorTransport, plainSession
    var testDescription: String { rawValue }

    /// A transport of this kind on `configuration` (`.default` and `.ephemeral` have a `URLCache`).
    func make(_ configuration: URLSessionConfiguration, connections: Int) -> any HTTPTransport {
        configuration.httpMaximumConnectionsPerHost = connections
        return switch self {
        case .conveyorTransport: URLSessionTransport(configuration: configuration)
        case .plainSession: URLSession(configuration: configuration)
        }
    }
}
