public import Foundation

/// What a request sends as its body.
///
/// ```swift
/// .json(NewMovie(title: "Heat"))                  // Content-Type: application/json
/// .form(["user": "ann", "password": secret])      // application/x-www-form-urlencoded
/// .data(png, contentType: "image/png")
/// .file(movieURL, contentType: "video/mp4")      // streamed from disk, re-read on a retry
/// .stream(chunks, length: size)                   // a one-shot AsyncSequence of Data
/// .multipart(form)                                // multipart/form-data; files streamed
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
    /// A file's content, read from disk while it is sent (never loaded whole) and read again
    /// for every attempt. The file must exist when the request is built; a missing one fails
    /// with ``NetworkError/fileFailed(file:underlying:)`` before anything is sent.
    case file(URL, contentType: String?)
    /// A body read in pieces while it is sent: a file, parts, or a one-shot sequence (which is
    /// never sent twice: see ``HTTPBodyStream``).
    case stream(HTTPBodyStream, contentType: String?)
    /// A `multipart/form-data` form (RFC 7578), with ``MultipartForm/contentType`` as its content
    /// type: leave `Content-Type` unset on the request, since the boundary is in it. Its files are
    /// streamed from disk and read again for every attempt; a missing file fails with
    /// ``NetworkError/fileFailed(file:underlying:)`` before anything is sent.
    case multipart(MultipartForm)

    /// What an encoded body is: bytes, or a stream.
    enum Encoded {
        case bytes(Data)
        case stream(HTTPBodyStream)
    }

    /// Encodes the body; returns its bytes or stream and implied content type.
    func encoded(with encoder: JSONEncoder) throws(NetworkError) -> (Encoded, String?)? {
        switch self {
        case .none:
            return nil
        case .data(let data, let contentType):
            return (.bytes(data), contentType)
        case .file(let url, let contentType):
            return (.stream(try .file(url)), contentType)
        case .stream(let stream, let contentType):
            return (.stream(stream), contentType)
        case .multipart(let form):
            return (.stream(try form.bodyStream()), form.contentType)
        case .json(let value):
            do {
                return (.bytes(try encoder.encode(value)), "application/json")
            } catch {
                throw .invalidRequest("the JSON body could not be encoded: \(NetworkError.describe(error))")
            }
        case .form(let fields):
            return (.bytes(Data(fields.encoded.utf8)), "application/x-www-form-urlencoded")
        }
    }
}

extension RequestBody {
    /// A one-shot body read from an `AsyncSequence` of chunks while it is sent.
    /// - Parameters:
    ///   - bytes: The chunks.
    ///   - length: The total length, if known (sent as `Content-Length`).
    ///   - contentType: The content type.
    /// - Returns: The body.
    public static func stream<Bytes: AsyncSequence & Sendable>(
        _ bytes: Bytes, length: Int64? = nil, contentType: String? = nil
    ) -> RequestBody where Bytes.Element == Data {
        .stream(HTTPBodyStream(bytes, length: length), contentType: contentType)
    }

    /// A JSON object body written as a literal with values of any `Encodable` types:
    /// `.json(["title": "Heat", "stars": 5, "tags": tags])`.
    /// - Parameter object: The object.
    /// - Returns: The body.
    public static func json(_ object: JSONObject) -> RequestBody { .json(object as any Encodable & Sendable) }
}

/// A JSON object whose values may have different `Encodable` types, written as a dictionary
/// literal: what `.json(["title": "Heat", "stars": 5])` builds. A repeated key keeps its last
/// value; `nil` optionals are written as `null`. Key order in the output is the encoder's (set
/// `.sortedKeys` on the client's encoder for a stable one). Nest one object in another with
/// `JSONObject([...])`.
public struct JSONObject: Encodable, Sendable, ExpressibleByDictionaryLiteral {
    /// Keys are strings.
    public typealias Key = String
    /// Values are any `Encodable`.
    public typealias Value = any Encodable & Sendable

    /// The members, in order.
    let members: [(key: String, value: any Encodable & Sendable)]

    /// Creates an object from a literal.
    /// - Parameter elements: The keys and values.
    public init(dictionaryLiteral elements: (String, any Encodable & Sendable)...) {
        var members: [(key: String, value: any Encodable & Sendable)] = []
        for (key, value) in elements {
            if let index = members.firstIndex(where: { $0.key == key }) { members.remove(at: index) }
            members.append((key, value))
        }
        self.members = members
    }

    /// Creates an object from another, for nesting: `["movie": JSONObject(["id": 7, "title": "Heat"])]`.
    /// - Parameter object: The object.
    public init(_ object: JSONObject) { self = object }

    /// Encodes the members as one JSON object.
    /// - Parameter encoder: The encoder.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: MemberKey.self)
        for (key, value) in members { try container.encode(value, forKey: MemberKey(key)) }
    }

    struct MemberKey: CodingKey {
        let stringValue: String
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }
}
