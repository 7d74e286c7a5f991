/// An HTTP request method such as `GET` or `POST`.
///
/// Methods are compared by their exact (case-sensitive) token, as RFC 9110 requires. A method
/// must be a token (RFC 9110 §9.1: at least one of the letters, the digits, a backquote, and
/// `!#$%&'*+-.^_|~`): any other text (a space, CR, LF, an empty string) is refused before
/// anything is sent, with ``NetworkError/invalidRequest(_:)``, on every transport.
/// Use the static members for the common methods or a string literal for others:
///
/// ```swift
/// let method: HTTPMethod = .post
/// let custom: HTTPMethod = "PROPFIND"
/// ```
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    /// The method token as sent on the wire, for example `"GET"`.
    public let rawValue: String

    /// Creates a method from its token.
    /// - Parameter rawValue: The method token, for example `"GET"`.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Creates a method from a string literal.
    /// - Parameter value: The method token.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// The method token.
    public var description: String { rawValue }

    /// `GET`
    public static let get: HTTPMethod = "GET"
    /// `HEAD`
    public static let head: HTTPMethod = "HEAD"
    /// `POST`
    public static let post: HTTPMethod = "POST"
    /// `PUT`
    public static let put: HTTPMethod = "PUT"
    /// `PATCH`
    public static let patch: HTTPMethod = "PATCH"
    /// `DELETE`
    public static let delete: HTTPMethod = "DELETE"
    /// `OPTIONS`
    public static let options: HTTPMethod = "OPTIONS"
    /// `TRACE`
    public static let trace: HTTPMethod = "TRACE"
    /// `CONNECT`
    public static let connect: HTTPMethod = "CONNECT"

    /// Whether the method is an RFC 9110 token, so it can be sent as a request line's method.
    package var isToken: Bool { !rawValue.isEmpty && HTTPHeaders.isToken(rawValue) }

    /// Whether RFC 9110 defines the method as idempotent
    /// (`GET`, `HEAD`, `PUT`, `DELETE`, `OPTIONS`, `TRACE`), so repeating it is safe.
    public var isIdempotent: Bool {
        switch rawValue {
        case "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE": true
        default: false
        }
    }

    /// Why a method is refused, without quoting it (it may hold anything).
    package static func notATokenReason(_ method: HTTPMethod) -> String {
        "the method (\(method.rawValue.utf8.count) bytes) is not an HTTP token (RFC 9110 §9.1)"
    }
}
