public import ConveyorPipeline

/// Where ``AuthTokenBehavior`` reads the current access token (a keychain, a session store).
public protocol TokenProvider: Sendable {
    /// The token to send now, or `nil` to send the request without one.
    /// - Throws: An error that fails the request (as `NetworkError.behaviorFailed`).
    func currentToken() async throws -> String?
}

/// Gets a new access token when the server answered 401, for ``AuthTokenBehavior``.
///
/// The refresher must store the new token where the ``TokenProvider`` reads it: the retried
/// request reads the provider again.
public protocol TokenRefresher: Sendable {
    /// Obtains and stores a new token.
    /// - Parameter expiredToken: The token the server rejected (`nil` if none was sent).
    /// - Returns: The new token.
    /// - Throws: When no new token can be had (the user must sign in again).
    func refreshToken(replacing expiredToken: String?) async throws -> String
}

/// A token store in memory: a ``TokenProvider`` whose token you set, and a ``TokenRefresher``
/// that calls your closure and stores what it returns. Handy for demos, tests and apps that keep
/// the token in memory only.
///
/// ```swift
/// let store = InMemoryTokenStore(token: "initial") { expired in try await api.refresh(expired) }
/// let auth = AuthTokenBehavior(tokens: store, refresher: store)
/// ```
public final class InMemoryTokenStore: TokenProvider, TokenRefresher {
    private let token: Locked<String?>
    private let refresh: (@Sendable (String?) async throws -> String)?

    /// Creates a store.
    /// - Parameters:
    ///   - token: The initial token.
    ///   - refresh: Obtains a new token; `nil` makes refreshing fail with ``AuthError/noRefresher``.
    public init(token: String?, refresh: (@Sendable (String?) async throws -> String)? = nil) {
        self.token = Locked(token)
        self.refresh = refresh
    }

    /// The stored token.
    public func currentToken() async throws -> String? { token.withLock { $0 } }

    /// Replaces the stored token.
    /// - Parameter newToken: The new token, or `nil` to sign out.
    public func setToken(_ newToken: String?) { token.withLock { $0 = newToken } }

    /// Calls the refresh closure and stores its token.
    public func refreshToken(replacing expiredToken: String?) async throws -> String {
        guard let refresh else { throw AuthError.noRefresher }
        let fresh = try await refresh(expiredToken)
        token.withLock { $0 = fresh }
        return fresh
    }
}

/// Why ``AuthTokenBehavior`` failed a request.
public enum AuthError: Error, Sendable, SafelyDescribable {
    /// The token refresh failed; every request waiting for it fails with this. The underlying
    /// error is described by type only, since it may carry credentials.
    case refreshFailed(underlying: any Error)
    /// A refresh was needed but no refresher was configured.
    case noRefresher
    /// The refresh took longer than the behavior's `refreshTimeout` and was abandoned.
    case refreshTimedOut

    /// Explains the failure without secrets.
    public var description: String {
        switch self {
        case .refreshFailed(let underlying): "the token refresh failed (\(type(of: underlying)))"
        case .noRefresher: "no token refresher is configured"
        case .refreshTimedOut: "the token refresh took longer than its timeout"
        }
    }
}
