public import ConveyorPipeline
public import Foundation

/// Hides secrets in what ``LoggingBehavior`` writes: credential headers, configured headers,
/// and configured query items and form/JSON body fields, each shown as `***`.
public struct Redactor: Sendable {
    /// Header names whose values are hidden (case-insensitive), in addition to `Authorization`,
    /// `Proxy-Authorization`, `Cookie` and `Set-Cookie`, which always are.
    public var headers: Set<String>
    /// Query item, form field and JSON key names whose values are hidden (case-insensitive).
    public var fields: Set<String>

    /// Field names hidden by default.
    public static let defaultFields: Set<String> = [
        "access_token", "refresh_token", "id_token", "token", "api_key", "apikey", "key", "password", "secret",
        "client_secret", "signature", "sig", "code",
    ]

    /// Creates a redactor.
    /// - Parameters:
    ///   - headers: Extra header names to hide.
    ///   - fields: Query/form/JSON field names to hide.
    public init(headers: Set<String> = ["X-API-Key", "X-Auth-Token"], fields: Set<String> = Redactor.defaultFields) {
        self.headers = Set(headers.map { $0.lowercased() })
        self.fields = Set(fields.map { $0.lowercased() })
    }

    /// Whether a header's value must be hidden.
    /// - Parameter name: The header name.
    public func hides(header name: String) -> Bool {
        HTTPHeaders.isSensitive(name) || headers.contains(name.lowercased())
    }

    /// The header value to show.
    func value(of field: HTTPHeaders.Field) -> String { hides(header: field.name) ? "***" : field.value }

    /// The URL with its user info and hidden query values replaced by `***`.
    /// - Parameter url: The URL.
    public func redact(_ url: URL) -> String {
        let string = url.redactingUserInfo
        guard let question = string.firstIndex(of: "?") else { return string }
        let fragmentStart = string[question...].firstIndex(of: "#") ?? string.endIndex
        let query = string[string.index(after: question)..<fragmentStart]
        return String(string[...question]) + redact(formEncoded: String(query))
    }

