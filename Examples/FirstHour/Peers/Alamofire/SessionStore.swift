// The token part of Examples/FirstHour with Alamofire 5.10: an Authenticator for
// AuthenticationInterceptor, which applies the credential, refreshes it once for concurrent 401s
// and retries. Not compiled (see README.md in this folder).
import Alamofire
import Foundation

public protocol SecretStorage: Sendable {
    func read(_ key: String) async throws -> String?
    func write(_ value: String?, for key: String) async throws
}

public struct OAuthCredential: AuthenticationCredential, Sendable {
    public let accessToken: String
    // Expiry is learned from a 401, as in the Conveyor version.
    public var requiresRefresh: Bool { false }
}

public final class SessionAuthenticator: Authenticator, Sendable {
    let storage: any SecretStorage
    let refreshCall: @Sendable (String?) async throws -> String

    public init(storage: any SecretStorage, refreshCall: @escaping @Sendable (String?) async throws -> String) {
        self.storage = storage
        self.refreshCall = refreshCall
    }

    public func apply(_ credential: OAuthCredential, to urlRequest: inout URLRequest) {
        urlRequest.headers.add(.authorization(bearerToken: credential.accessToken))
    }

    public func refresh(
        _ credential: OAuthCredential, for session: Alamofire.Session,
        completion: @escaping @Sendable (Result<OAuthCredential, any Error>) -> Void
    ) {
        Task {
            do {
                let fresh = try await refreshCall(credential.accessToken)
                try await storage.write(fresh, for: "access-token")
                completion(.success(OAuthCredential(accessToken: fresh)))
            } catch {
                completion(.failure(error))
            }
        }
    }

    public func didRequest(
        _ urlRequest: URLRequest, with response: HTTPURLResponse, failDueToAuthenticationError error: any Error
    ) -> Bool {
        response.statusCode == 401
    }

    public func isRequest(_ urlRequest: URLRequest, authenticatedWith credential: OAuthCredential) -> Bool {
        urlRequest.headers["Authorization"] == HTTPHeader.authorization(bearerToken: credential.accessToken).value
    }
}
