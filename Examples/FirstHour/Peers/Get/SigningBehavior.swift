// The signing and banner part of Examples/FirstHour with Get 2.2: the delegate's
// `willSendRequest` (MovieClient.swift) calls `sign` for every attempt; the timing is in the
// client's wrapper, since Get has no hook that sees a request end. Not compiled (see README.md).
import Foundation
import Get

/// A toy signature: the method and path with the secret. Real code would use an HMAC.
func sign(_ request: inout URLRequest, secret: String) {
    let signed = "\(request.httpMethod ?? "GET") \(request.url?.path ?? "") \(secret)"
    request.setValue(String(signed.utf8.reduce(0) { ($0 &* 31) &+ Int($1) } & 0xFFFF_FFFF), forHTTPHeaderField: "X-Signature")
}

/// The banner text for a failed load, or nil for a cancelled one.
func bannerText(for error: any Error) -> String? {
    if error is CancellationError { return nil }
    if case .unacceptableStatusCode(let status) = error as? APIError { return "The server answered \(status)." }
    if let error = error as? URLError {
        switch error.code {
        case .cancelled: return nil
        case .notConnectedToInternet, .timedOut, .cannotConnectToHost: return "Check your connection."
        default: break
        }
    }
    return "Something went wrong."
}
