import ConveyorPipeline
import Foundation

/// What a file body read as a stream found short: set on the thread that reads the body, read
/// by the transport once the task has failed.
final class UploadShortfall: Sendable {
    private let found = Locked<String?>(nil)

    /// Why the body could not be sent whole, if it could not.
    var problem: String? { found.withLock { $0 } }

    func record(_ problem: String) { found.withLock { $0 = $0 ?? problem } }
}

/// A file a URLSession task reads as its body, on Linux.
struct UploadBodyFile: Sendable {
    /// The file.
    let url: URL
    /// The `Content-Length` the request carries.
    let length: Int64
    /// Where a stream of it reports a file that ended early.
    let shortfall = UploadShortfall()
}

#if canImport(FoundationNetworking)
    /// A file read as a request body of exactly `length` bytes (the request's `Content-Length`).
    ///
    /// FoundationNetworking reads it on the thread that drives the session's transfers. A file
    /// that ends before `length` bytes (it shrank after the body was made) fails the read, so
    /// FoundationNetworking aborts the transfer at once instead of leaving the server waiting
    /// for bytes that never come; the transport then reports `.fileFailed`. A file that grew is
    /// read only up to `length`.
    final class FileBodyStream: InputStream {
        private let file: InputStream
        private let body: UploadBodyFile
        /// Bytes handed out so far; touched only by the one thread that reads the body.
        private var delivered: Int64 = 0
        private var failed = false

        init?(_ body: UploadBodyFile) {
            guard let file = InputStream(url: body.url) else { return nil }
            self.file = file
            self.body = body
            super.init(data: Data())
        }

        override func open() { file.open() }
        override func close() { file.close() }
        override var streamStatus: Stream.Status { failed ? .error : file.streamStatus }
        override var streamError: (any Error)? { file.streamError }
        override var hasBytesAvailable: Bool { !failed && delivered < body.length }

        override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength length: Int) -> Int {
            let wanted = Int(min(Int64(length), body.length - delivered))
            guard wanted > 0 else { return 0 }
            let count = file.read(buffer, maxLength: wanted)
            guard count > 0 else {
                failed = true
                body.shortfall.record(
                    count == 0
                        ? "the file ended after \(delivered) of the \(body.length) bytes the request announced"
                        : "the file could not be read after \(delivered) bytes")
                return -1
            }
            delivered += Int64(count)
            return count
        }

        override func getBuffer(
            _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>
        ) -> Bool { false }
    }
#endif
