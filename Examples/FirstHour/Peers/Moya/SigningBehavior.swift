// The signing, timing and banner part of Examples/FirstHour with Moya 15. A plugin's `prepare`
// runs once per request, not per attempt, so signing is an Alamofire RequestAdapter; a plugin has
// no per-request state to time with, so timing is in the async wrapper (MovieClient.swift).
// Not compiled (see README.md in this folder).
import Alamofire
import Foundation
import Moya

struct Signer: RequestAdapter {
    let secret: String

    func adapt(
        _ urlRequest: URLRequest, for session: Alamofire.Session,
        completion: @escaping @Sendable (Result<URLRequest, any Error>) -> Void
    ) {
        var request = urlRequest
        // A toy signature: the method and path with the secret. Real code would use an HMAC.
        let signed = "\(request.method?.rawValue ?? "GET") \(request.url?.path ?? "") \(secret)"
        request.headers.add(name: "X-Signature", value: String(signed.utf8.reduce(0) { ($0 &* 31) &+ Int($1) } & 0xFFFF_FFFF))
        completion(.success(request))
    }
}

/// The banner text for a failed load, or nil for a cancelled one.
func bannerText(for error: any Error) -> String? {
    guard let error = error as? MoyaError else { return "Something went wrong." }
    switch error {
    case .statusCode(let response): return "The server answered \(response.statusCode)."
    case .underlying(let underlying, _):
        if let error = underlying.asAFError, error.isExplicitlyCancelledError { return nil }
        if case .sessionTaskFailed(let failure as URLError)? = underlying.asAFError {
            switch failure.code {
            case .cancelled: return nil
            case .notConnectedToInternet, .timedOut, .cannotConnectToHost: return "Check your connection."
            default: break
            }
        }
        return "Something went wrong."
    default: return "Something went wrong."
    }
}
