// The token part of Examples/FirstHour with Get 2.2: Get has no authentication support beyond
// the delegate's hooks, so the store coalesces concurrent refreshes itself, and the delegate
// (MovieClient.swift) adds the token and asks for the refresh on a 401. Not compiled (see
// README.md in this folder).
import Foundation

public protocol SecretStorage: Sendable {
    func read(_ key: String) async throws -> String?
    func write(_ value: String?, for key: String) async throws
}

public actor SessionStore {
    private let storage: any SecretStorage
    private let refreshCall: @Sendable (String?) async throws -> String
    private var refreshing: Task<String, any Error>?

    public init(storage: any SecretStorage, refreshCall: @escaping @Sendable (String?) async throws -> String) {
        self.storage = storage
        self.refreshCall = refreshCall
    }

    public func currentToken() async throws -> String? {
        try await storage.read("access-token")
    }

    /// Refreshes once for every request that failed with `expired`; a request that sent an older
    /// token than the current one just retries.
    public func refreshToken(replacing expired: String?) async throws -> String {
        if let refreshing { return try await refreshing.value }
        if let current = try await currentToken(), current != expired { return current }
        let task = Task { [storage, refreshCall] in
            let fresh = try await refreshCall(expired)
            try await storage.write(fresh, for: "access-token")
            return fresh
        }
        refreshing = task
        defer { refreshing = nil }
        return try await task.value
    }

    public func signIn(_ session: Session) async throws { try await storage.write(session.accessToken, for: "access-token") }
}
