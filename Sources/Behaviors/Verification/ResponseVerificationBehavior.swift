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
public struct ResponseVerificationBehavior: RequestBehavior {
    /// The name used in errors and logs and by `.named(_:)` exclusions.
    public let name: String

    enum Nonce: RequestContextKey { static let defaultValue: String? = nil }

    /// The header sent and expected back.
    public let headerName: String
    /// Makes a nonce per attempt.
    public let makeNonce: @Sendable () -> String

    /// Creates the behavior.
    /// - Parameters:
    ///   - headerName: The header sent and expected back; `X-Request-Nonce` by default.
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
        return [headerName: nonce]
    }

    /// Fails a 2xx response that does not echo this attempt's nonce.
    public func validate(_ response: HTTPResponse, context: RequestContext) async throws {
        guard (200..<300).contains(response.status) else { return }
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
