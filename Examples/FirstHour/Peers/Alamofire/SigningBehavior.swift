// The signing, timing and banner part of Examples/FirstHour with Alamofire 5.10: a RequestAdapter
// signs every attempt, an EventMonitor times every request across its retries, and the banner is
// a function the call site uses. Not compiled (see README.md in this folder).
import Alamofire
import Foundation

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

final class Timing: EventMonitor {
    let report: @Sendable (String, Duration) -> Void

    init(report: @escaping @Sendable (String, Duration) -> Void) { self.report = report }

    func requestDidFinish(_ request: Request) {
        guard let first = request.allMetrics.first, let last = request.allMetrics.last,
            let sent = request.request
        else { return }
        let seconds = last.taskInterval.end.timeIntervalSince(first.taskInterval.start)
        report("\(sent.method?.rawValue ?? "") \(sent.url?.path ?? "")", .seconds(seconds))
    }
}

/// The banner text for a failed load, or nil for a cancelled one.
func bannerText(for error: any Error) -> String? {
    guard let error = error.asAFError else { return "Something went wrong." }
    if error.isExplicitlyCancelledError { return nil }
    if let status = error.responseCode { return "The server answered \(status)." }
    if case .sessionTaskFailed(let underlying as URLError) = error {
        switch underlying.code {
        case .cancelled: return nil
        case .notConnectedToInternet, .timedOut, .cannotConnectToHost: return "Check your connection."
        default: break
        }
    }
    return "Something went wrong."
}
