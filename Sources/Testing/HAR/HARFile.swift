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

/// How a body is written into a HAR file: redacted text, or base64 (HAR 1.2's `encoding`) for
/// bytes that are not text, cut at a size limit with a note saying so, and never a byte the body
/// did not have (no `…` after a cut).
struct HARBody: Sendable {
    var text: String?
    var encoding: String?
    var comment: String?

    /// Writes `data`: at most `limit` bytes of it are read. Text (UTF-8 without control bytes
    /// other than tab, line feed, form feed and carriage return) is redacted by `redactor` (hidden
    /// form fields and JSON keys masked) and every secret of `scrubber` scrubbed, in the encodings a
    /// server may echo it in; other bytes are written as base64 of the bytes read, with every
    /// secret scrubbed from them first.
    static func make(_ data: Data, contentType: String?, limit: Int, redactor: Redactor, scrubber: SecretScrubber) -> HARBody {
        guard !data.isEmpty, limit > 0 else {
            return data.isEmpty ? HARBody() : HARBody(comment: "cut: the first 0 of \(data.count) bytes")
        }
        let window = data.prefix(limit)
        let cut = data.count > limit ? "cut: the first \(limit) of \(data.count) bytes" : nil
        if isText(window, cut: cut != nil) {
            let text = redactor.preview(data, contentType: contentType, limit: limit, scrubber: scrubber, ellipsis: false)
            return HARBody(text: text, encoding: nil, comment: cut)
        }
        let bytes = scrubber.isEmpty ? Array(window) : scrubber.scrub(Array(window))
        return HARBody(text: Data(bytes).base64EncodedString(), encoding: "base64", comment: cut)
    }

    /// Whether `bytes` are text: valid UTF-8 (a character the cut split at the end aside) with no
    /// control byte but tab, line feed, form feed and carriage return. Zero bytes are valid UTF-8,
    /// and JSON escapes each as six bytes: a megabyte of them made a 6 MB file.
    static func isText(_ bytes: Data, cut: Bool) -> Bool {
        for byte in bytes where byte < 0x20 || byte == 0x7F {
            if byte != 0x09 && byte != 0x0A && byte != 0x0C && byte != 0x0D { return false }
        }
        if isValidUTF8(bytes) { return true }
        guard cut else { return false }
        // A multi-byte character the limit split: valid once its start is dropped.
        var end = bytes.endIndex
        for _ in 0..<3 where end > bytes.startIndex && bytes[end - 1] & 0xC0 == 0x80 { end -= 1 }
        if end > bytes.startIndex && bytes[end - 1] >= 0xC0 { end -= 1 }
        return isValidUTF8(bytes[..<end])
    }

    /// Whether `bytes` are valid UTF-8, read in place: `String(validating:)` made a copy of the
    /// whole window (up to ``HARRecorder/maxBodySize`` bytes) only to throw it away.
    static func isValidUTF8(_ bytes: Data) -> Bool {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
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
        if encoding == "base64" { return Data(base64Encoded: text, options: .ignoreUnknownCharacters) ?? Data() }
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

// MARK: - Reading HAR files that other tools wrote

/// HAR 1.2 as browsers' devtools, Charles, Proxyman and Fiddler write it: every field Conveyor
/// does not need to answer a request is optional when reading (`ssl`, `cookies`, `httpVersion`,
/// `headersSize`, `content.text`…), a number may be written as an integer or a fraction, and
/// `postData` may hold `params` instead of `text`. What replay needs is `request.method`,
/// `request.url` and `response.status`; anything else missing reads as empty.
extension HARFile.Log {
    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        version = try values.decodeIfPresent(String.self, forKey: .version) ?? "1.2"
        creator = try values.decodeIfPresent(HARFile.Creator.self, forKey: .creator) ?? .init(name: "", version: "")
        entries = try values.decodeIfPresent([HARFile.Entry].self, forKey: .entries) ?? []
        _conveyorBodyLimit = try values.decodeNumberIfPresent(forKey: ._conveyorBodyLimit).map(HARFile.clampedInt)
    }
}

extension HARFile.Creator {
    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        name = try values.decodeIfPresent(String.self, forKey: .name) ?? ""
        version = try values.decodeIfPresent(String.self, forKey: .version) ?? ""
    }
}

extension HARFile.NameValue {
    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        name = try values.decodeIfPresent(String.self, forKey: .name) ?? ""
        value = try values.decodeIfPresent(String.self, forKey: .value) ?? ""
    }
}

extension HARFile.Entry {
    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        startedDateTime = try values.decodeIfPresent(String.self, forKey: .startedDateTime) ?? ""
        time = try values.decodeNumberIfPresent(forKey: .time) ?? 0
        request = try values.decode(HARFile.Request.self, forKey: .request)
        response =
            try values.decodeIfPresent(HARFile.Response.self, forKey: .response)
            ?? .init(status: 0, statusText: "", headers: [], content: .init(size: 0, mimeType: ""), redirectURL: "", bodySize: -1)
        timings = try values.decodeIfPresent(HARFile.Timings.self, forKey: .timings) ?? .init(send: 0, wait: 0, receive: 0)
        comment = try values.decodeIfPresent(String.self, forKey: .comment)
        _conveyorError = try values.decodeIfPresent(String.self, forKey: ._conveyorError)
    }
}

