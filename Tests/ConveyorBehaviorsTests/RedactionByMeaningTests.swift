import ConveyorBehaviors
import ConveyorPipeline
import ConveyorTestSupport
import Foundation
import Testing

/// One secret rule by meaning (contract rule 12): every name of a corpus of real-world secret
/// names, in every spelling an API uses, is hidden in headers, JSON at any depth, forms, queries,
/// URL fragments and nested keys; a corpus of ordinary names is shown, and the few ordinary names
/// the rule hides are pinned, so the false-positive rate stated in the Reliability guide is the
/// one measured here.
@Suite struct RedactionByMeaningTests {
    /// Secret names: the fifteen a reviewer found logged in clear (first), then names from public
    /// API docs (OAuth 2 and 1.0a, AWS, Azure, Google, GitLab, Shopify, Hasura, Vault, Stripe) and
    /// frameworks' session and CSRF names and default log filters (Rails, Django, Laravel, PHP,
    /// Java servlets, Express).
    static let secretNames = [
        "api_token", "apiToken", "private_token", "oauth_token", "oauth_token_secret", "bearer_token", "client_token",
        "token_secret", "secret_key", "aws_secret_access_key", "access_key", "current_password", "new_password",
        "password_confirmation", "passcode",
        "access_token", "refresh_token", "id_token", "auth_token", "session_token", "authenticity_token", "csrf_token",
        "_csrf", "csrfmiddlewaretoken", "xsrf_token", "XSRF-TOKEN", "api_key", "apikey", "x_api_key", "client_secret",
        "client_assertion", "password", "passwd", "pwd", "passphrase", "secret", "app_secret", "consumer_key",
        "consumer_secret", "oauth_signature", "signature", "sig", "X-Amz-Signature", "X-Amz-Security-Token",
        "aws_session_token", "private_key", "signing_key", "encryption_key", "master_key", "license_key",
        "subscription_key", "Ocp-Apim-Subscription-Key", "X-Goog-Api-Key", "PRIVATE-TOKEN", "X-Vault-Token",
        "X-Shopify-Access-Token", "x-hasura-admin-secret", "webhook_secret", "otp", "totp", "mfa_code",
        "verification_code", "auth_code", "code", "pin", "ssn", "cvv", "cvc", "salt", "jwt", "bearer", "session_id",
        "sessionid", "PHPSESSID", "JSESSIONID", "connect.sid", "laravel_session", "remember_token",
        "reset_password_token", "encrypted_password", "jwt_secret", "x-functions-key", "authorization",
        "proxy_authorization", "cookie", "set_cookie", "credentials", "recovery_code", "backup_codes", "security_code",
        "device_code", "key", "auth", "secret_access_key", "X-CSRF-Token", "X-Auth-Token", "X-Session",
        "one_time_password", "assertion",
    ]

    /// Keys nested the way forms and Rack/PHP queries nest them.
    static let nestedSecretNames = ["user[password]", "api[key]", "auth[token]", "account[api_token]", "user[new_password]"]

    /// Ordinary names: field names of public APIs (GitHub, OpenAI, Stripe, JSON:API) and common
    /// headers, with look-alikes of secret words.
    static let ordinaryNames = [
        "id", "title", "page", "keyboard", "monkey", "author", "tokenizer_version", "token_type", "max_tokens",
        "prompt_tokens", "completion_tokens", "total_tokens", "expires_in", "scope", "state", "name", "email",
        "user_id", "created_at", "updated_at", "status", "status_code", "country_code", "zip_code", "postal_code",
        "error_code", "language_code", "currency_code", "description", "content", "message", "model", "temperature",
        "primary_key", "sort_key", "partition_key", "public_key", "idempotency_key", "cache_key", "hotkey", "author_id",
        "authority", "session_expires_at", "token_count", "type", "count", "limit", "offset", "cursor", "next", "url",
        "href", "path", "query", "locale", "timezone", "version", "kind", "first_name", "last_name", "phone",
        "address", "city", "country", "items", "data", "results", "total", "per_page", "sort", "order", "filter",
        "fields", "include", "expand", "color", "size", "width", "height", "price", "amount", "quantity", "sku",
        "category", "tags", "label", "slug", "avatar_url", "bio", "company", "location", "followers", "private",
        "keywords", "passenger_count", "spinner", "pinned", "shipping", "design", "consider", "class_name",
        "signal_strength", "subscription_id", "zipcode", "authored_at", "cookie_consent", "authentication_method",
        "Content-Type", "Content-Length", "Accept", "Accept-Encoding", "User-Agent", "Host", "Date", "ETag",
        "Cache-Control", "Location", "Link", "X-Request-Id", "Retry-After", "Vary", "Last-Modified", "If-None-Match",
        "Transfer-Encoding", "Connection", "Content-Encoding", "Idempotency-Key", "Origin", "Referer", "Server",
        "Expires", "Range", "Content-Range", "traceparent", "X-Forwarded-For", "X-RateLimit-Remaining",
        "Sec-WebSocket-Key", "Public-Key-Pins", "Content-Disposition", "Access-Control-Allow-Credentials",
    ]

