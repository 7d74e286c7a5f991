/// What an ``HTTPRequest`` carries besides its message, in one reference: its transfer and its
/// client's sensitive header names. Immutable: a client makes one for all its requests that
/// have no transfer; a request with a transfer gets its own.
package final class RequestExtras: Sendable {
    package let transfer: TransferHandler?
    package let sensitiveHeaders: SensitiveHeaders

    package init(transfer: TransferHandler?, sensitiveHeaders: SensitiveHeaders) {
        self.transfer = transfer
        self.sensitiveHeaders = sensitiveHeaders
    }

    /// The extras for these values, or `nil` when there is nothing to carry.
    package static func make(transfer: TransferHandler?, sensitiveHeaders: SensitiveHeaders) -> RequestExtras? {
        transfer == nil && sensitiveHeaders.added.isEmpty
            ? nil : RequestExtras(transfer: transfer, sensitiveHeaders: sensitiveHeaders)
    }
}
