package import Conveyor

/// OpenTelemetry's HTTP client conventions, as the tracing, metrics and logging integrations
/// apply them: one place for the method normalization, the error type and the server attributes.
package enum HTTPClientConventions {
    /// The methods the conventions know (RFC 9110's and `PATCH`), compared case-sensitively.
    static let knownMethods: Set<String> = ["CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"]

    /// `http.request.method`: the method when the conventions know it, else `_OTHER`, with the
    /// original in `http.request.method_original` (`nil` when it is known).
    package static func method(_ method: HTTPMethod) -> (name: String, original: String?) {
        let raw = method.rawValue
        return knownMethods.contains(raw) ? (raw, nil) : ("_OTHER", raw)
    }

    /// A span's name: the method, or `HTTP` for a method the conventions do not know.
    package static func spanName(_ method: HTTPMethod) -> String {
        knownMethods.contains(method.rawValue) ? method.rawValue : "HTTP"
    }

    /// `error.type`: the status code for a response with a status of 400 or more, else the
    /// ``NetworkError`` kind's name (a low-cardinality identifier, as the conventions ask for an
    /// error without a status), else `nil` (no error).
    package static func errorType(status: Int?, error: NetworkError?) -> String? {
        if let status, status >= 400 { return String(status) }
        return error?.name
    }

    /// `server.address` and `server.port` of a request's URL.
    package static func server(of origin: Origin?) -> (address: String, port: Int)? {
        origin.map { ($0.host, $0.port) }
    }
}
