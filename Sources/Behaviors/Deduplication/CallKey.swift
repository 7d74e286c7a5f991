import ConveyorPipeline
import Foundation

/// What makes two attempts identical for ``DeduplicationBehavior``: the method, the URL, the body,
/// the timeout, the size limit and the headers (names lowercased, sorted by name, values in
/// their order) except the ignored ones.
///
/// It holds header values, credentials included, in memory only: its description and mirror
/// show nothing of the request.
struct CallKey: Hashable, Sendable, CustomStringConvertible, CustomReflectable {
    private let method: HTTPMethod
    private let url: String
    private let headers: [HTTPHeaders.Field]
    private let body: Data?
    private let timeout: Duration?
    private let maxResponseSize: Int?

    /// The key of an attempt.
    /// - Parameters:
    ///   - request: The attempt.
    ///   - ignored: Header names to leave out (case-insensitive); a credential header is never
    ///     left out.
    init(_ request: HTTPRequest, ignoring ignored: [String]) {
        method = request.method
        url = request.url.absoluteString
        body = request.body
        timeout = request.timeout
        maxResponseSize = request.maxResponseSize
        var fields: [HTTPHeaders.Field] = []
        fields.reserveCapacity(request.headers.count)
        for field in request.headers {
            if ignored.contains(where: { HTTPHeaders.namesEqual($0, field.name) }), !request.sensitiveHeaders.contains(field.name) {
                continue
            }
            fields.append(HTTPHeaders.Field(name: field.name.lowercased(), value: field.value))
        }
        // The order of different names does not change a request; the order of one name's values does.
        if fields.count > 1 {
            fields = fields.enumerated().sorted { ($0.element.name, $0.offset) < ($1.element.name, $1.offset) }
                .map(\.element)
        }
        headers = fields
    }

    /// Never shows the request.
    var description: String { "CallKey(…)" }

    /// No children: the key's values stay out of dumps.
    var customMirror: Mirror { Mirror(self, children: [:]) }
}
