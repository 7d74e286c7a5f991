import Conveyor
import Foundation

/// Collects hook calls so the demo can print them in order.
final class Trace: Sendable {
    struct Event: Sendable {
        let requestID: RequestID
        let attempt: Int
        let hook: RequestHook
        let behavior: String
    }

    private let events = Locked<[Event]>([])

    func record(_ hook: RequestHook, _ behavior: String, _ context: RequestContext) {
        let event = Event(requestID: context.requestID, attempt: context.attempt, hook: hook, behavior: behavior)
        events.withLock { $0.append(event) }
    }

    /// Returns and forgets what was recorded.
    func drain() -> [Event] {
        events.withLock { events in
            defer { events = [] }
            return events
        }
    }

    /// Prints consecutive calls of the same hook and attempt on one line, in call order.
    static func render(_ events: [Event]) -> [String] {
        var lines: [String] = []
        var index = 0
        while index < events.count {
            let first = events[index]
            var names: [String] = []
            while index < events.count, events[index].hook == first.hook, events[index].attempt == first.attempt {
                names.append(events[index].behavior)
                index += 1
            }
            let hook = first.hook.rawValue.padding(toLength: 17, withPad: " ", startingAt: 0)
            lines.append("    attempt \(first.attempt)  \(hook) \(names.joined(separator: " → "))")
        }
        return lines
    }
}

/// Wraps a behavior, records each hook it declares as it runs, then forwards the call unchanged.
struct Traced: HeaderAdding, RequestModifying, SendObserving, AttemptIntercepting, ResponseValidating, RetryDeciding,
    SuccessObserving, FailureObserving
{
    /// The wrapped behavior, as a one-member chain: it runs whichever hooks the behavior declares.
    let inner: CombinedRequestBehavior
    let declared: UInt16
    let label: String
    let trace: Trace

    init(_ inner: any RequestBehavior, trace: Trace) {
        self.inner = CombinedRequestBehavior([inner])
        self.declared = type(of: inner)._declaredHooks
        self.name = inner.name
        self.label = inner.name.replacingOccurrences(of: "Behavior", with: "")
        self.trace = trace
    }

    let name: String

    private func record(_ hook: RequestHook, _ context: RequestContext) {
        if declared & hook.bit != 0 { trace.record(hook, label, context) }
    }

    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        record(.additionalHeaders, context)
        return try await inner.additionalHeaders(for: request, context: context)
    }
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {
        record(.modify, context)
        try await inner.modify(&request, context: context)
    }
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        record(.beforeSend, context)
        await inner.beforeSend(request, context: context)
    }
    /// Forwarded, not traced: only `MetricsBehavior` implements it here, and the story's traces
    /// show the hooks every behavior takes part in.
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await inner.intercept(request, context: context, next: next)
    }
    func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        record(.validate, context)
        try await inner.validate(response, context: context)
    }
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        record(.retryDecision, context)
        return await inner.retryDecision(after: failure, response: response, context: context)
    }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        record(.afterSuccess, context)
        await inner.afterSuccess(response, context: context)
    }
    func afterFailure(_ error: NetworkError, context: RequestContext) async {
        record(.afterFailure, context)
        await inner.afterFailure(error, context: context)
    }
}
