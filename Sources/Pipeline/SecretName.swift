/// The one rule that says whether a name names a secret (contract rule 12): for header names,
/// JSON keys, form fields, query items, nested keys (`user[password]`), HAR files and logs alike.
///
/// A name is split into its words — at every character that is not an ASCII letter or digit
/// (`_`, `-`, `.`, space, `[`, `]`, …) and at camel-case humps (`apiToken`, `APIKey`) — and the
/// words are lowercased. A leading `x` (`X-Api-Key`) is dropped, and so are trailing words that
/// only qualify the value's form (`hint`, `value`, `str`, `header`, `hash`, `digest`, `attempt`,
/// an algorithm or a number: `X-Hub-Signature-256`, `X-Shopify-Hmac-Sha256`, `id_token_hint`).
/// The last word left is the name's **head**: what the value is. Then, in order:
///
/// 1. A word that makes the name a flag (`is`, `has`, `allow`, `enabled`, `required`, `with`,
///    `accept`, …) anywhere: not a secret (`Access-Control-Allow-Credentials`,
///    `otp_required_for_login`).
/// 2. A head that is metadata about a credential — `method`, `type`, `endpoint`, `url`, `check`,
///    `expires`, `at`, `in`, `length`, `count`, `name`, `algorithm`, `version`, `timestamp`,
///    `consent`, `policy`, `user`, … — not a secret (`token_endpoint_auth_method`, `cvc_check`,
///    `token_type`, `cookie_consent`, `client_secret_expires_at`).
/// 3. A word that contains (or the name run together contains: `pass-word`) `passw`,
///    `passphrase`, `passcode`, `secret` (not `secretary`), `cookie`, `signature`, `credential`,
///    `csrf`, `xsrf`, `bearer`, `jwt` or `assertion`, or a word that is `ssn`, `sig`, `pwd`, `pw`,
///    `mnemonic` or `xprv`: a secret.
/// 4. Otherwise the head decides: a credential noun is a secret — a word ending in `token`
///    (not after `page`, `next`, `continuation`, `sync`…: a cursor), `nonce` (not a `request`'s,
///    a tag the server echoes: `X-Request-Nonce`) or `verifier`;
///    `authorization`, `authenticate`, `pass`, `creds`, `salt`, `crumb`, `hmac…`, `cvv`, `cvc`;
///    `sid` alone, run together (`PHPSESSID`) or after `connect`/`session`; `id` after
///    `session`; `key` after a word that makes a key secret (`api`, `access`, `private`,
///    `signing`, `client`, …) or after any word but one that makes it public or an index
///    (`primary`, `public`, `idempotency`, `cache`, `socket`, …); `code` after a word that makes
///    a code a credential (`auth`, `verification`, `mfa`, `one time`, `backup`, `device`,
///    `oob`, …); a `phrase` of a seed or recovery, a security `answer`.
///
/// Some names are **ambiguous**: `key`, `session`, `auth`, `authentication`, `sign` and `code`
/// alone, and `pin`, `otp`, `totp`, `hotp`. Their value decides
/// (``shows(value:json:under:)``): a JSON `true`, `false` or `null`, and for most of them a
/// lowercase word (`theme`, `invalid_grant`) or a small integer, is shown; anything that could
/// be a credential is hidden. Headers never look at the value.
///
/// Not recognised: personal data that is not a credential (`email`, card numbers) and strings
/// that hold a credential inside (`database_url`, `dsn`). Add such names to a
/// ``SensitiveHeaders`` (headers) or a `Redactor` (fields).
package enum SecretName {
    /// What a name says about its value.
    package enum Verdict: Equatable, Sendable {
        /// Not a secret: the value is shown.
        case plain
        /// A secret: the value is hidden, whatever it is.
        case secret
        /// A secret unless the value is plainly not a credential (``shows(value:json:under:)``).
        case ambiguous(Ambiguity)
    }

    /// Which values an ambiguous name shows.
    package enum Ambiguity: Equatable, Sendable {
        /// `key`, `session`, `auth`, `authentication`, `sign` alone: a JSON literal, lowercase
        /// words (`theme`, `dark_mode`) or an integer of at most four digits.
        case words
        /// `code` alone: a JSON literal or lowercase words (`invalid_grant`); never a number,
        /// which could be a one-time code.
        case code
        /// `pin`, `otp`, `totp`, `hotp`: only a JSON `true`, `false` or `null`.
        case digits
    }

    /// Whether the name names a secret (or may, by its value): what headers, redirects, the
    /// cache and de-duplication go by.
    package static func isSecret(_ name: String) -> Bool { verdict(name) != .plain }

    /// Whether the name, as UTF-8 bytes, names a secret (or may, by its value).
    package static func isSecret(bytes: UnsafeBufferPointer<UInt8>) -> Bool { verdict(bytes: bytes) != .plain }

    /// What the name says about its value.
    package static func verdict(_ name: String) -> Verdict {
        var name = name
        return name.withUTF8 { verdict(bytes: $0) }
    }

    /// What the name, as UTF-8 bytes, says about its value.
    package static func verdict(bytes: UnsafeBufferPointer<UInt8>) -> Verdict {
        let count = bytes.count
        guard count >= 2 else { return .plain }
        // Most names (Content-Type, Date, page) lack a letter of every stem a secret word has:
        // told apart in one pass, without folding or splitting.
        var letters: UInt32 = 0
        for byte in bytes {
            let letter = (byte | 0x20) &- UInt8(ascii: "a")
            if letter < 26 { letters |= 1 << UInt32(letter) }
        }
        guard stemMasks.contains(where: { $0 & letters == $0 }) else { return .plain }
        // The rest costs some 5,000 instructions a name, and the same few names (a client's
        // headers, an API's keys) come back with every request: remembered by their bytes.
        guard count <= VerdictMemo.longestName else { return judgeFolding(bytes) }
        return VerdictMemo.shared.verdict(of: bytes) { judgeFolding(bytes) }
    }

    /// The verdict of a name that has the letters of some secret word: its words folded and
    /// split, then judged.
    private static func judgeFolding(_ bytes: UnsafeBufferPointer<UInt8>) -> Verdict {
        let count = bytes.count
        // Lowercased on the stack, with the words' bounds: a name is short, and this runs for
        // every header a redaction, a cache key or a redirect check sees.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { folded in
            withUnsafeTemporaryAllocation(of: Int.self, capacity: 2 * count + 2) { bounds in
                var words = 0
                var length = 0
                var inWord = false
                func close() {
                    if inWord { bounds[2 * words + 1] = length; words += 1; inWord = false }
                }
                for index in 0..<count {
                    let byte = bytes[index]
                    let isUpper = byte &- UInt8(ascii: "A") < 26
                    let isLower = byte &- UInt8(ascii: "a") < 26
                    let isDigit = byte &- UInt8(ascii: "0") < 10
                    guard isUpper || isLower || isDigit else { close(); continue }
                    if isUpper, inWord, index > 0 {
                        let previous = bytes[index - 1]
                        let previousLowerOrDigit = previous &- UInt8(ascii: "a") < 26 || previous &- UInt8(ascii: "0") < 10
                        let previousUpper = previous &- UInt8(ascii: "A") < 26
                        let nextLower = index + 1 < count && bytes[index + 1] &- UInt8(ascii: "a") < 26
                        // `apiToken` → api|Token; `APIKey` → API|Key.
                        if previousLowerOrDigit || (previousUpper && nextLower) { close() }
                    }
                    if !inWord { bounds[2 * words] = length; inWord = true }
                    folded[length] = isUpper ? byte + 32 : byte
                    length += 1
                }
                close()
                guard words > 0 else { return .plain }
                let text = UnsafeBufferPointer(rebasing: folded[..<length])
                return withUnsafeTemporaryAllocation(of: Word.self, capacity: words) { list in
                    for index in 0..<words { list.initializeElement(at: index, to: text[bounds[2 * index]..<bounds[2 * index + 1]]) }
                    defer { list.deinitialize() }
                    return judge(words: UnsafeBufferPointer(list), text: text[...])
                }
            }
        }
    }

    private typealias Word = Slice<UnsafeBufferPointer<UInt8>>

    /// The verdicts of the last names judged, by their exact bytes: a direct-mapped table of 256
    /// names (a name evicts the one in its slot), behind a lock. A verdict depends on the name's
    /// bytes alone, so a remembered one is the one the rule gives.
    struct VerdictMemo: Sendable {
        static let shared = VerdictMemo()
        /// Longer names are judged every time (and never kept).
        static let longestName = 64

        private struct Entry {
            let name: [UInt8]
            let verdict: Verdict
        }

        private let slots = Locked<[Entry?]>(Array(repeating: nil, count: 256))

        /// The verdict remembered for `name`, or `judge()`'s, then remembered.
        func verdict(of name: UnsafeBufferPointer<UInt8>, judging judge: () -> Verdict) -> Verdict {
            var hash: UInt64 = 0xCBF2_9CE4_8422_2325  // FNV-1a
            for byte in name { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
            let slot = Int(truncatingIfNeeded: hash ^ hash >> 29) & 255
            let known = slots.withLock { slots -> Verdict? in
                guard let entry = slots[slot], entry.name.elementsEqual(name) else { return nil }
                return entry.verdict
            }
            if let known { return known }
            let verdict = judge()
            slots.withLock { $0[slot] = Entry(name: Array(name), verdict: verdict) }
            return verdict
        }
    }

    /// The rule over the lowercased words (see the type's documentation, whose steps it follows).
    private static func judge(words all: UnsafeBufferPointer<Word>, text: Word) -> Verdict {
        let first = all.count > 1 && equals(all[0], "x") ? 1 : 0
        var last = all.count - 1
        while last > first, isTransparent(all[last]) { last -= 1 }
        let words = all[first...last]
        // 1. A flag.
        if words.contains(where: { isIn($0, predicates) }) { return .plain }
        // 2. Metadata about a credential.
        let head = all[last]
        if isIn(head, metadata) { return .plain }
        // 3. Strong words wherever they stand.
        for part in containedParts {
            var from = text.startIndex
            while let at = find(part.bytes, in: text[from...]) {
                let after = text[(at + part.bytes.count)...]
                if !part.unless.contains(where: { hasPrefix(after, $0) }) { return .secret }
                from = at + 1
            }
        }
        if words.contains(where: { isIn($0, strongWords) }) { return .secret }
        // 4. The head decides.
        let previous = last > first ? all[last - 1] : nil
        if let verdict = headVerdict(head, previous: previous, beforePrevious: last - 1 > first ? all[last - 2] : nil) {
            return verdict
        }
        // `api_key_id`, `access_key_name` is metadata (2.): a key word after a secret qualifier
        // anywhere before the head.
        for index in words.indices where index < last {
            let word = all[index]
            if equals(word, "key") || equals(word, "keys") {
                if index > first, isIn(all[index - 1], secretKeyQualifiers) { return .secret }
            } else if hasSuffix(word, "key"), word.count > 3, hasQualifierSuffix(word.dropLast(3), secretKeyQualifiers) {
                return .secret
            }
        }
        return .plain
    }

    /// The verdict of a head word, or `nil` when the head is no credential noun.
    private static func headVerdict(_ head: Word, previous: Word?, beforePrevious: Word?) -> Verdict? {
        if hasSuffix(head, "token") {
            let stem = head.dropLast(5)
            if stem.isEmpty, let previous, isIn(previous, cursorQualifiers) { return .plain }
            if !stem.isEmpty, hasQualifierSuffix(stem, cursorQualifiers) { return .plain }
            return .secret
        }
        // A request's nonce (`X-Request-Nonce`) is a tag the server echoes, like a request id.
        if equals(head, "nonce"), let previous, equals(previous, "request") { return .plain }
        if hasSuffix(head, "nonce") || hasSuffix(head, "verifier") || hasSuffix(head, "sessid") || hasSuffix(head, "sessionid")
            || hasSuffix(head, "authorization") || hasSuffix(head, "authorisation") || hasPrefix(head, "hmac")
        {
            return .secret
        }
        if isIn(head, secretHeads) { return .secret }
        // Alone, these words are as often a setting's name, a flag or a state as a credential:
        // their value decides. Qualified (`x-sentry-auth`, `laravel_session`), they are secrets.
        if equals(head, "auth") || equals(head, "authn") || equals(head, "authz") || equals(head, "authentication")
            || equals(head, "sign")
        {
            return previous == nil ? .ambiguous(.words) : .secret
        }
        if isIn(head, digitHeads) { return .ambiguous(.digits) }
        // `X-JFrog-Art-Api`: a product's API credential; `api` alone is a version or a name.
        if equals(head, "api"), previous != nil { return .secret }
        if equals(head, "sid") {
            guard let previous else { return .secret }
            return isIn(previous, sessionQualifiers) || hasSuffix(previous, "session") ? .secret : .plain
        }
        if head.count > 3, hasSuffix(head, "sid") { return .secret }
        if hasSuffix(head, "session") { return previous == nil && head.count == 7 ? .ambiguous(.words) : .secret }
        if equals(head, "id"), let previous, hasSuffix(previous, "session") { return .secret }
        if equals(head, "key") || equals(head, "keys") {
            guard let previous else { return equals(head, "key") ? .ambiguous(.words) : .plain }
            if isIn(previous, secretKeyQualifiers) { return .secret }
            return isIn(previous, publicKeyQualifiers) ? .plain : .secret
        }
        if hasSuffix(head, "key") {
            return hasQualifierSuffix(head.dropLast(3), secretKeyQualifiers) ? .secret : nil
        }
        if equals(head, "code") || equals(head, "codes") {
            guard let previous else { return .ambiguous(.code) }
            if isIn(previous, secretCodeQualifiers) { return .secret }
            if let beforePrevious, isJoined(beforePrevious, previous, in: secretCodeQualifiers) { return .secret }
            return .plain
        }
        let code = hasSuffix(head, "codes") ? head.dropLast() : head
        if hasSuffix(code, "code"), code.count > 4 {
            return hasQualifierSuffix(code.dropLast(4), secretCodeQualifiers) ? .secret : nil
        }
        if let previous {
            if isIn(head, phraseHeads), isIn(previous, phraseQualifiers) { return .secret }
            if isIn(head, answerHeads), isIn(previous, answerQualifiers) { return .secret }
        }
        return nil
    }

    // MARK: - Values

    /// Whether a value under a name of this verdict is shown: always for ``Verdict/plain``, never
    /// for ``Verdict/secret``; for an ambiguous name only when the value cannot be a credential.
    ///
    /// - Parameters:
    ///   - value: The value as written: a JSON value's bytes (quotes included), or a form or
    ///     query value, percent-decoded.
    ///   - json: Whether `value` is JSON (a literal `true`, `false`, `null` or a number can be
    ///     told from a string).
    ///   - verdict: The name's verdict.
    package static func shows(value: some Collection<UInt8>, json: Bool, under verdict: Verdict) -> Bool {
        let ambiguity: Ambiguity
        switch verdict {
        case .plain: return true
        case .secret: return false
        case .ambiguous(let kind): ambiguity = kind
        }
        var bytes = Array(value)
        while let last = bytes.last, last == 0x20 || last == 0x09 || last == 0x0A || last == 0x0D { bytes.removeLast() }
        if json {
            if bytes.elementsEqual("true".utf8) || bytes.elementsEqual("false".utf8) || bytes.elementsEqual("null".utf8) {
                return true
            }
            if bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") {
                bytes = Array(bytes.dropFirst().dropLast())
                // An escape could spell anything: such a value is judged no word.
                if bytes.contains(UInt8(ascii: "\\")) { return false }
            } else if ambiguity != .words || !isSmallInteger(bytes) {
                return false  // a number, an array or an object (or a cut value)
            } else {
                return true
            }
        }
        switch ambiguity {
        case .digits: return false
        case .code: return isLowercaseWords(bytes)
        case .words: return isLowercaseWords(bytes) || isSmallInteger(bytes)
        }
    }

    /// One to four digits, with an optional `-`: an index, a count, a sign.
    private static func isSmallInteger(_ bytes: [UInt8]) -> Bool {
        let digits = bytes.first == UInt8(ascii: "-") ? bytes.dropFirst() : bytes[...]
        return (1...4).contains(digits.count) && digits.allSatisfy { $0 &- UInt8(ascii: "0") < 10 }
    }

    /// Lowercase ASCII words of at most 16 letters each, joined by `_`, `-`, `.` or a space, 32
    /// bytes at most, no digit and no capital (`theme`, `dark_mode`, `invalid_grant`): a setting's
    /// name or an enum's case, never a generated credential.
    private static func isLowercaseWords(_ bytes: [UInt8]) -> Bool {
        guard (1...32).contains(bytes.count) else { return false }
        var run = 0
        var letters = 0
        for byte in bytes {
            if byte &- UInt8(ascii: "a") < 26 {
                run += 1
                letters += 1
                if run > 16 { return false }
            } else if byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == 0x20 {
                run = 0
            } else {
                return false
            }
        }
        return letters > 0
    }

    // MARK: - Words and their roles

    /// Parts that make a name that contains them a secret (`newpassword`, `oauthsignature`), each
    /// with the continuations that make it another word (`secretary`).
    private static let containedParts: [(bytes: [UInt8], unless: [[UInt8]])] = [
        ("passw", []), ("passphrase", []), ("passcode", []), ("secret", ["ary", "ari", "ion"]), ("cookie", []),
        ("signature", []), ("credential", []), ("csrf", []), ("xsrf", []), ("bearer", []), ("jwt", []), ("assertion", []),
    ].map { (Array($0.0.utf8), $0.1.map { Array($0.utf8) }) }

    /// Words that make a name a secret wherever they stand.
    private static let strongWords = words("ssn", "sig", "pwd", "pw", "mnemonic", "xprv", "xpriv")

    /// Heads that are credentials, whatever their value.
    private static let secretHeads = words(
        "authenticate", "pass", "creds", "salt", "crumb", "cvv", "cvv2", "cvc", "cvc2", "ccv", "ccv2")

    /// A seed's or a wallet's recovery words (`seed_phrase`), a security question's answer.
    private static let phraseHeads = words("phrase", "phrases", "words")
    private static let phraseQualifiers = words("seed", "recovery", "backup", "mnemonic", "secret", "wallet")
    private static let answerHeads = words("answer", "answers")
    private static let answerQualifiers = words("security", "secret")

    /// Heads whose credentials are digits: shown only as a JSON literal.
    private static let digitHeads = words("pin", "otp", "totp", "hotp")

    /// Words that make a name a flag (`is_authenticated`, `Access-Control-Allow-Credentials`).
    private static let predicates = words(
        "is", "has", "have", "allow", "allows", "allowed", "accept", "enable", "enables", "enabled", "disable", "disabled",
        "require", "requires", "required", "supports", "supported", "use", "with", "include", "includes", "needs",
        "should", "can", "show", "hide", "expose", "optional")

    /// Heads that say something about a credential, not what it is.
    private static let metadata = words(
        "method", "methods", "type", "types", "kind", "endpoint", "endpoints", "url", "urls", "uri", "uris", "check",
        "checks", "expires", "expiry", "expiration", "exp", "expired", "length", "len", "count", "size", "lifetime",
        "ttl", "age", "mode", "scheme", "schemes", "format", "name", "names", "algorithm", "algorithms", "alg", "algo",
        "at", "in", "on", "status", "state", "version", "policy", "policies", "field", "fields", "param", "params",
        "parameter", "parameters", "input", "label", "description", "location", "path", "domain", "domains", "provider",
        "providers", "strategy", "flow", "flows", "consent", "banner", "settings", "config", "configuration", "options",
        "preferences", "prefix", "suffix", "limit", "limits", "usage", "uses", "used", "error", "errors", "scope",
        "scopes", "audience", "issuer", "timestamp", "time", "date", "created", "updated", "changed", "strength",
        "validator", "validators", "hasher", "hashers", "origins", "origin", "secure", "httponly", "samesite", "arn",
        "details", "result", "results", "engine", "driver", "model", "timeout", "interval", "host", "port", "server",
        "user", "username", "email", "duration", "period", "window", "rotation", "template", "pattern", "regex",
        "rules", "requirements", "complexity", "history")

    /// Trailing words that qualify the form of the value, not what it is.
    private static let transparent = words(
        "hint", "value", "str", "string", "header", "headers", "hash", "digest", "attempt", "sha", "sha1", "sha224",
        "sha256", "sha384", "sha512", "md5", "ed25519", "hex", "base64", "b64", "base64url", "raw", "enc", "encoded")

    private static func isTransparent(_ word: Word) -> Bool {
        if word.allSatisfy({ $0 &- UInt8(ascii: "0") < 10 }) { return true }  // `-256`, `-1`
        if word.count >= 2, word.first == UInt8(ascii: "v"), word.dropFirst().allSatisfy({ $0 &- UInt8(ascii: "0") < 10 }) {
            return true  // `-v3`
        }
        return isIn(word, transparent)
    }

    /// Words before `token` that make it a position in a list, not a credential.
    private static let cursorQualifiers = words(
        "page", "next", "prev", "previous", "continuation", "sync", "pagination", "cursor", "resume", "start", "starting")

    /// Words before `sid` that make it a session's (`connect.sid`), not a resource's (`AccountSid`).
    private static let sessionQualifiers = words("connect", "session", "sess", "login", "auth", "secure", "host")

    /// Words before `key` that make it a secret wherever it stands (`api_key_id`, `apikey`).
    private static let secretKeyQualifiers = words(
        "api", "access", "private", "secret", "signing", "sign", "encryption", "encrypt", "decryption", "master",
        "client", "consumer", "app", "application", "session", "auth", "license", "licence", "subscription", "ssh", "gpg",
        "pgp", "shared", "hmac", "functions", "function", "admin", "account", "developer", "service", "write", "read",
        "live", "test", "publishable", "pass", "token", "wallet", "root", "restricted", "personal", "webhook",
        "merchant", "partner", "integration", "bot")

    /// Words before a last `key` that make it public or an index, not a secret.
    private static let publicKeyQualifiers = words(
        "primary", "foreign", "sort", "partition", "public", "idempotency", "cache", "object", "routing", "dedup",
        "dedupe", "deduplication", "lookup", "group", "translation", "i18n", "shortcut", "hot", "row", "range", "hash",
        "composite", "unique", "socket", "websocket", "map", "dictionary", "natural", "surrogate", "idempotent", "event",
        "message", "storage", "s3", "bucket", "entity", "item", "list", "react", "index", "host", "verification",
        "verify", "verifying", "resident", "kms", "join")

    /// Words before `code` that make it a credential (`auth_code`, `verification_code`), also as
    /// two words run together (`one_time_code`, `two_factor_code`).
    private static let secretCodeQualifiers = words(
        "auth", "authorization", "authorisation", "authentication", "authenticator", "oauth", "verification", "verify",
        "confirmation", "confirm", "otp", "totp", "hotp", "mfa", "tfa", "twofa", "2fa", "2sv", "twofactor", "twostep",
        "onetime", "reset", "recovery", "backup", "security", "sms", "device", "pin", "access", "login", "signin",
        "logon", "activation", "activate", "magic", "unlock", "puk", "pairing", "pair", "claim", "redemption", "redeem",
        "gift", "invite", "invitation", "enrollment", "enrolment", "epp", "oob", "binding", "sudo", "emergency",
        "rescue", "setup")

    /// One stem of every rule: a name whose letters hold none of these has no secret word.
    private static let stemMasks: [UInt32] = [
        "pass", "secret", "cookie", "sessid", "token", "auth", "pwd", "pw", "pin", "otp", "jwt", "bearer", "sid",
        "cred", "sig", "csrf", "xsrf", "ssn", "cvv", "cvc", "ccv", "salt", "assertion", "session", "key", "code",
        "nonce", "verifier", "crumb", "hmac", "mnemonic", "xprv", "phrase", "words", "answer", "api",
    ].map { word in
        var mask: UInt32 = 0
        for byte in word.utf8 { mask |= 1 << UInt32(byte - UInt8(ascii: "a")) }
        return mask
    }

    private static func words(_ list: String...) -> WordSet { WordSet(list) }

    private static func isIn(_ word: Word, _ list: WordSet) -> Bool { list.contains(word) }

    /// A set of lowercase words of at most 16 bytes, each packed into two integers and kept
    /// sorted: a lookup is a binary search of integer pairs, no hashing and no allocation (this
    /// runs for every header a redaction, a cache key or a redirect check sees).
    private struct WordSet: Sendable {
        /// The words as written, for the run-together suffix checks.
        let list: [[UInt8]]
        private let keys: [Key]

        private struct Key: Comparable, Sendable {
            let high: UInt64
            let low: UInt64
            static func < (a: Key, b: Key) -> Bool { a.high != b.high ? a.high < b.high : a.low < b.low }
        }

        init(_ words: [String]) {
            list = words.map { Array($0.utf8) }
            keys = list.compactMap { Self.key($0) }.sorted()
        }

        /// The bytes packed big-endian and zero-padded (words hold no zero byte, so the padding
        /// tells the length); `nil` for a word longer than 16 bytes, which no set holds.
        private static func key(_ word: some Collection<UInt8>) -> Key? {
            guard word.count <= 16 else { return nil }
            var high: UInt64 = 0
            var low: UInt64 = 0
            var index = 0
            for byte in word {
                if index < 8 { high |= UInt64(byte) << UInt64(56 - 8 * index) } else { low |= UInt64(byte) << UInt64(56 - 8 * (index - 8)) }
                index += 1
            }
            return Key(high: high, low: low)
        }

        func contains(_ word: Word) -> Bool {
            guard let key = Self.key(word) else { return false }
            var lower = 0
            var upper = keys.count
            while lower < upper {
                let middle = (lower + upper) / 2
                if keys[middle] < key { lower = middle + 1 } else { upper = middle }
            }
            return lower < keys.count && keys[lower] == key
        }
    }

    /// Whether `first` and `second` written together are one of `list` (`one`+`time`).
    private static func isJoined(_ first: Word, _ second: Word, in set: WordSet) -> Bool {
        set.list.contains { $0.count == first.count + second.count && $0.prefix(first.count).elementsEqual(first)
            && $0.suffix(second.count).elementsEqual(second) }
    }

    /// Whether a run-together word's stem ends in a qualifier (`xapi` in `xapikey`).
    private static func hasQualifierSuffix(_ stem: Word, _ set: WordSet) -> Bool {
        set.list.contains { stem.count >= $0.count && stem.suffix($0.count).elementsEqual($0) }
    }

    private static func equals(_ word: Word, _ other: String) -> Bool { word.elementsEqual(other.utf8) }

    private static func hasPrefix(_ word: Word, _ prefix: String) -> Bool {
        word.count >= prefix.utf8.count && word.prefix(prefix.utf8.count).elementsEqual(prefix.utf8)
    }

    private static func hasPrefix(_ word: Word, _ prefix: [UInt8]) -> Bool {
        word.count >= prefix.count && word.prefix(prefix.count).elementsEqual(prefix)
    }

    private static func hasSuffix(_ word: Word, _ suffix: String) -> Bool {
        word.count >= suffix.utf8.count && word.suffix(suffix.utf8.count).elementsEqual(suffix.utf8)
    }

    /// Where `needle` first starts in `text`, if anywhere.
    private static func find(_ needle: [UInt8], in text: Word) -> Int? {
        let size = needle.count
        guard text.count >= size, let first = needle.first else { return nil }
        var start = text.startIndex
        while start + size <= text.endIndex {
            if text[start] == first, text[start..<start + size].elementsEqual(needle) { return start }
            start += 1
        }
        return nil
    }
}
