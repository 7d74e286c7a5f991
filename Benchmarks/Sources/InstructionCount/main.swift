// Runs one in-memory scenario a given number of times, for counting instructions with
// valgrind's callgrind (see Benchmarks/instructions.sh). Run twice with different counts; the
// difference divided by the difference in counts is the cost of one request, without start-up.
import BenchSupport
import Conveyor
import Dispatch
import Foundation
import PeerSupport

/// The peer's scenarios: swift-openapi-runtime with 0, 1 or 10 no-op middlewares.
let peers = ["peer0": 0, "peer1": 1, "peer10": 10]

/// `realistic-1` … `realistic-6`: the first N behaviors of the realistic chain with its JSON
/// decode, so consecutive differences give each behavior's cost (BENCHMARKS.md, round two).
func realisticPrefix(_ name: String) -> Int? {
    guard name.hasPrefix("realistic-"), let n = Int(name.dropFirst("realistic-".count)), (1...6).contains(n) else {
        return nil
    }
    return n
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let count = Int(arguments[1]),
    Scenario(rawValue: arguments[0]) != nil || peers[arguments[0]] != nil || realisticPrefix(arguments[0]) != nil
else {
    let names = Scenario.allCases.map(\.rawValue) + peers.keys.sorted()
    print("usage: instruction-count <\(names.joined(separator: "|"))> <requests>")
    exit(2)
}
// No top-level `await`: an async main parks the main thread in dispatch_main, which valgrind
// cannot run. The work runs in a detached task (off the main actor, which the waiting main
// thread holds); the main thread waits on a semaphore, then exits.
let done = DispatchSemaphore(value: 0)
Task.detached {
    do {
        if let scenario = Scenario(rawValue: arguments[0]) {
            try await scenario.run(count)
        } else if let n = realisticPrefix(arguments[0]) {
            let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:8080/api")!, transport: CannedTransport()) {
                Array(realisticBehaviors().prefix(n))
            }
            let request = Request<Movie>(path: "/movies/7")
            for _ in 0..<count { _ = try await client.send(request) }
        } else if let middlewares = peers[arguments[0]] {
            let client = PeerClient(middlewares: middlewares)
            for _ in 0..<count { _ = try await client.send() }
        }
    } catch {
        print("failed: \(error)")
        exit(1)
    }
    done.signal()
}
done.wait()
exit(0)
