// The token part of Examples/FirstHour with Moya 15. Moya's AccessTokenPlugin adds a token but
// cannot refresh one (its closure is synchronous, and a retried request keeps the headers the
// plugin set the first time), so refresh is Alamofire's AuthenticationInterceptor on the Session
// the provider is given. Not compiled (see README.md in this folder).
import Alamofire
import Foundation
import Moya

public protocol SecretStorage: Sendable {
    func read(_ key: String) async throws -> String?
    func write(_ value: String?, for key: String) async throws
}

public struct OAuthCredential: AuthenticationCredential, Sendable {
    public let accessToken: String
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
        _Concurrency.Task {
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
