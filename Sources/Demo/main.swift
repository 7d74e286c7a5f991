import Conveyor
import ConveyorTesting
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

let usage = """
    conveyor-demo — see Conveyor's behavior pipeline at work.

    USAGE
      swift run conveyor-demo                 Run the story on an in-memory server (no network).
      swift run conveyor-demo --real-time     The same, but really wait for retry delays (2 s).
      swift run conveyor-demo --url URL       Send one GET to URL through the same behaviors and print the trace.
      swift run conveyor-demo --help          Show this help.

    The story shows: a client with headers, auth, an activity counter, retry and logging; a 401
    that triggers one token refresh and a retry; a 503 with Retry-After retried after the right
    wait (on an injected clock, so nothing sleeps unless --real-time is given); a login request that opts out of auth; a
    per-request behavior; and a cancelled request whose activity counter returns to 0.
    It exits with status 1 if any step does not behave as described.
    """

func runStory(realTime: Bool) async -> Int32 {
    print("Conveyor demo: six requests through one client, on an in-memory server.")
    print("Client behaviors, outermost first: Headers → AuthToken → ActivityCounter → Retry → Logging")
    print("Request-side hooks run first → last, response-side hooks last → first.")
    let story = Story(realTime: realTime)
    let steps = await story.run { print($0) }

    print("")
    print("Summary")
    let rows = steps.map { step in
        [step.ok ? "✔" : "✘", step.request, "\(step.attempts)", step.outcome]
    }
    let header = ["", "request", "attempts", "outcome"]
    let widths = (0..<header.count).map { column in
        ([header] + rows).map { $0[column].count }.max() ?? 0
    }
    for row in [header] + rows {
        let cells = row.enumerated().map { column, cell in
            column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
        }
        print("  " + cells.joined(separator: "  "))
    }
    print("")
    print("Timings of GET /me, per attempt (MetricsBehavior, last in the chain; an in-memory server has no network phases):")
    let me = story.metrics.withLock { $0 }.filter { $0.path.hasSuffix("/me") }
    for attempt in me { print("  " + PrintMetricsSink.line(for: attempt)) }
    let failed = steps.filter { !$0.ok } + (me.count == 2 ? [] : [Story.Step(title: "timings", request: "GET /me")])
    print("")
    print(failed.isEmpty ? "All \(steps.count) steps behaved as described." : "\(failed.count) step(s) did NOT behave as described.")
    return failed.isEmpty ? 0 : 1
}

func runReal(_ text: String) async -> Int32 {
    guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
        print("conveyor-demo: '\(text)' is not an http(s) URL")
        return 2
    }
    let trace = Trace()
    let behaviors: [any RequestBehavior] = [
        HeadersBehavior(["User-Agent": "conveyor-demo/1.0"]),
        ActivityCounterBehavior(counter: NetworkActivityCounter()),
        RetryBehavior(.exponentialBackoff(maxAttempts: 3)),
        LoggingBehavior(sink: PrintLogSink()),
        MetricsBehavior(sink: PrintMetricsSink()),
    ]
    let client = NetworkClient(baseURL: url, configuration: .init(timeout: .seconds(30))) {
        behaviors.map { Traced($0, trace: trace) }
    }
    print("GET \(url.absoluteString)")
    do throws(NetworkError) {
        let response = try await client.send(Request<HTTPResponse>(path: ""))
        for line in Trace.render(trace.drain()) { print(line) }
        print("→ \(response.status), \(response.body.count) bytes")
        return 0
    } catch {
        for line in Trace.render(trace.drain()) { print(line) }
        print("→ failed: \(error)")
        return 1
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
switch arguments.first {
case nil:
    status = await runStory(realTime: false)
case "--real-time":
    status = await runStory(realTime: true)
case "--help", "-h":
    print(usage)
    status = 0
case "--url":
    if arguments.count == 2 {
        status = await runReal(arguments[1])
    } else {
        print("conveyor-demo: --url needs one URL\n\n\(usage)")
        status = 2
    }
default:
    print("conveyor-demo: unknown argument '\(arguments[0])'\n\n\(usage)")
    status = 2
}
exit(status)
