/// What an ``HTTPRequest`` carries besides its message, in one reference: its client's sensitive
/// header names, and the deadline of the whole request when it has a total timeout. Immutable: a
/// client makes one for all its requests, and one per request that has a total timeout.
package final class RequestExtras: Sendable {
    package let sensitiveHeaders: SensitiveHeaders
    /// When the whole request must have ended (its total timeout, from when it started): every
    /// attempt runs within it, and no retry starts that could not before it. `nil`: none.
    package let totalDeadline: Deadline?

    package init(sensitiveHeaders: SensitiveHeaders, totalDeadline: Deadline? = nil) {
        self.sensitiveHeaders = sensitiveHeaders
        self.totalDeadline = totalDeadline
    }

    /// The extras for these names, or `nil` when there is nothing to carry.
    package static func make(sensitiveHeaders: SensitiveHeaders) -> RequestExtras? {
        sensitiveHeaders.added.isEmpty ? nil : RequestExtras(sensitiveHeaders: sensitiveHeaders)
    }
}
