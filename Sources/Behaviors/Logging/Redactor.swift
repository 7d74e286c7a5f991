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

    /// The URL with hidden query values replaced by `***`.
    /// - Parameter url: The URL.
    public func redact(_ url: URL) -> String {
        let string = url.absoluteString
        guard let question = string.firstIndex(of: "?") else { return string }
        let fragmentStart = string[question...].firstIndex(of: "#") ?? string.endIndex
        let query = string[string.index(after: question)..<fragmentStart]
        return String(string[...question]) + redact(formEncoded: String(query))
    }

    /// `a=1&password=***`: hides the values of hidden names in a URL-encoded list.
    func redact(formEncoded text: String) -> String {
        text.split(separator: "&", omittingEmptySubsequences: false).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            return fields.contains(name.lowercased()) && parts.count == 2 ? "\(parts[0])=***" : String(pair)
        }.joined(separator: "&")
    }

    /// A preview of a body at most `limit` bytes long, with hidden form fields and JSON keys masked
    /// and every occurrence of a known secret value replaced by `***`.
    func preview(_ body: Data, contentType: String?, limit: Int, scrubbing secrets: [String] = []) -> String {
        guard limit > 0, !body.isEmpty else { return "" }
        var text: String
        if contentType?.hasPrefix("application/x-www-form-urlencoded") == true {
            text = redact(formEncoded: String(decoding: body, as: UTF8.self))
        } else if let json = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]),
            let masked = try? JSONSerialization.data(withJSONObject: mask(json), options: [.fragmentsAllowed, .sortedKeys])
        {
            text = String(decoding: masked, as: UTF8.self)
        } else {
            text = String(decoding: body.prefix(limit), as: UTF8.self)
        }
        text = scrub(text, secrets)
        if text.utf8.count > limit || body.count > limit && !text.hasSuffix("…") {
            text = String(decoding: Array(text.utf8.prefix(limit)), as: UTF8.self) + "…"
        }
        return text
    }

    /// Replaces every occurrence of each secret by `***`.
    func scrub(_ text: String, _ secrets: [String]) -> String {
        secrets.reduce(text) { $0.replacingOccurrences(of: $1, with: "***") }
    }

    /// The secret values a request carries in hidden headers (the whole value and, after a scheme
    /// such as `Bearer`, the credential alone), so they can be scrubbed from echoes.
    func secretValues(in headers: HTTPHeaders) -> [String] {
        headers.filter { hides(header: $0.name) }.flatMap { field -> [String] in
            let parts = field.value.split(separator: " ", maxSplits: 1)
            let credential = parts.count == 2 ? [String(parts[1])] : []
            return ([field.value] + credential).filter { $0.count >= 4 }
        }
    }

    private func mask(_ value: Any) -> Any {
        if let object = value as? [String: Any] {
            return Dictionary(uniqueKeysWithValues: object.map { key, value in
                (key, fields.contains(key.lowercased()) || hides(header: key) ? "***" : mask(value))
            })
        }
        if let array = value as? [Any] { return array.map(mask) }
        return value
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