    /// The ordinary names the rule hides in some spelling (its false positives): both only when
    /// run together (`cookieconsent`, `accesscontrolallowcredentials`), where the words that make
    /// them metadata or a flag cannot be told apart. A new one fails the test below. (The rates the
    /// guide states are measured on real spellings by `SecretNameCorpusTests`.)
    static let knownFalsePositives: Set<String> = ["cookie_consent", "Access-Control-Allow-Credentials"]

    /// A name in the spellings APIs use: as given, snake, kebab, dotted, upper snake, capitalized
    /// kebab, camel, Pascal and run together.
    static func spellings(of name: String) -> [String] {
        guard !name.contains("[") else { return [name] }
        let words = SecretWords.split(name)
        guard !words.isEmpty else { return [name] }
        let capitalized = words.map { $0.prefix(1).uppercased() + $0.dropFirst() }
        return [
            name, words.joined(separator: "_"), words.joined(separator: "-"), words.joined(separator: "."),
            words.joined(separator: "_").uppercased(), capitalized.joined(separator: "-"),
            words[0] + capitalized.dropFirst().joined(), capitalized.joined(), words.joined(),
        ]
    }

    @Test func theCorporaAreAsLargeAsTheDocsSay() {
        #expect(Self.secretNames.count >= 65)
        #expect(Set(Self.secretNames).count == Self.secretNames.count)
        #expect(Self.ordinaryNames.count >= 140)
    }

