public import ConveyorPipeline
public import Foundation

/// Hides secrets in what ``LoggingBehavior`` writes (and `curlCommand()`, HAR files): the
/// values of headers, query items, URL fragment items, form fields and JSON keys whose names
/// mean a secret, each shown as `***`.
///
/// Which names mean a secret is one rule over the words of a name, the same for headers,
/// fields, query items and nested keys (`user[password]`), in any spelling (`api_token`,
/// `apiToken`, `X-Api-Token`): the Reliability guide lists it. A few names alone are ambiguous
/// (`key`, `session`, `auth`, `code`, `pin`…): in bodies, queries and forms their value decides,
/// and only a value that cannot be a credential is shown (`{"key":"theme"}`, `{"pin":true}`; never
/// `{"pin":"1234"}`); a header's value is hidden by its name alone. What you configure here is
/// added to the rule and hidden whatever its value; nothing takes a name away from it.
///
/// ```swift
/// let redactor = Redactor(fields: ["email", "cardNumber"])   // the rule, and these two
/// ```
public struct Redactor: Sendable {
    /// Header names whose values are hidden besides those the rule and the request's
    /// ``SensitiveHeaders`` already hide.
    public var headers: Set<String> { didSet { normalizedHeaders = Self.normalized(headers) } }
    /// Query item, form field and JSON key names whose values are hidden besides those the rule
    /// hides. Compared by their letters and digits alone, in any case (`cardNumber` is
    /// `card_number`).
    public var fields: Set<String> { didSet { normalizedFields = Self.normalized(fields) } }

    private var normalizedHeaders: Set<String>
    private var normalizedFields: Set<String>

    /// Creates a redactor that hides what the rule hides and the names you add.
    /// - Parameters:
    ///   - headers: Header names to hide besides the rule's.
    ///   - fields: Query/form/JSON field names to hide besides the rule's.
    public init(headers: Set<String> = [], fields: Set<String> = []) {
        self.headers = headers
        self.fields = fields
        self.normalizedHeaders = Self.normalized(headers)
        self.normalizedFields = Self.normalized(fields)
    }