extension HARFile.Request {
    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        method = try values.decode(String.self, forKey: .method)
        url = try values.decode(String.self, forKey: .url)
        httpVersion = try values.decodeIfPresent(String.self, forKey: .httpVersion) ?? "HTTP/1.1"
        cookies = try values.decodeIfPresent([HARFile.NameValue].self, forKey: .cookies) ?? []
        headers = try values.decodeIfPresent([HARFile.NameValue].self, forKey: .headers) ?? []
        queryString = try values.decodeIfPresent([HARFile.NameValue].self, forKey: .queryString) ?? []
        postData = try values.decodeIfPresent(HARFile.PostData.self, forKey: .postData)
        headersSize = try values.decodeNumberIfPresent(forKey: .headersSize).map(HARFile.clampedInt) ?? -1
        bodySize = try values.decodeNumberIfPresent(forKey: .bodySize).map(HARFile.clampedInt) ?? -1
        comment = try values.decodeIfPresent(String.self, forKey: .comment)
    }
}

extension HARFile.PostData {
    private enum ParamsKey: String, CodingKey { case params }

    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        mimeType = try values.decodeIfPresent(String.self, forKey: .mimeType) ?? ""
        comment = try values.decodeIfPresent(String.self, forKey: .comment)
        _encoding = try values.decodeIfPresent(String.self, forKey: ._encoding)
        _conveyorDigest = try values.decodeIfPresent(String.self, forKey: ._conveyorDigest)
        if let text = try values.decodeIfPresent(String.self, forKey: .text) {
            self.text = text
        } else {
            // A form posted in a browser: `params` (name, value, fileName…) instead of `text`.
            let params = try decoder.container(keyedBy: ParamsKey.self)
                .decodeIfPresent([HARFile.NameValue].self, forKey: .params) ?? []
            self.text = params.map { HARFile.formEncoded($0.name) + "=" + HARFile.formEncoded($0.value) }
                .joined(separator: "&")
        }
    }
}

extension HARFile.Response {
    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        status = try values.decodeNumberIfPresent(forKey: .status).map(HARFile.clampedInt) ?? 0
        statusText = try values.decodeIfPresent(String.self, forKey: .statusText) ?? ""
        httpVersion = try values.decodeIfPresent(String.self, forKey: .httpVersion) ?? "HTTP/1.1"
        cookies = try values.decodeIfPresent([HARFile.NameValue].self, forKey: .cookies) ?? []
        headers = try values.decodeIfPresent([HARFile.NameValue].self, forKey: .headers) ?? []
        content = try values.decodeIfPresent(HARFile.Content.self, forKey: .content) ?? .init(size: 0, mimeType: "")
        redirectURL = try values.decodeIfPresent(String.self, forKey: .redirectURL) ?? ""
        headersSize = try values.decodeNumberIfPresent(forKey: .headersSize).map(HARFile.clampedInt) ?? -1
        bodySize = try values.decodeNumberIfPresent(forKey: .bodySize).map(HARFile.clampedInt) ?? -1
        comment = try values.decodeIfPresent(String.self, forKey: .comment)
    }
}

extension HARFile.Content {
    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        size = try values.decodeNumberIfPresent(forKey: .size).map(HARFile.clampedInt) ?? 0
        mimeType = try values.decodeIfPresent(String.self, forKey: .mimeType) ?? ""
        text = try values.decodeIfPresent(String.self, forKey: .text)
        encoding = try values.decodeIfPresent(String.self, forKey: .encoding)
        comment = try values.decodeIfPresent(String.self, forKey: .comment)
    }
}

extension HARFile.Timings {
    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        blocked = try values.decodeNumberIfPresent(forKey: .blocked) ?? -1
        dns = try values.decodeNumberIfPresent(forKey: .dns) ?? -1
        connect = try values.decodeNumberIfPresent(forKey: .connect) ?? -1
        ssl = try values.decodeNumberIfPresent(forKey: .ssl) ?? -1
        send = try values.decodeNumberIfPresent(forKey: .send) ?? 0
        wait = try values.decodeNumberIfPresent(forKey: .wait) ?? 0
        receive = try values.decodeNumberIfPresent(forKey: .receive) ?? 0
    }
}

extension HARFile {
    /// A number from a file as an `Int`, clamped (a file may hold `1e300` or `-5`); NaN is 0.
    static func clampedInt(_ value: Double) -> Int {
        guard !value.isNaN else { return 0 }
        return Int(max(-1e15, min(1e15, value.rounded(.towardZero))))
    }

    /// `application/x-www-form-urlencoded` encoding of a name or value from `params`: the
    /// redactor's percent-encoding of everything but unreserved bytes, a space as `+`.
    static func formEncoded(_ text: String) -> String {
        let encoded = SecretScrubber.percentEncoded(Array(text.utf8), allowed: SecretScrubber.isUnreserved, upper: true)
        return String(decoding: SecretScrubber.replacing(encoded, Array("%20".utf8), with: [UInt8(ascii: "+")]), as: UTF8.self)
    }
}

extension KeyedDecodingContainer {
    /// A JSON number written as an integer or a fraction (or `null`/absent: `nil`).
    fileprivate func decodeNumberIfPresent(forKey key: Key) throws -> Double? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        if let value = try? decode(Double.self, forKey: key) { return value }
        if let value = try? decode(Int.self, forKey: key) { return Double(value) }
        throw DecodingError.typeMismatch(
            Double.self, .init(codingPath: codingPath + [key], debugDescription: "not a number"))
    }
}
