public import Foundation

/// What a request sends as its body.
///
/// ```swift
/// .json(NewMovie(title: "Heat"))                  // Content-Type: application/json
/// .form(["user": "ann", "password": secret])      // application/x-www-form-urlencoded
/// .data(png, contentType: "image/png")
/// ```
/// A `Content-Type` header set on the request wins over the one the body implies.
public enum RequestBody: Sendable {
    /// No body.
    case none
    /// Raw bytes, with an optional content type.
    case data(Data, contentType: String?)
    /// A value encoded with the client's `JSONEncoder`.
    case json(any Encodable & Sendable)
    /// Form fields, URL-encoded.
    case form(QueryParameters)

    /// Encodes the body; returns its bytes and implied content type.
    func encoded(with encoder: JSONEncoder) throws(NetworkError) -> (Data, String?)? {
        switch self {
        case .none:
            return nil
        case .data(let data, let contentType):
            return (data, contentType)
        case .json(let value):
            do {
                return (try encoder.encode(value), "application/json")
            } catch {
                throw .invalidRequest("the JSON body could not be encoded: \(NetworkError.describe(error))")
            }
        case .form(let fields):
            return (Data(fields.encoded.utf8), "application/x-www-form-urlencoded")
        }
    }
}
