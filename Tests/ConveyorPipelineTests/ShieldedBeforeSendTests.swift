import ConveyorPipeline
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

/// A guarded first attempt (a timeout, or a request interruptible from the start) runs the
/// request's `beforeSend` hooks inside its one step, in a shield: nothing ends the step while they
/// run, as nothing did when they ran in the caller's task between two steps (contract rules 3
/// and 10: what `beforeSend` begins the outcome hooks end, once; a deadline holds). Each test
/// holds a `beforeSend` hook where the step would end, and checks what a request in the caller's
/// task would have seen.
@Suite struct ShieldedBeforeSendTests {
    /// A `beforeSend` hook stuck (ignoring cancellation) until the test releases it; records the
    /// order of its hooks and whether its task was cancelled when it was released.
    final class Held: SendObserving, SuccessObserving, FailureObserving, Sendable {
        let stuck = Stuck()
        let events = Locked<[String]>([])
        let sawCancellation = Locked(false)

        func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
            events.withLock { $0.append("beforeSend") }
            await stuck.wait()
            if Task.isCancelled { sawCancellation.withLock { $0 = true } }
            events.withLock { $0.append("beforeSend ended") }
        }
        func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
            events.withLock { $0.append("afterSuccess") }
        }
        func afterFailure(_ error: NetworkError, context: RequestContext) async {
            let name = error == .timedOut ? "timedOut" : error == .cancelled ? "cancelled" : "\(error)"
            events.withLock { $0.append("afterFailure \(name)") }
        }
        var recorded: [String] { events.withLock { $0 } }
    }

    /// Sends `/x` in a task of its own; `ended` is set once the request returned.
    static func send(_ client: NetworkClient, ended: Locked<Bool>) -> Task<NetworkError?, Never> {
        Task {
            defer { ended.withLock { $0 = true } }
            do throws(NetworkError) {
                try await client.send(Request<Void>(path: "/x"))
                return nil
            } catch {
                return error
            }
        }
    }

    /// Turns enough for a request that was wrongly ended to return (everything is in memory).
    static func settle() async {
        for _ in 0..<2_000 { await Task.yield() }
    }

    @Test func aDeadlineThatPassesDuringBeforeSendEndsTheRequestOnceItReturns() async {
        let clock = ManualClock()
        let held = Held()
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = NetworkClient(
            baseURL: testBaseURL, transport: mock, configuration: .init(timeout: .seconds(1), timeoutClock: clock)
        ) { held }
        let ended = Locked(false)
        let task = Self.send(client, ended: ended)
        await held.stuck.entered(1)
        await clock.waitForSleepers(1)  // the step's deadline
        clock.advance(by: .seconds(2))
        await Self.settle()
        #expect(!ended.withLock { $0 }, "the request ended while its beforeSend hook was running")
        #expect(held.recorded == ["beforeSend"])
        held.stuck.release()
        #expect(await task.value == .timedOut)
        #expect(held.recorded == ["beforeSend", "beforeSend ended", "afterFailure timedOut"])
        #expect(mock.requests.isEmpty, "sent after its deadline")
    }

    @Test func theCallersCancellationReachesBeforeSendAndEndsTheRequestOnceItReturns() async {
        let held = Held()
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = NetworkClient(
            baseURL: testBaseURL, transport: mock,
            configuration: .init(timeout: .seconds(60), timeoutClock: ManualClock())
        ) { held }
        let ended = Locked(false)
        let task = Self.send(client, ended: ended)
        await held.stuck.entered(1)
        task.cancel()
        await Self.settle()
        #expect(!ended.withLock { $0 }, "the request ended while its beforeSend hook was running")
        held.stuck.release()
        #expect(await task.value == .cancelled)
        #expect(held.sawCancellation.withLock { $0 }, "the hook did not see its request's task cancelled")
        #expect(held.recorded == ["beforeSend", "beforeSend ended", "afterFailure cancelled"])
        #expect(mock.requests.isEmpty)
    }

    @TaskLocal static var trace: String?

    /// The caller's task-local values reach every hook of a guarded attempt, `beforeSend`
    /// included, though they run in the step's task (a tracer's `ServiceContext.current` is one).
    @Test func hooksInAGuardedStepSeeTheCallersTaskLocalValues() async throws {
        final class Reads: HeaderAdding, SendObserving, AttemptIntercepting, SuccessObserving, Sendable {
            let seen = Locked<[String]>([])
            func note(_ hook: String) { seen.withLock { $0.append("\(hook) \(ShieldedBeforeSendTests.trace ?? "none")") } }
            func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
                note("additionalHeaders")
                return [:]
            }
            func beforeSend(_ request: HTTPRequest, context: RequestContext) async { note("beforeSend") }
            func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
                -> HTTPResponse
            {
                note("intercept")
                return try await next(request)
            }
            func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { note("afterSuccess") }
        }
        let reads = Reads()
        let mock = MockTransport()
        mock.stub(nil, "/api/x", reply: .status(200))
        let client = NetworkClient(
            baseURL: testBaseURL, transport: mock, configuration: .init(timeout: .seconds(60), timeoutClock: ManualClock())
        ) { reads }
        try await Self.$trace.withValue("t-1") { try await client.send(Request<Void>(path: "/x")) }
        #expect(
            reads.seen.withLock { $0 } == [
                "additionalHeaders t-1", "beforeSend t-1", "intercept t-1", "afterSuccess t-1",
            ])
    }

    /// A `beforeSend` hook that makes the request interruptible (as `BackgroundTaskBehavior`
    /// does): `context.cancel()` then ends the attempt in flight, here a transport stuck ignoring
    /// cancellation, at once.
    @Test func aRequestMadeInterruptibleInBeforeSendIsInterruptedInFlight() async {
        final class Interruptible: SendObserving, FailureObserving, Sendable {
            let context = Locked<RequestContext?>(nil)
            let failures = Locked<[NetworkError]>([])
            func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
                context.makeInterruptible()
                self.context.withLock { $0 = context }
            }
            func afterFailure(_ error: NetworkError, context: RequestContext) async {
                failures.withLock { $0.append(error) }
            }
        }
        let behavior = Interruptible()
        let stuck = Stuck()
        let mock = MockTransport()
        mock.stub(
            nil, "/api/x",
            reply: .handler { _ in
                await stuck.wait()
                return .status(200)
            })
        let client = NetworkClient(
            baseURL: testBaseURL, transport: mock,
            configuration: .init(timeout: .seconds(60), timeoutClock: ManualClock())
        ) { behavior }
        let ended = Locked(false)
        let task = Self.send(client, ended: ended)
        await stuck.entered(1)
        behavior.context.withLock { $0 }?.cancel()
        let error = await withinTimeLimit(seconds: hangBound) { await task.value }
        stuck.release()
        #expect(error == .some(.cancelled))
        #expect(behavior.failures.withLock { $0 } == [.cancelled])
    }
}
