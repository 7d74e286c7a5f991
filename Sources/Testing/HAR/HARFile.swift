import ConveyorBehaviors
import ConveyorPipeline
import Foundation

/// A HAR 1.2 document (http://www.softwareishard.com/blog/har-12-spec/), as browsers' devtools,
/// Charles and Proxyman read and write it: only the parts Conveyor records and replays.
/// Fields that start with `_` are HAR's custom fields.
struct HARFile: Codable, Sendable {
    var log: Log

    struct Log: Codable, Sendable {
        var version = "1.2"
        var creator: Creator
        var entries: [Entry]
        /// The largest body recorded whole; replay compares request bodies cut at the same size.
        var _conveyorBodyLimit: Int?
    }

    struct Creator: Codable, Sendable {
        var name: String
        var version: String
    }

    struct NameValue: Codable, Sendable, Hashable {
        var name: String
        var value: String
    }

    struct Entry: Codable, Sendable {
        var startedDateTime: String
        /// Milliseconds, the sum of the non-negative timings.
        var time: Double
        var request: Request
        var response: Response
        var cache = Cache()
        var timings: Timings
        var comment: String?
        /// The `NetworkError` kind an exchange failed with, when no response arrived.
        var _conveyorError: String?
    }

    struct Request: Codable, Sendable {
        var method: String
        var url: String
        var httpVersion = "HTTP/1.1"
        var cookies: [NameValue] = []
        var headers: [NameValue]
        var queryString: [NameValue]
        var postData: PostData?
        var headersSize = -1
        var bodySize: Int
        var comment: String?
    }

    struct PostData: Codable, Sendable {
        var mimeType: String
        var text: String
        var comment: String?
        /// `base64` for a body that is not UTF-8 text (HAR 1.2 has `encoding` on content only).
        var _encoding: String?
        /// What replay compares: a digest of the body with hidden fields masked but no value
        /// scrubbed (scrubbing depends on the credentials sent, which differ between runs).
        var _conveyorDigest: String?
    }

    struct Response: Codable, Sendable {
        var status: Int
        var statusText: String
        var httpVersion = "HTTP/1.1"
        var cookies: [NameValue] = []
        var headers: [NameValue]
        var content: Content
        var redirectURL: String
        var headersSize = -1
        var bodySize: Int
        var comment: String?
    }

    struct Content: Codable, Sendable {
        var size: Int
        var mimeType: String
        var text: String?
        var encoding: String?
        var comment: String?
    }

    struct Cache: Codable, Sendable {}

    /// Milliseconds per phase; `-1` where the phase does not apply or was not measured.
    struct Timings: Codable, Sendable {
        var blocked: Double = -1
        var dns: Double = -1
        var connect: Double = -1
        var ssl: Double = -1
        var send: Double
        var wait: Double
        var receive: Double
    }
}

/// How a body is written into a HAR file: redacted text, or base64 for bytes that are not text,
/// cut at a size limit with a note saying so.
struct HARBody: Sendable {
    var text: String?
    var encoding: String?
    var comment: String?

    /// Writes `data`: at most `limit` bytes of it are read. Text is redacted by `redactor` (hidden
    /// form fields and JSON keys masked) and every secret of `scrubber` scrubbed, in the encodings a
    /// server may echo it in; bytes that are not UTF-8 are kept as base64 only when they fit the
    /// limit whole (they cannot be scrubbed).
    static func make(_ data: Data, contentType: String?, limit: Int, redactor: Redactor, scrubber: SecretScrubber) -> HARBody {
        guard !data.isEmpty else { return HARBody() }
        let window = data.prefix(limit)
        let cut = data.count > limit ? "cut: the first \(limit) of \(data.count) bytes" : nil
        if String(validating: window, as: UTF8.self) != nil || (cut != nil && isTextual(contentType)) {
            let text = redactor.preview(data, contentType: contentType, limit: limit, scrubber: scrubber)
            return HARBody(text: text, encoding: nil, comment: cut)
        }
        guard cut == nil else {
            return HARBody(comment: "\(data.count) bytes that are not UTF-8 text, over the \(limit)-byte limit: not recorded")
        }
        return HARBody(text: data.base64EncodedString(), encoding: "base64", comment: nil)
    }

    /// Whether a content type names text (a body cut in the middle of a character is still text).
    static func isTextual(_ contentType: String?) -> Bool {
        guard let type = contentType?.lowercased() else { return false }
        return type.hasPrefix("text/") || type.contains("json") || type.contains("xml")
            || type.hasPrefix("application/x-www-form-urlencoded")
    }

    /// A digest of `data` with the values of hidden form fields and JSON keys masked (FNV-1a, 64
    /// bits, over at most `limit` bytes): equal for two bodies that differ only in hidden values.
    /// JSON is compared with its keys sorted and form fields in any order, since encoders need
    /// not keep either order from one run to the next.
    static func digest(_ data: Data, contentType: String?, limit: Int, redactor: Redactor) -> String {
        let masked = Data(redactor.preview(data, contentType: contentType, limit: limit).utf8)
        var canonical = masked
        if let object = try? JSONSerialization.jsonObject(with: masked, options: [.fragmentsAllowed]),
            let sorted = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
        {
            canonical = sorted
        } else if contentType?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true {
            let pairs = masked.split(separator: UInt8(ascii: "&")).map { Array($0) }.sorted { $0.lexicographicallyPrecedes($1) }
            canonical = Data(pairs.joined(separator: [UInt8(ascii: "&")]))
        }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in canonical {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return String(hash, radix: 16)
    }

    /// The bytes a recorded body stands for.
    static func bytes(text: String?, encoding: String?) -> Data {
        guard let text else { return Data() }
        if encoding == "base64" { return Data(base64Encoded: text) ?? Data() }
        return Data(text.utf8)
    }
}

extension HARFile.Timings {
    /// The phases of a transport's timings, in milliseconds; `elapsed` stands in for what the
    /// transport did not measure (the whole exchange as waiting).
    init(_ timings: TransferTimings?, elapsed: Duration) {
        func ms(_ duration: Duration?) -> Double? {
            duration.map { Double($0.components.seconds) * 1000 + Double($0.components.attoseconds) / 1e15 }
        }
        guard let timings else {
            self.init(send: 0, wait: ms(elapsed) ?? 0, receive: 0)
            return
        }
        let total = ms(timings.complete) ?? 0
        let dns = ms(timings.domainLookup)
        let connect = ms(timings.connect)
        let before = (dns ?? 0) + (connect ?? 0)
        let sent = ms(timings.requestSent) ?? before
        let first = ms(timings.firstByte) ?? sent
        self.init(
            dns: dns ?? -1, connect: connect ?? -1, ssl: ms(timings.secureConnection) ?? -1,
            send: max(0, sent - before), wait: max(0, first - sent), receive: max(0, total - first))
    }

    /// The entry's `time`: the sum of the phases that apply (`ssl` is part of `connect`).
    var total: Double { [blocked, dns, connect, send, wait, receive].filter { $0 > 0 }.reduce(0, +) }
}
