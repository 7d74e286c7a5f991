/// What an ``HTTPRequest`` carries besides its message, in one reference: its client's sensitive
/// header names. Immutable: a client makes one for all its requests.
package final class RequestExtras: Sendable {
    package let sensitiveHeaders: SensitiveHeaders

    package init(sensitiveHeaders: SensitiveHeaders) {
        self.sensitiveHeaders = sensitiveHeaders
    }

    /// The extras for these names, or `nil` when there is nothing to carry.
    package static func make(sensitiveHeaders: SensitiveHeaders) -> RequestExtras? {
        sensitiveHeaders.added.isEmpty ? nil : RequestExtras(sensitiveHeaders: sensitiveHeaders)
    }
}
