import Conveyor
import Foundation

/// Signs every attempt and times every request (Docs/WritingABehavior.md: hooks declared by their
/// protocols, per-request state in the context, the request named from the context).
public struct SigningAndTimingBehavior: HeaderAdding, SendObserving, SuccessObserving, FailureObserving {
    enum Start: RequestContextKey { static let defaultValue: ContinuousClock.Instant? = nil }

    let secret: String
    let report: @Sendable (String, Duration) async -> Void

    public init(secret: String, report: @escaping @Sendable (String, Duration) async -> Void) {
        self.secret = secret
        self.report = report
    }

    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        // A toy signature: the method and path with the secret. Real code would use an HMAC.
        let signed = "\(request.method.rawValue) \(request.url.path) \(secret)"
        return ["X-Signature": String(signed.utf8.reduce(0) { ($0 &* 31) &+ Int($1) } & 0xFFFF_FFFF)]
    }

    public func beforeSend(_ request: HTTPRequest, context: RequestContext) async {
        context[Start.self] = .now
    }

    public func afterSuccess(_ response: HTTPResponse, context: RequestContext) async { await finish(context) }

    public func afterFailure(_ error: NetworkError, context: RequestContext) async { await finish(context) }

    private func finish(_ context: RequestContext) async {
        guard let start = context[Start.self] else { return }
        let request = context.originalRequest
        await report("\(request.method) \(request.url.path)", .now - start)
    }
}

/// A banner for one request: shows its failure (README: a behavior for one request only).
public struct BannerBehavior: FailureObserving {
    let show: @Sendable (String) async -> Void

    public init(show: @escaping @Sendable (String) async -> Void) { self.show = show }

    public func afterFailure(_ error: NetworkError, context: RequestContext) async {
        guard !error.isCancellation else { return }
        switch error {
        case .offline, .timedOut, .connectionFailed: await show("Check your connection.")
        case .unacceptableStatus: await show("The server answered \(error.status ?? 0).")
        default: await show("Something went wrong.")
        }
    }
}