    /// A name as compared with the added names: its ASCII letters and digits, lowercased.
    static func normalized(_ name: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(name.utf8.count)
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): bytes.append(byte + 32)
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): bytes.append(byte)
            default: continue
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func normalized(_ names: Set<String>) -> Set<String> { Set(names.map(normalized)) }

    /// Whether a header's value must be hidden.
    /// - Parameters:
    ///   - name: The header name.
    ///   - sensitive: The credential header names of the request's client
    ///     (``HTTPRequest/sensitiveHeaders``); the built-in ones by default.
    public func hides(header name: String, sensitive: SensitiveHeaders = .standard) -> Bool {
        sensitive.contains(name) || (!normalizedHeaders.isEmpty && normalizedHeaders.contains(Self.normalized(name)))
    }

    /// The header value to show: `***` for a hidden header; otherwise the value with the URLs it
    /// carries redacted (``redactingURLs(in:)``: `Location`, `Content-Location`, `Link`,
    /// `Refresh`, `Referer` and any other header that holds one).
    package func value(of field: HTTPHeaders.Field, sensitive: SensitiveHeaders = .standard) -> String {
        hides(header: field.name, sensitive: sensitive) ? "***" : redactingURLs(in: field.value)
    }

    /// Text with the URLs in it redacted as ``redact(_:)`` redacts a request's: after every `?`
    /// or `#`, the values of items whose names mean a secret are `***` (`app:/cb#access_token=…`,
    /// `<https://api.example/p?page=2&token=…>; rel="next"`, `0; url=/?session_id=…`), and the user
    /// info of every `scheme://user:password@` is `***`. A value with no `?`, `#` or `@` is
    /// returned as it is, without a copy.
    package func redactingURLs(in text: String) -> String {
        let bytes = Array(text.utf8)
        guard bytes.contains(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") || $0 == UInt8(ascii: "@") }) else {
            return text
        }
        func endsItems(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: ">"), UInt8(ascii: "<"), UInt8(ascii: "\""),
                UInt8(ascii: "'"), UInt8(ascii: ";"), UInt8(ascii: ","):
                return true
            default: return false
            }
        }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") {
                output.append(byte)
                var end = index + 1
                while end < bytes.count, !endsItems(bytes[end]) { end += 1 }
                output += redacting(formEncoded: bytes[(index + 1)..<end])
                index = end
            } else if byte == UInt8(ascii: "@"), let start = Self.userInfoStart(in: bytes, before: index) {
                // `scheme://user:password@host`: what follows `://` up to the `@` is user info.
                output.removeLast(index - start)
                output += Array("***@".utf8)
                index += 1
            } else {
                output.append(byte)
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Where the user info that ends at `at` starts: just after a `://` with no `/`, `?`, `#`, space
    /// or `<` between it and `at`.
    private static func userInfoStart(in bytes: [UInt8], before at: Int) -> Int? {
        var index = at - 1
        while index >= 2 {
            let byte = bytes[index]
            if byte == UInt8(ascii: "/") {
                return bytes[index - 1] == UInt8(ascii: "/") && bytes[index - 2] == UInt8(ascii: ":") && index + 1 < at
                    ? index + 1 : nil
            }
            if byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "<") {
                return nil
            }
            index -= 1
        }
        return nil
    }

    /// The URL with its user info, and the values of hidden query items and of hidden items of
    /// its fragment (the OAuth implicit flow puts `access_token` there), replaced by `***`.
    /// - Parameter url: The URL.
    public func redact(_ url: URL) -> String {
        var bytes = Array(url.redactingUserInfo.utf8)[...]
        var output: [UInt8] = []
        let hash = bytes.firstIndex(of: UInt8(ascii: "#"))
        var fragment = hash.map { bytes[($0 + 1)...] }
        if let hash { bytes = bytes[..<hash] }
        if let question = bytes.firstIndex(of: UInt8(ascii: "?")) {
            output += bytes[...question]
            output += redacting(formEncoded: bytes[(question + 1)...])
        } else {
            output += bytes
        }
        if let items = fragment {
            output.append(UInt8(ascii: "#"))
            // `#/callback?access_token=…` (a route before the items) or `#access_token=…`.
            if let question = items.firstIndex(of: UInt8(ascii: "?")) {
                output += items[...question]
                fragment = items[(question + 1)...]
            }
            output += redacting(formEncoded: fragment ?? [])
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// `a=1&password=***`: hides the values of hidden names in a URL-encoded list.
    func redact(formEncoded text: String) -> String {
        String(decoding: redacting(formEncoded: Array(text.utf8)[...]), as: UTF8.self)
    }

    /// `a=1&password=***` over bytes: each name is percent- and form-decoded before it is compared.
    func redacting(formEncoded text: ArraySlice<UInt8>, mask: [UInt8] = Array("***".utf8)) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(text.count)
        var first = true
        for pair in text.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            if !first { output.append(UInt8(ascii: "&")) }
            first = false
            guard let equals = pair.firstIndex(of: UInt8(ascii: "=")),
                hides(field: String(decoding: Self.formDecoded(pair[..<equals]), as: UTF8.self), value: pair[(equals + 1)...])
            else {
                output += pair
                continue
            }
            output += pair[...equals]
            output += mask
        }
        return output
    }

    /// Whether a query item, form field or JSON key's value may be hidden (it is, unless the
    /// name is ambiguous and the value plainly no credential: ``verdict(field:sensitive:)``).
    func hides(field name: String, sensitive: SensitiveHeaders = .standard) -> Bool {
        verdict(field: name, sensitive: sensitive) != .plain
    }

    /// What a query item, form field or JSON key's name says of its value: the one secret rule
    /// (``SecretName``), and a secret whatever its value for a name the client added to its
    /// ``SensitiveHeaders`` or one added here.
    func verdict(field name: String, sensitive: SensitiveHeaders = .standard) -> SecretName.Verdict {
        if !sensitive.added.isEmpty, sensitive.added.contains(where: { HTTPHeaders.namesEqual($0, name) }) { return .secret }
        if !normalizedFields.isEmpty || !normalizedHeaders.isEmpty {
            let key = Self.normalized(name)
            if normalizedFields.contains(key) || normalizedHeaders.contains(key) { return .secret }
        }
        return SecretName.verdict(name)
    }

    /// Whether a form or query item's value (as written, percent-encoded) must be hidden.
    func hides(field name: String, value: ArraySlice<UInt8>, sensitive: SensitiveHeaders = .standard) -> Bool {
        let verdict = verdict(field: name, sensitive: sensitive)
        switch verdict {
        case .plain: return false
        case .secret: return true
        case .ambiguous: return !SecretName.shows(value: Self.formDecoded(value), json: false, under: verdict)
        }
    }

    /// How much of a body a preview reads beyond its limit, so that a secret the limit cuts is
    /// still recognized (and the field that names it): previews never read more than this.
    static let previewSlack = 4096

    /// A preview of a body at most `limit` bytes long: the values of hidden form fields and JSON
    /// keys masked whole, every known secret value (in any of the encodings a server may echo it
    /// in, and any 8-byte piece of one) masked, and a secret that the limit would cut removed
    /// whole.
    ///
    /// It reads at most `limit` + 4 KiB of the body, whatever the body's size, and works over its
    /// bytes in linear time: JSON is read by a streaming scan of that prefix, never parsed into
    /// objects.
    package func preview(_ body: Data, contentType: String?, limit: Int, scrubbing secrets: [String] = []) -> String {
        preview(body, contentType: contentType, limit: limit, scrubber: SecretScrubber(secrets: secrets))
    }

    /// ``preview(_:contentType:limit:scrubbing:)`` with the secrets' scrubber built once.
    /// - Parameter ellipsis: Whether a preview the limit cut ends with `…` (a log line), or
    ///   holds only bytes of the body (a HAR file, which replays what it holds).
    package func preview(
        _ body: Data, contentType: String?, limit: Int, scrubber: SecretScrubber, ellipsis: Bool = true
    ) -> String {
        guard limit > 0, !body.isEmpty else { return "" }
        let window = limit >= body.count - Self.previewSlack ? body.count : limit + Self.previewSlack
        // Valid UTF-8 first (invalid bytes become U+FFFD), so nothing later can turn bytes into a
        // character that completes a secret.
        var text = Array(String(decoding: body.prefix(window), as: UTF8.self).utf8)
        let isForm = contentType.flatMap(MediaType.init)?.isFormURLEncoded ?? false
        text = isForm ? redacting(formEncoded: text[...]) : JSONFieldScanner(bytes: text).masking(where: { self.verdict(field: $0) }, mask: Array("***".utf8))
        text = scrubber.scrub(text)
        guard text.count > limit || window < body.count else { return String(decoding: text, as: UTF8.self) }
        // Cut at a character boundary, then drop what a cut left of a secret.
        var cut = min(limit, text.count)
        while cut > 0, cut < text.count, text[cut] & 0xC0 == 0x80 { cut -= 1 }
        var kept = Array(text[..<cut])
        kept.removeLast(scrubber.cutSecretLength(atEndOf: kept))
        // Decoded before the last scrub: a character the removal split becomes U+FFFD first, so
        // nothing after the scrub can change what it saw.
        let ending = Array(String(decoding: kept + (ellipsis ? Array("…".utf8) : []), as: UTF8.self).utf8)
        return String(decoding: scrubber.scrub(ending), as: UTF8.self)
    }

    /// Replaces every occurrence of each secret, in each encoding a server may echo it in, and
    /// every 8-byte piece of one, by `***`.
    package func scrub(_ text: String, _ secrets: [String]) -> String {
        scrub(text, scrubber: SecretScrubber(secrets: secrets))
    }

    /// ``scrub(_:_:)`` with the secrets' scrubber built once.
    package func scrub(_ text: String, scrubber: SecretScrubber) -> String {
        scrubber.scrub(text)
    }

    /// Percent- and form-decoded bytes (`+` is a space); an invalid escape stays as it is.
    static func formDecoded(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 0x30...0x39: return byte - 0x30
            case 0x41...0x46: return byte - 0x41 + 10
            case 0x61...0x66: return byte - 0x61 + 10
            default: return nil
            }
        }
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                out.append(0x20)
            } else if byte == UInt8(ascii: "%"), index + 2 < bytes.endIndex, let high = hex(bytes[index + 1]),
                let low = hex(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
                continue
            } else {
                out.append(byte)
            }
            index += 1
        }
        return out
    }

    /// Masks the values of hidden keys in JSON or JSON-like text (see ``JSONFieldScanner``).
    func redact(jsonLike text: String) -> String {
        String(decoding: JSONFieldScanner(bytes: Array(text.utf8)).masking(where: { self.verdict(field: $0) }, mask: Array("***".utf8)), as: UTF8.self)
    }

    /// The secret values a request carries, so they can be scrubbed from echoes: hidden
    /// headers (the whole value and, after a scheme such as `Bearer`, the credential alone; each
    /// cookie's value), the URL's user and password, the values of hidden query and fragment
    /// items, and of hidden form fields, and every string and scalar under a hidden JSON key.
    package func secretValues(in request: HTTPRequest) -> [String] {
        let sensitive = request.sensitiveHeaders
        let judge = { (name: String) in self.verdict(field: name, sensitive: sensitive) }
        var values = request.headers.credentialValues { self.hides(header: $0, sensitive: sensitive) }
        let url = Array(request.url.absoluteString.utf8)[...]
        values += Self.userInfo(of: url)
        var items: [ArraySlice<UInt8>] = []
        let hash = url.firstIndex(of: UInt8(ascii: "#"))
        let beforeFragment = hash.map { url[..<$0] } ?? url
        if let question = beforeFragment.firstIndex(of: UInt8(ascii: "?")) { items.append(beforeFragment[(question + 1)...]) }
        if let hash {
            let fragment = url[(hash + 1)...]
            items.append(fragment.firstIndex(of: UInt8(ascii: "?")).map { fragment[($0 + 1)...] } ?? fragment)
        }
        if let body = request.body, body.count <= 1 << 20 {
            let bytes = Array(body)
            items.append(bytes[...])
            values += JSONFieldScanner(bytes: bytes).hiddenLeaves(where: judge)
        }
        // Only a pair with `=` can hold a value: a list without one (a JSON body) is not split.
        for list in items where list.withUnsafeBufferPointer({ !$0.isEmpty && memchr($0.baseAddress!, Int32(UInt8(ascii: "=")), $0.count) != nil }) {
            for pair in list.split(separator: UInt8(ascii: "&")) {
                guard let equals = pair.firstIndex(of: UInt8(ascii: "=")),
                    hides(
                        field: String(decoding: Self.formDecoded(pair[..<equals]), as: UTF8.self), value: pair[(equals + 1)...],
                        sensitive: sensitive)
                else { continue }
                values.append(String(decoding: Self.formDecoded(pair[(equals + 1)...]), as: UTF8.self))
            }
        }
        return values.filter { $0.utf8.count >= 4 }
    }

    /// The decoded user and password of a URL's authority.
    private static func userInfo(of url: ArraySlice<UInt8>) -> [String] {
        guard let schemeEnd = url.endOfFirstSchemeSeparator else { return [] }
        let rest = url[schemeEnd...]
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) else { return [] }
        return rest[..<at].split(separator: UInt8(ascii: ":"), maxSplits: 1).map {
            String(decoding: formDecodedKeepingPlus($0), as: UTF8.self)
        }
    }

    private static func formDecodedKeepingPlus(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        // In user info `+` is itself; decode only the escapes.
        var parts: [[UInt8]] = []
        for piece in bytes.split(separator: UInt8(ascii: "+"), omittingEmptySubsequences: false) { parts.append(formDecoded(piece)) }
        return Array(parts.joined(separator: [UInt8(ascii: "+")]))
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
        for field in headers {
            parts += ["-H", Self.shellQuote("\(field.name): \(redactor.value(of: field, sensitive: sensitiveHeaders))")]
        }
        if let body, !body.isEmpty {
            let preview = redactor.preview(body, contentType: headers["Content-Type"], limit: Int.max)
            parts += ["--data-binary", Self.shellQuote(preview)]
        }
        return parts.joined(separator: " ")
    }

    /// `'text'`, with each `'` written as `'\''`.
    static func shellQuote(_ text: String) -> String {
        var quoted = "'"
        for character in text { if character == "'" { quoted += #"'\''"# } else { quoted.append(character) } }
        return quoted + "'"
    }
}
