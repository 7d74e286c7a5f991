// The control for NearMisses.swift: the same hooks written correctly. Not part of any target;
// NearMissCompileTests expects it to type-check cleanly, so a refusal of NearMisses.swift cannot
// come from a missing module or a broken harness.
import Conveyor
import ConveyorPipeline

struct AcceptedEveryHook: HeaderAdding, RequestModifying, SendObserving, AttemptIntercepting, ResponseValidating,
    RetryDeciding, SuccessObserving, FailureObserving, TransferProgressObserving
{
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders { [:] }
    func modify(_ request: inout HTTPRequest, context: RequestContext) async throws {}
    func beforeSend(_ request: HTTPRequest, context: RequestContext) async {}
    func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        try await next(request)
    }
    func validate(_ response: HTTPResponse, context: RequestContext) async throws {}
    func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
        -> RetryDecision
    {
        .doNotRetry
    }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {}
    func afterFailure(_ error: NetworkError, context: RequestContext) async {}
    func transferProgressed(_ progress: TransferProgress, context: RequestContext) {}
}

// A synchronous, non-throwing method may implement an async throwing hook: it is called.
struct AcceptedSynchronousHeaders: HeaderAdding {
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) -> HTTPHeaders { [:] }
}

struct AcceptedWrapper: WrappingRequestBehavior, SuccessObserving {
    let inner: CombinedRequestBehavior
    var wrappedBehaviors: [any RequestBehavior] { inner.behaviors }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {
        await inner.afterSuccess(response, context: context)
    }
}

// An endpoint with behaviors and exclusions of its own, declared.
enum AcceptedEndpoint: EndpointBehaviors, EndpointExclusions {
    case login
    var path: String { "/login" }
    var behaviors: [any RequestBehavior] { [HeadersBehavior(["X-Login": "1"])] }
    var exclusions: [BehaviorExclusion] { [.type(AuthTokenBehavior.self), .named("logging")] }
}
