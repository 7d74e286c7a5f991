public import Foundation

/// Which redirects a transport follows, and what each hop may carry: one policy, written once,
/// that every transport applies (``URLSessionTransport`` and the AsyncHTTPClient transport call
/// it for each 3xx; a transport of yours can too).
///
/// - Only `301`, `302`, `303`, `307` and `308` with a `Location` to an `http` or `https` URL are
///   followed; any other response is delivered as it is.
/// - `303` (except for `HEAD`), and `301`/`302` for a `POST`, become a `GET` without a body or
///   its content headers; `307` and `308` keep the method and the body (RFC 9110 §15.4).
/// - A hop to another origin (scheme, host or port) leaves every credential header behind: the
///   request's ``HTTPRequest/sensitiveHeaders`` (built in, declared by its behaviors, added by its
///   client's configuration). Once left behind, a credential does not come back on a later hop.
/// - At most ``maximumRedirects`` redirects are followed; one more is
///   ``NetworkError/tooManyRedirects``.
/// - A response from another origin than the one asked may not set cookies for it:
///   ``delivering(_:from:askedFor:)`` removes its `Set-Cookie`.
///
/// ```swift
/// let policy = RedirectPolicy(maximumRedirects: 5)
/// switch policy.step(status: 302, location: "https://cdn.test/a", after: request, redirectsSoFar: 0) {
/// case .follow(let next): print(next.url)   // no Authorization if cdn.test is another origin
/// case .deliver: print("not a redirect to follow")
/// case .tooManyRedirects: print("over the cap")
/// }
/// ```
public struct RedirectPolicy: Sendable, Hashable {
    /// How many redirects one request may follow; `0` follows none.
    public let maximumRedirects: Int

    /// Creates a policy.
    /// - Parameter maximumRedirects: How many redirects one request may follow; `0` follows none.
    public init(maximumRedirects: Int = 10) {
        self.maximumRedirects = max(0, maximumRedirects)
    }

    /// What a transport does with a response.
    public enum Step: Sendable, Hashable {
        /// Deliver the response: it is not a redirect to follow.
        case deliver
        /// Send this request next: the redirect's target, with the method, body and headers the
        /// policy allows.
        case follow(HTTPRequest)
        /// Fail with ``NetworkError/tooManyRedirects``: one more redirect than the cap.
        case tooManyRedirects
    }

    /// The step after a response.
    /// - Parameters:
    ///   - status: The response's status.
    ///   - location: Its `Location` header, if any.
    ///   - hop: The request that got the response (the original or an earlier hop).
    ///   - redirectsSoFar: Redirects followed before this one in the same attempt.
    /// - Returns: Deliver, follow a hop, or fail for too many redirects.
    public func step(status: Int, location: String?, after hop: HTTPRequest, redirectsSoFar: Int) -> Step {
        guard Self.redirectStatuses.contains(status), let target = Self.target(location, from: hop.url) else {
            return .deliver
        }
        guard redirectsSoFar < maximumRedirects else { return .tooManyRedirects }
        return .follow(Self.hop(from: hop, to: target, status: status))
    }

    /// The headers of a final response, without what its origin may not set for the one that was
    /// asked: a `Set-Cookie` from another origin is removed.
    /// - Parameters:
    ///   - headers: The final response's headers.
    ///   - final: The URL that answered.
    ///   - original: The URL that was asked.
    /// - Returns: The headers to deliver.
    public func delivering(_ headers: HTTPHeaders, from final: URL, askedFor original: URL) -> HTTPHeaders {
        guard !Self.sameOrigin(final, original), headers.contains("Set-Cookie") else { return headers }
        var kept = headers
        kept["Set-Cookie"] = nil
        return kept
    }

    static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

    /// The absolute `http`/`https` URL a `Location` points to, relative to `url`.
    static func target(_ location: String?, from url: URL) -> URL? {
        guard let location, let target = URL(string: location, relativeTo: url)?.absoluteURL,
            let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https",
            Origin(target) != nil
        else { return nil }
        return target
    }

    /// Whether two URLs have one origin; a URL without one shares it with nothing.
    package static func sameOrigin(_ a: URL?, _ b: URL?) -> Bool {
        guard let a, let b, let origin = Origin(a) else { return false }
        return origin == Origin(b)
    }

    /// The next hop: the method and body the status calls for, and no credential header (and no
    /// `Host` of the caller's) when the target is another origin.
    static func hop(from request: HTTPRequest, to target: URL, status: Int) -> HTTPRequest {
        var next = request
        next.url = target
        let becomesGET =
            (status == 303 && request.method != .head) || ((status == 301 || status == 302) && request.method == .post)
        if becomesGET {
            next.method = .get
            next.body = nil
            next.bodyStream = nil
            for name in ["Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding"] {
                next.headers[name] = nil
            }
        }
        if !sameOrigin(request.url, target) { stripCredentials(from: &next) }
        return next
    }

    /// Removes every credential header (the request's ``HTTPRequest/sensitiveHeaders``) and a
    /// caller's own `Host`, which names the origin it was written for, as curl decided
    /// (CVE-2022-27776's fix): it goes no further than a credential does. What a request that
    /// leaves its origin keeps: a cross-origin redirect, and a `modify` hook that points the
    /// request at another origin than the one the caller addressed.
    static func stripCredentials(from request: inout HTTPRequest) {
        for name in Set(request.headers.map(\.name))
        where request.sensitiveHeaders.contains(name) || HTTPHeaders.namesEqual(name, "Host") {
            request.headers[name] = nil
        }
    }
}