    /// `a=1&password=***`: hides the values of hidden names in a URL-encoded list.
    func redact(formEncoded text: String) -> String {
        text.split(separator: "&", omittingEmptySubsequences: false).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = Self.formDecoded(String(parts[0]))
            return hides(field: name) && parts.count == 2 ? "\(parts[0])=***" : String(pair)
        }.joined(separator: "&")
    }

    /// Whether a query item, form field or JSON key's value must be hidden.
    func hides(field name: String) -> Bool { fields.contains(name.lowercased()) || hides(header: name) }

    /// How much of a body a preview reads beyond its limit, so that a secret the limit cuts is
    /// still recognized (and the field that names it): previews never read more than this.
    static let previewSlack = 4096

    /// A preview of a body at most `limit` bytes long: hidden form fields and JSON keys masked,
    /// every known secret value (in any of the encodings a server may echo it in) replaced by
    /// `***`, and a secret that the limit would cut removed whole.
    ///
    /// It reads at most `limit` + 4 KiB of the body, whatever the body's size, and never parses
    /// it: JSON keys are found by a scan of that prefix.
    func preview(_ body: Data, contentType: String?, limit: Int, scrubbing secrets: [String] = []) -> String {
        guard limit > 0, !body.isEmpty else { return "" }
        let window = limit >= body.count - Self.previewSlack ? body.count : limit + Self.previewSlack
        var text = String(decoding: body.prefix(window), as: UTF8.self)
        let isForm = contentType.map { $0.lowercased().hasPrefix("application/x-www-form-urlencoded") } ?? false
        text = isForm ? redact(formEncoded: text) : redact(jsonLike: text)
        let variants = Self.encodings(of: secrets)
        text = Self.scrub(text, variants, pieces: secrets)
        guard text.utf8.count > limit || window < body.count else { return text }
        var cut = String(decoding: Array(text.utf8.prefix(limit)), as: UTF8.self)
        // A secret cut by the limit: drop the part of it that made it in.
        for secret in variants {
            for length in stride(from: min(secret.count - 1, cut.count), through: 4, by: -1)
            where cut.hasSuffix(secret.prefix(length)) {
                cut.removeLast(length)
                break
            }
        }
        return cut + "…"
    }

    /// Replaces every occurrence of each secret, in each encoding a server may echo it in, by `***`.
    func scrub(_ text: String, _ secrets: [String]) -> String {
        Self.scrub(text, Self.encodings(of: secrets), pieces: secrets)
    }

    /// Replaces every variant whole, then every run of 8 characters of a secret in `pieces`.
    static func scrub(_ text: String, _ variants: [String], pieces secrets: [String]) -> String {
        let whole = variants.reduce(text) { $0.contains($1) ? $0.replacingOccurrences(of: $1, with: "***") : $0 }
        return scrubPieces(whole, secrets)
    }

    /// Replaces every run of 8 characters of a secret (as sent, or JSON-escaped) that is left
    /// once whole secrets are gone: a server may echo a secret cut short ("token abc12345…
    /// expired"). What remains of a secret is then shorter than 8 characters.
    static func scrubPieces(_ text: String, _ secrets: [String]) -> String {
        var text = text
        let forms = Set(secrets.flatMap { [$0] + jsonEscaped($0) })
        for variant in forms where variant.count >= 8 {
            let characters = Array(variant)
            for start in 0...(characters.count - 8) {
                let piece = String(characters[start..<(start + 8)])
                if text.contains(piece) { text = text.replacingOccurrences(of: piece, with: "***") }
            }
        }
        return text
    }

    /// A secret as a server may echo it: as sent, percent-encoded (upper- and lowercase hex,
    /// strictly or as a URL query or path) or form-encoded, and each of those JSON-escaped once or
    /// twice (with and without `\/`).
    /// Longest first, so a longer encoding is replaced before a shorter one inside it.
    static func encodings(of secrets: [String]) -> [String] {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        var variants: Set<String> = []
        for secret in secrets where secret.count >= 4 {
            // As sent, and as a URL or a form carries it…
            var forms: Set<String> = [secret]
            for allowed in [unreserved, .urlQueryAllowed, .urlPathAllowed] {
                guard let encoded = secret.addingPercentEncoding(withAllowedCharacters: allowed) else { continue }
                forms.insert(encoded)
                forms.insert(lowercasingHex(encoded))
                forms.insert(encoded.replacingOccurrences(of: "%20", with: "+"))
            }
            // …and each of those as a JSON string carries it, once or twice (a server echoes a
            // query, or a JSON body it received, inside its own JSON).
            var level = forms
            variants.formUnion(level)
            for _ in 0..<2 {
                var escaped: Set<String> = []
                for form in level { escaped.formUnion(jsonEscaped(form)) }
                variants.formUnion(escaped)
                level = escaped
            }
        }
        return variants.sorted { $0.count > $1.count }
    }

    /// `text` as a JSON string carries it: with `\\` and `\"` escaped, and with `/` left as it
    /// is or written `\/` (encoders differ).
    static func jsonEscaped(_ text: String) -> [String] {
        let json = text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return [json, json.replacingOccurrences(of: "/", with: "\\/")]
    }

    private static func lowercasingHex(_ text: String) -> String {
        var result = ""
        var remaining = 0
        for character in text {
            if character == "%" {
                remaining = 2
                result.append(character)
            } else if remaining > 0 {
                remaining -= 1
                result += character.lowercased()
            } else {
                result.append(character)
            }
        }
        return result
    }

    static func formDecoded(_ text: String) -> String {
        let spaced = text.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }

    /// Masks the values of hidden keys in JSON-like text, which may be cut anywhere: every
    /// `"key": value` whose key is hidden gets `"***"` (a string value up to its closing quote or
    /// the end of the text; any other value up to `,`, `}`, `]` or a line break).
    func redact(jsonLike text: String) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        func skipSpace(_ i: Int) -> Int {
            var i = i
            while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 }
            return i
        }
        while index < bytes.count {
            guard bytes[index] == quote else {
                output.append(bytes[index])
                index += 1
                continue
            }
            // A string: find its end.
            var end = index + 1
            while end < bytes.count && bytes[end] != quote { end += bytes[end] == backslash ? 2 : 1 }
            let stringEnd = min(end + 1, bytes.count)
            output.append(contentsOf: bytes[index..<stringEnd])
            let colon = skipSpace(stringEnd)
            let key = String(decoding: bytes[min(index + 1, end)..<min(end, bytes.count)], as: UTF8.self)
            index = stringEnd
            guard colon < bytes.count, bytes[colon] == UInt8(ascii: ":"), hides(field: key) else { continue }
            output.append(contentsOf: bytes[stringEnd...colon])
            var value = skipSpace(colon + 1)
            output.append(contentsOf: bytes[(colon + 1)..<value])
            if value < bytes.count, bytes[value] == quote {
                value += 1
                while value < bytes.count && bytes[value] != quote { value += bytes[value] == backslash ? 2 : 1 }
                value = min(value + 1, bytes.count)
            } else {
                let stops: [UInt8] = [UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x0A, 0x0D]
                while value < bytes.count && !stops.contains(bytes[value]) { value += 1 }
            }
            output.append(contentsOf: Array("\"***\"".utf8))
            index = value
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The secret values a request carries, so they can be scrubbed from echoes: hidden
    /// headers (the whole value and, after a scheme such as `Bearer`, the credential alone; each
    /// cookie's value), the URL's user and password, and the values of hidden query items and
    /// form or JSON body fields.
    func secretValues(in request: HTTPRequest) -> [String] {
        var values = request.headers.credentialValues(where: hides(header:))
        if let components = URLComponents(url: request.url, resolvingAgainstBaseURL: false) {
            values += [components.user, components.password].compactMap { $0 }
            for item in components.queryItems ?? [] where hides(field: item.name) { values += item.value.map { [$0] } ?? [] }
        }
        if let body = request.body, body.count <= 1 << 20 {
            let text = String(decoding: body, as: UTF8.self)
            for pair in text.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, hides(field: Self.formDecoded(String(parts[0]))) {
                    values.append(Self.formDecoded(String(parts[1])))
                }
            }
            if let json = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) {
                collect(json, into: &values)
            }
        }
        return values.filter { $0.count >= 4 }
    }

    private func collect(_ value: Any, into values: inout [String]) {
        if let object = value as? [String: Any] {
            for (key, value) in object {
                if hides(field: key), let text = value as? String { values.append(text) } else { collect(value, into: &values) }
            }
        } else if let array = value as? [Any] {
            for element in array { collect(element, into: &values) }
        }
    }
}

extension HTTPRequest {
    /// The request as a `curl` command, with secrets redacted, for pasting into a terminal.
    ///
    /// ```swift
    /// print(request.curlCommand())
    /// // curl -X POST 'https://api.test/login' -H 'Authorization: ***' --data-binary 'user=ann&password=***'
    /// ```
    /// - Parameter redactor: What to hide.
    /// - Returns: The command, each argument single-quoted for a POSIX shell.
    public func curlCommand(redactor: Redactor = Redactor()) -> String {
        var parts = ["curl"]
        if method != .get { parts += ["-X", Self.shellQuote(method.rawValue)] }
        parts.append(Self.shellQuote(redactor.redact(url)))
        for field in headers { parts += ["-H", Self.shellQuote("\(field.name): \(redactor.value(of: field))")] }
        if let body, !body.isEmpty {
            let preview = redactor.preview(body, contentType: headers["Content-Type"], limit: Int.max)
            parts += ["--data-binary", Self.shellQuote(preview)]
        }
        return parts.joined(separator: " ")
    }

    /// `'text'`, with each `'` written as `'\''`.
    static func shellQuote(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }
}
