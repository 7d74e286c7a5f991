// Behaviors whose hooks are written with a near-miss signature. Not part of any target:
// NearMissCompileTests (Tests/ConveyorTests) type-checks this file against the built modules and expects the compiler
// to refuse every type below whose name begins with `Refused`, each with its own diagnostic.
// Nothing here may compile.
import Conveyor
import ConveyorPipeline

// The benchmarks' old `TrivialHooks`: says it is a behavior, declares no hook, and its
// `additionalHeaders` returns the wrong type. It compiled silently and was never called.
struct RefusedTrivialHooks: RequestBehavior {
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> [String: String] { [:] }
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async {}
}

// Correct hooks, but no hook protocol declared: still not a behavior.
struct RefusedUndeclared: RequestBehavior {
    func afterFailure(_ error: NetworkError, context: RequestContext) async {}
}

// A wrapper that forwards nothing it declares.
struct RefusedWrapperOnly: WrappingRequestBehavior {
    var wrappedBehaviors: [any RequestBehavior] { [] }
}

// Another return type.
struct RefusedHeadersAsDictionary: HeaderAdding {
    func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> [String: String] { [:] }
}

// A missing `inout`.
struct RefusedModifyWithoutInout: RequestModifying {
    func modify(_ request: HTTPRequest, context: RequestContext) async throws {}
}

// Another label.
struct RefusedBeforeSendLabel: SendObserving {
    func beforeSend(request: HTTPRequest, context: RequestContext) async {}
}

// `next` of another type.
struct RefusedInterceptNext: AttemptIntercepting {
    func intercept(
        _ request: HTTPRequest, context: RequestContext, next: (HTTPRequest) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        try await next(request)
    }
}

// Another parameter type.
struct RefusedValidateRequest: ResponseValidating {
    func validate(_ response: HTTPRequest, context: RequestContext) async throws {}
}

// The response is optional in the hook, not here.
struct RefusedRetryResponse: RetryDeciding {
    func retryDecision(after failure: NetworkError, response: HTTPResponse, context: RequestContext) async
        -> RetryDecision
    {
        .doNotRetry
    }
}

// A `throws` the hook does not have.
struct RefusedAfterSuccessThrows: SuccessObserving {
    func afterSuccess(_ response: HTTPResponse, context: RequestContext) async throws {}
}

// Another label.
struct RefusedAfterFailureLabel: FailureObserving {
    func afterFailure(error: NetworkError, context: RequestContext) async {}
}

// An `async` the hook does not have (it runs on the transport's thread).
struct RefusedProgressAsync: TransferProgressObserving {
    func transferProgressed(_ progress: TransferProgress, context: RequestContext) async {}
}

// Another error type.
struct RefusedAfterFailureAnyError: FailureObserving {
    func afterFailure(_ error: any Error, context: RequestContext) async {}
}

// An endpoint's own behaviors under a guessed name (the British spelling).
struct RefusedEndpointBehaviorsName: EndpointBehaviors {
    var path: String { "/" }
    var behaviours: [any RequestBehavior] { [] }
}

// An endpoint's own behaviors as an array of one concrete behavior type.
struct RefusedEndpointBehaviorsType: EndpointBehaviors {
    var path: String { "/" }
    var behaviors: [HeadersBehavior] { [] }
}

// Exclusions as the behavior types themselves.
struct RefusedEndpointExclusionsTypes: EndpointExclusions {
    var path: String { "/" }
    var exclusions: [any RequestBehavior.Type] { [AuthTokenBehavior.self] }
}

// Exclusions under another name.
struct RefusedEndpointExcludedName: EndpointExclusions {
    var path: String { "/" }
    var excludedBehaviors: [BehaviorExclusion] { [] }
}
