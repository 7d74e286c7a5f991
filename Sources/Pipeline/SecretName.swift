/// The one rule that says whether a name names a secret (contract rule 12): for header names,
/// JSON keys, form fields, query items, nested keys (`user[password]`), HAR files and logs alike.
///
/// A name is split into its words — at every character that is not an ASCII letter or digit
/// (`_`, `-`, `.`, space, `[`, `]`, …) and at camel-case humps (`apiToken`, `APIKey`) — and the
/// words are lowercased. The name is a secret when one of its words:
///
/// - contains (or the name run together contains: `pass-word`) `passw`, `passphrase`, `passcode`, `secret`, `cookie`, `signature`, `credential`,
///   `csrf`, `xsrf`, `bearer`, `jwt`, `assertion`, `authoriz`, `authoris` or `authenticat`, or ends
///   in `sid` (`password_confirmation`, `newpassword`, `client_secret`, `oauthsignature`,
///   `proxyauthorization`, `PHPSESSID`, `JSESSIONID`, `connectsid`);
/// - ends in `token` and is the last word or is followed by `secret`, `value` or `key`
///   (`api_token`, `oauth_token`, `csrfmiddlewaretoken`; not `token_type`, `max_tokens`,
///   `tokenizer`);
/// - begins with `auth`, unless it begins with `author` but not `authoriz`/`authoris`
///   (`auth`, `Authorization`, `WWW-Authenticate`; not `author`, `authority`);
/// - is one of `pwd`, `pass` (as the last word), `pin`, `otp`, `totp`, `hotp`, `sid`, `creds`,
///   `sig`, `ssn`, `cvv`, `cvv2`, `cvc`, `cvc2`, `salt`;
/// - ends in `session` and is the last word or stands before `id` or `key` (`session`,
///   `laravel_session`, `Session-Id`; not `session_expires_at`);
/// - is `key` or `keys` alone, last after any word but a few that make a key public or an index
///   (`primary`, `foreign`, `sort`, `partition`, `public`, `idempotency`, `cache`, `socket`, …), or
///   anywhere after a word that makes it secret (`api`, `access`, `private`, `signing`, `master`,
///   `client`, `consumer`, `subscription`, …), or one word that ends in `key` after such a word
///   (`apikey`, `xapikey`, `accesskey`; not `monkey`, `hotkey`);
/// - is `code` or `codes` alone or after a word that makes a code secret, or one word that ends
///   in `code` after such a word (`auth_code`, `verification_code`, `backup_codes`, `mfacode`; not
///   `status_code`, `country_code`, `zipcode`).
///
/// Not recognised: personal data that is not a credential (`email`, card numbers) and strings
/// that hold a credential inside (`database_url`, `dsn`). Add such names to a
/// ``SensitiveHeaders`` (headers) or a `Redactor` (fields).
package enum SecretName {
    /// Whether the name names a secret.
    package static func isSecret(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { isSecret(bytes: $0) }
    }

    /// Whether the name, as UTF-8 bytes, names a secret.
    package static func isSecret(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = bytes.count
        guard count >= 2 else { return false }
        // Most names (Content-Type, Date, page) lack a letter of every stem a secret word has:
        // told apart in one pass, without folding or splitting.
        var letters: UInt32 = 0
        for byte in bytes {
            let letter = (byte | 0x20) &- UInt8(ascii: "a")
            if letter < 26 { letters |= 1 << UInt32(letter) }
        }
        guard stemMasks.contains(where: { $0 & letters == $0 }) else { return false }
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
                let text = UnsafeBufferPointer(rebasing: folded[..<length])
                // The strong parts count across separators too (`pass-word`, `client.secret`).
                if containedParts.contains(where: { contains(text[...], $0) }) { return true }
                func word(_ index: Int) -> Slice<UnsafeBufferPointer<UInt8>>? {
                    guard index >= 0, index < words else { return nil }
                    return text[bounds[2 * index]..<bounds[2 * index + 1]]
                }
                for index in 0..<words {
                    if let current = word(index),
                        isSecretWord(current, previous: word(index - 1), next: word(index + 1), alone: words == 1)
                    {
                        return true
                    }
                }
                return false
            }
        }
    }

    private typealias Word = Slice<UnsafeBufferPointer<UInt8>>

    private static func isSecretWord(_ word: Word, previous: Word?, next: Word?, alone: Bool) -> Bool {
        if hasSuffix(word, "sessid") || hasSuffix(word, "sessionid") || (hasSuffix(word, "sid") && word.count > 3) {
            return true
        }
        if hasSuffix(word, "token") {
            guard let next else { return true }
            if tokenFollowers.contains(where: { equals(next, $0) }) { return true }
        }
        if hasPrefix(word, "auth"), !hasPrefix(word, "author") || hasPrefix(word, "authoriz") || hasPrefix(word, "authoris") {
            return true
        }
        if exactWords.contains(where: { equals(word, $0) }) { return true }
        if equals(word, "pass") { return next == nil }
        if hasSuffix(word, "session") { return next == nil || next.map { equals($0, "id") || equals($0, "key") } == true }
        if equals(word, "key") || equals(word, "keys") {
            if alone { return true }
            guard let previous else { return false }
            if secretKeyQualifiers.contains(where: { equals(previous, $0) }) { return true }
            return next == nil && !publicKeyQualifiers.contains(where: { equals(previous, $0) })
        }
        if hasSuffix(word, "key"), secretKeyQualifiers.contains(where: { hasSuffix(word.dropLast(3), $0) }) { return true }
        if equals(word, "code") || equals(word, "codes") {
            if alone { return true }
            guard let previous else { return false }
            return secretCodeQualifiers.contains(where: { equals(previous, $0) })
        }
        let code = hasSuffix(word, "codes") ? word.dropLast() : word
        return hasSuffix(code, "code") && secretCodeQualifiers.contains(where: { hasSuffix(code.dropLast(4), $0) })
    }

    /// Parts that make any word that contains them a secret (`newpassword`, `oauthsignature`).
    private static let containedParts: [String] = [
        "passw", "passphrase", "passcode", "secret", "cookie", "signature", "credential", "csrf", "xsrf", "bearer", "jwt",
        "assertion", "authoriz", "authoris", "authenticat",
    ]

    /// Words that are secrets wherever they stand.
    private static let exactWords: [[UInt8]] = [
        "pwd", "pin", "otp", "totp", "hotp", "sid", "creds", "sig", "ssn", "cvv", "cvv2", "cvc", "cvc2", "salt",
    ].map { Array($0.utf8) }

    /// Words after `token` that keep it a secret (`token_secret`, `token_value`).
    private static let tokenFollowers: [[UInt8]] = ["secret", "value", "key"].map { Array($0.utf8) }

    /// Words before `key` that make it a secret wherever it stands (`api_key_id`, `apikey`).
    private static let secretKeyQualifiers: [[UInt8]] = [
        "api", "access", "private", "secret", "signing", "encryption", "master", "client", "consumer", "app",
        "application", "session", "auth", "license", "subscription", "ssh", "gpg", "pgp", "shared", "hmac", "functions",
        "function", "admin", "account", "developer", "service", "write", "read", "live", "test", "publishable",
    ].map { Array($0.utf8) }

    /// Words before a last `key` that make it public or an index, not a secret.
    private static let publicKeyQualifiers: [[UInt8]] = [
        "primary", "foreign", "sort", "partition", "public", "idempotency", "cache", "object", "routing", "dedup",
        "dedupe", "deduplication", "lookup", "group", "translation", "i18n", "shortcut", "hot", "row", "range",
        "hash", "composite", "unique", "socket", "websocket", "map", "dictionary", "foreign", "natural", "surrogate",
        "idempotent", "event", "message", "storage", "s3", "bucket", "entity", "item", "list", "react", "index",
    ].map { Array($0.utf8) }

    /// Words before `code` that make it a secret (`auth_code`, `verification_code`).
    private static let secretCodeQualifiers: [[UInt8]] = [
        "auth", "authorization", "authorisation", "verification", "verify", "otp", "mfa", "twofa", "2fa", "reset",
        "recovery", "security", "confirmation", "sms", "device", "pin", "access", "login", "backup", "oauth",
        "activation", "magic",
    ].map { Array($0.utf8) }

    /// One stem of every rule: a name whose letters hold none of these has no secret word.
    private static let stemMasks: [UInt32] = [
        "pass", "secret", "cookie", "sessid", "token", "auth", "pwd", "pin", "otp", "jwt", "bearer", "sid", "cred",
        "sig", "csrf", "xsrf", "ssn", "cvv", "cvc", "salt", "assertion", "session", "key", "code",
    ].map { word in
        var mask: UInt32 = 0
        for byte in word.utf8 { mask |= 1 << UInt32(byte - UInt8(ascii: "a")) }
        return mask
    }

    private static func equals(_ word: Word, _ other: [UInt8]) -> Bool { word.elementsEqual(other) }

    private static func equals(_ word: Word, _ other: String) -> Bool { word.elementsEqual(other.utf8) }

    private static func hasPrefix(_ word: Word, _ prefix: String) -> Bool {
        word.count >= prefix.utf8.count && word.prefix(prefix.utf8.count).elementsEqual(prefix.utf8)
    }

    private static func hasSuffix(_ word: Word, _ suffix: String) -> Bool {
        word.count >= suffix.utf8.count && word.suffix(suffix.utf8.count).elementsEqual(suffix.utf8)
    }

    private static func hasSuffix(_ word: Word, _ suffix: [UInt8]) -> Bool {
        word.count >= suffix.count && word.suffix(suffix.count).elementsEqual(suffix)
    }

    private static func contains(_ word: Word, _ part: String) -> Bool {
        let needle = part.utf8
        let size = needle.count
        guard word.count >= size else { return false }
        let first = needle.first ?? 0
        var start = word.startIndex
        while start + size <= word.endIndex {
            if word[start] == first, word[start..<start + size].elementsEqual(needle) { return true }
            start += 1
        }
        return false
    }
}