    @Test func everySecretNameInEverySpellingIsHiddenEverywhere() throws {
        let redactor = Redactor()
        var random = SplitMix64(state: 6265)
        var checked = 0
        for name in Self.secretNames + Self.nestedSecretNames {
            for spelling in Self.spellings(of: name) {
                #expect(SensitiveHeaders.standard.contains(spelling), "header \(spelling)")
                #expect(redactor.hides(header: spelling), "header \(spelling)")
                let secret = "s3cr3t\(UInt32.random(in: 0...UInt32.max, using: &random))"
                let depth = Int.random(in: 0...3, using: &random)
                var json = "{\"\(spelling)\":\"\(secret)\"}"
                for level in 0..<depth { json = level % 2 == 0 ? "{\"data\":[\(json)]}" : "{\"user\":\(json)}" }
                let encodedName = spelling.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? spelling
                let renderings = [
                    redactor.preview(Data(json.utf8), contentType: "application/json", limit: 4096),
                    redactor.preview(
                        Data("a=1&\(encodedName)=\(secret)".utf8), contentType: "application/x-www-form-urlencoded",
                        limit: 4096),
                    redactor.redact(try #require(URL(string: "https://api.example.com/p?\(encodedName)=\(secret)&page=2"))),
                    redactor.redact(try #require(URL(string: "app:/cb#\(encodedName)=\(secret)&state=x"))),
                    HTTPHeaders([.init(name: spelling, value: secret)]).description,
                ]
                for rendering in renderings {
                    #expect(!rendering.contains(secret), "\(spelling) leaked in \(rendering)")
                    checked += 1
                }
            }
        }
        #expect(checked >= (Self.secretNames.count + Self.nestedSecretNames.count) * 5)
    }

    @Test func ordinaryNamesAreShownAndTheFalsePositiveRateIsTheStatedOne() {
        var hidden: Set<String> = []
        for name in Self.ordinaryNames {
            let spellingsHidden = Self.spellings(of: name).filter { SecretName.isSecret($0) }
            if !spellingsHidden.isEmpty { hidden.insert(name) }
            if !Self.knownFalsePositives.contains(name) {
                #expect(spellingsHidden.isEmpty, "\(name) hidden as \(spellingsHidden)")
                let shown = Redactor().preview(
                    Data("{\"\(name)\":\"plain-value\"}".utf8), contentType: "application/json", limit: 4096)
                #expect(shown.contains("plain-value"), "\(name)")
            }
        }
        #expect(hidden == Self.knownFalsePositives)
        #expect(Self.ordinaryNames.count == 140)
    }

    @Test func configurationAddsToTheRule() {
        let added = Redactor(headers: ["X-Tenant"], fields: ["email"])
        #expect(added.hides(header: "x_tenant"))
        #expect(added.hides(header: "X-API-Key"))
        let body = Data(#"{"email":"ann@example.com","accessToken":"tok-1","name":"ann"}"#.utf8)
        let text = added.preview(body, contentType: "application/json", limit: 4096)
        #expect(!text.contains("ann@example.com") && !text.contains("tok-1") && text.contains("ann"))
        let plain = Redactor().preview(body, contentType: "application/json", limit: 4096)
        #expect(plain.contains("ann@example.com") && !plain.contains("tok-1"))
    }

    /// `SensitiveHeaders.contains` looks up only the added names itself: every built-in one must
    /// be a credential by meaning, in every spelling.
    @Test func everyBuiltInNameIsACredentialByMeaning() {
        for name in SensitiveHeaders.builtIn {
            for spelling in [name, name.lowercased(), name.uppercased(), name.replacingOccurrences(of: "-", with: "_")] {
                #expect(SensitiveHeaders.isCredentialByMeaning(spelling), "\(spelling)")
                #expect(SensitiveHeaders.standard.contains(spelling), "\(spelling)")
            }
        }
        let added = SensitiveHeaders.standard.adding(["X-Tenant"])
        #expect(added.contains("x-tenant") && !SensitiveHeaders.standard.contains("X-Tenant"))
    }

    /// The rule's words that make a name a flag (Reliability guide, step 1).
    static let flagWords: Set<String> = [
        "is", "has", "have", "allow", "allows", "allowed", "accept", "enable", "enables", "enabled", "disable", "disabled",
        "require", "requires", "required", "supports", "supported", "use", "with", "include", "includes", "needs",
        "should", "can", "show", "hide", "expose", "optional",
    ]

    /// The letter pre-check never hides a word: generated names around a secret word are judged
    /// the same with and without the pre-check's short cut (a reference that splits with
    /// Foundation and applies the same rule word by word).
    @Test func generatedNamesAroundSecretWordsAreFound() {
        var generator = SplitMix64(state: 27)
        let words = ["password", "secret", "cookie", "signature", "credential", "csrf", "apiKey", "ACCESS_TOKEN", "Auth"]
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz")
        for _ in 0..<3000 {
            var head = ""
            for _ in 0..<Int(generator.next() % 8) { head.append(alphabet[Int(generator.next() % 26)]) }
            // A word that makes a name a flag (`is_cookie`, `has_password`) is the one prefix that
            // changes the verdict, by design.
            if Self.flagWords.contains(head) { continue }
            let word = words[Int(generator.next() % UInt64(words.count))]
            let separator = ["_", "-", ".", "[", " "][Int(generator.next() % 5)]
            let name = head.isEmpty ? word : head + separator + word
            #expect(SecretName.isSecret(name), "\(name)")
        }
    }
}

/// Splits a corpus name into its words the way an API would spell it (for the spellings above):
/// at separators and camel-case humps.
enum SecretWords {
    static func split(_ name: String) -> [String] {
        var words: [String] = []
        var current = ""
        let characters = Array(name)
        for (index, character) in characters.enumerated() {
            guard character.isLetter || character.isNumber else {
                if !current.isEmpty { words.append(current.lowercased()); current = "" }
                continue
            }
            if character.isUppercase, !current.isEmpty, let last = current.last,
                last.isLowercase || last.isNumber
                    || (last.isUppercase && index + 1 < characters.count && characters[index + 1].isLowercase)
            {
                words.append(current.lowercased())
                current = ""
            }
            current.append(character)
        }
        if !current.isEmpty { words.append(current.lowercased()) }
        return words
    }
}
