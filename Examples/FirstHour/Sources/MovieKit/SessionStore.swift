import Conveyor

/// Where the app keeps secrets (the Keychain on iOS); injected so tests pass a fake.
public protocol SecretStorage: Sendable {
    func read(_ key: String) async throws -> String?
    func write(_ value: String?, for key: String) async throws
}

/// One object owns the token: it reads it, and a refresh saves the new one where it reads
/// (Docs/Authentication.md, "One store does both").
public actor SessionStore: TokenProvider, TokenRefresher {
    private let storage: any SecretStorage
    private let refreshCall: @Sendable (String?) async throws -> String

    public init(storage: any SecretStorage, refreshCall: @escaping @Sendable (String?) async throws -> String) {
        self.storage = storage
        self.refreshCall = refreshCall
    }

    public func currentToken() async throws -> String? {
        try await storage.read("access-token")
    }

    public func refreshToken(replacing expiredToken: String?) async throws -> String {
        let fresh = try await refreshCall(expiredToken)
        try await storage.write(fresh, for: "access-token")
        return fresh
    }

    public func signIn(_ session: Session) async throws { try await storage.write(session.accessToken, for: "access-token") }
}
