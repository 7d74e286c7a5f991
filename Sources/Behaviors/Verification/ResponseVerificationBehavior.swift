public import ConveyorPipeline
public import Foundation

/// Catches responses that did not come from your server (a captive portal's `200 OK` login
/// page): sends a random nonce header and fails a 2xx response that does not echo it back.
///
/// ```swift
/// // The server copies `X-Request-Nonce` from the request into the response.
/// let client = NetworkClient(baseURL: api) { ResponseVerificationBehavior() }
/// ```
///
/// A response without the echo fails the attempt with `NetworkError.behaviorFailed(behavior:
/// "ResponseVerificationBehavior", hook: .validate, underlying: ResponseVerificationError.nonceMismatch)`.
///
/// It composes with the answering behaviors, in either order: a response `CacheBehavior`
/// served from storage (a hit, or a `304` revalidation) and one `DeduplicationBehavior` shared
/// from another caller's call must echo *a* nonce (that request's, checked when it came from the
/// network; a captive portal's page echoes none), not this attempt's; and the nonce is left out
/// of de-duplication's identity.
public struct ResponseVerificationBehavior: HeaderAdding, ResponseValidating {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String

    enum Nonce: RequestContextKey { static let defaultValue: String? = nil }

    /// The header sent and expected back.
    package let headerName: String
    /// Makes a nonce per attempt.
    package let makeNonce: @Sendable () -> String

    /// Creates the behavior.
    /// - Parameters:
    ///   - headerName: The header sent and expected back; `X-Request-Nonce` by default (a
    ///     request's tag, no credential). A name that means a credential (`X-Nonce`) is treated as
    ///     one: redacted, part of the cache's and de-duplication's identity, never stored.
    ///   - makeNonce: Makes a nonce; a random UUID by default.
    ///   - name: The name used in errors and logs and by `.named(_:)` exclusions; the type's name by
    ///     default. Give two behaviors of one type different names to leave one out.
    public init(headerName: String = "X-Request-Nonce", makeNonce: @escaping @Sendable () -> String = { UUID().uuidString }, name: String? = nil) {
        self.name = name ?? String(describing: Self.self)
        self.headerName = headerName
        self.makeNonce = makeNonce
    }

    /// Sends a fresh nonce with every attempt.
    public func additionalHeaders(for request: HTTPRequest, context: RequestContext) async throws -> HTTPHeaders {
        let nonce = makeNonce()
        context[Nonce.self] = nonce
        if !context[PerAttemptHeaders.self].contains(headerName) {
            _ = context.update(PerAttemptHeaders.self) { names in
                names.append(headerName)
                return names
            }
        }
        return [headerName: nonce]
    }

    /// Fails a 2xx response that does not echo this attempt's nonce; a response from the cache
    /// or from a shared call is not this attempt's to check.
    public func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        guard (200..<300).contains(response.status) else { return }
        let fromCache = context[CacheOutcome.self].map { $0 == .hit || $0 == .revalidated } ?? false
        if fromCache || context[SharedCallAnswer.self] {
            // Another request's answer: it must echo that request's nonce. A page that echoes
            // none (a captive portal's, stored before validation ran) still fails.
            guard let echoed = response.headers[headerName], !echoed.isEmpty else {
                throw ResponseVerificationError.nonceMismatch
            }
            return
        }
        guard let nonce = context[Nonce.self], response.headers[headerName] == nonce else {
            throw ResponseVerificationError.nonceMismatch
        }
    }
}

/// Why ``ResponseVerificationBehavior`` rejected a response.
public enum ResponseVerificationError: Error, Sendable, Hashable, SafelyDescribable {
    /// The response did not echo the request's nonce: it may come from a captive portal or a proxy.
    case nonceMismatch

    /// Explains the failure.
    public var description: String { "the response did not echo the request nonce (captive portal or proxy?)" }
}
