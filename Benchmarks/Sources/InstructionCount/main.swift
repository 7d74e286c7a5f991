// Runs one in-memory scenario a given number of times, for counting instructions with
// valgrind's callgrind (see Benchmarks/instructions.sh). Run twice with different counts; the
// difference divided by the difference in counts is the cost of one request, without start-up.
import BenchSupport
import Dispatch
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let count = Int(arguments[1]), let scenario = Scenario(rawValue: arguments[0]) else {
    print("usage: instruction-count <\(Scenario.allCases.map(\.rawValue).joined(separator: "|"))> <requests>")
    exit(2)
}
// No top-level `await`: an async main parks the main thread in dispatch_main, which valgrind
// cannot run. The work runs in a detached task (off the main actor, which the waiting main
// thread holds); the main thread waits on a semaphore, then exits.
let done = DispatchSemaphore(value: 0)
Task.detached {
    do {
        try await scenario.run(count)
    } catch {
        print("failed: \(error)")
        exit(1)
    }
    done.signal()
}
done.wait()
exit(0)
