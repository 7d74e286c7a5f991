public import Foundation

/// A request body that is read in pieces while it is sent, never held in memory whole: a file,
/// a list of parts (bytes and files, which is what multipart bodies are), or a one-shot
/// `AsyncSequence` of bytes.
///
/// ```swift
/// var request = HTTPRequest(method: .put, url: uploadURL)
/// request.bodyStream = try HTTPBodyStream.file(movieURL)          // read again on a retry
/// request.bodyStream = HTTPBodyStream(bytes, length: 1_000_000)  // one-shot: never retried
/// ```
///
/// Parts are read again from the start for every attempt, so a retry re-reads the file. A
/// sequence can be read once; a request whose one-shot body was read by a failed attempt is not
/// retried, and fails with ``NetworkError/notRetryable(after:reason:)`` saying so.
///
/// Two values are equal when they are the same body (copies of one value), not when their bytes
/// are.
public struct HTTPBodyStream: Sendable, Hashable, CustomStringConvertible {
    /// One piece of a body made of parts.
    public enum Part: Sendable, Hashable {
        /// Bytes in memory.
        case data(Data)
        /// A file's whole content, read when the body is sent.
        case file(URL)
    }

    /// The body's length in bytes, sent as `Content-Length`; `nil` when unknown (the transport
    /// then sends it in chunks).
    public var length: Int64? { source.length }

    /// Whether the body can be read more than once: `true` for parts and files, `false` for an
    /// `AsyncSequence`.
    public var isReplayable: Bool { source.isReplayable }

    let source: Source

    /// Where the bytes come from. A class, so equality is identity and a one-shot sequence's
    /// "already read" mark is shared by every copy of the request.
    final class Source: Sendable {
        enum Kind {
            case parts([Part], sizes: [Int64])
            case sequence(@Sendable (_ each: (Data) async throws -> Void) async throws -> Void)
        }
        let kind: Kind
        let length: Int64?
        /// For a sequence: set when it was handed to a reader.
        let read = Locked(false)

        init(_ kind: Kind, length: Int64?) {
            self.kind = kind
            self.length = length
        }

        var isReplayable: Bool {
            if case .parts = kind { return true }
            return false
        }
    }

    /// A body made of parts, sent one after another. Each file's size is read now, so the
    /// length is known.
    /// - Parameter parts: The parts, in order.
    /// - Throws: ``NetworkError/fileFailed(file:underlying:)`` when a file is missing or is not a
    ///   regular file.
    public init(parts: [Part]) throws(NetworkError) {
        var sizes: [Int64] = []
        sizes.reserveCapacity(parts.count)
        for part in parts {
            switch part {
            case .data(let data): sizes.append(Int64(data.count))
            case .file(let url): sizes.append(try Self.size(of: url))
            }
        }
        self.source = Source(.parts(parts, sizes: sizes), length: sizes.reduce(0, +))
    }

    /// A body that is a file's content.
    /// - Parameter url: A `file:` URL.
    /// - Returns: The body, whose length is the file's size now.
    /// - Throws: ``NetworkError/fileFailed(file:underlying:)`` when the file is missing or is not
    ///   a regular file.
    public static func file(_ url: URL) throws(NetworkError) -> HTTPBodyStream {
        try HTTPBodyStream(parts: [.file(url)])
    }

    /// A one-shot body: the chunks of `bytes`, read once, while the request is sent.
    /// - Parameters:
    ///   - bytes: The chunks. An error it throws fails the attempt.
    ///   - length: The total length, if known; a sequence that then yields more or fewer bytes
    ///     fails the attempt.
    public init<Bytes: AsyncSequence & Sendable>(_ bytes: Bytes, length: Int64? = nil) where Bytes.Element == Data {
        self.source = Source(
            .sequence { each in
                for try await chunk in bytes { try await each(chunk) }
            }, length: length)
    }

    /// Reads the body from its start, handing each chunk to `each` in order: the parts (files
    /// read `chunkSize` bytes at a time) or the sequence's own chunks. A transport calls it once
    /// per attempt.
    /// - Parameters:
    ///   - chunkSize: The most bytes read from a file at a time.
    ///   - each: Receives the chunks; what it throws ends the reading and is rethrown as it is
    ///     when it is a ``NetworkError``.
    /// - Throws: ``NetworkError/fileFailed(file:underlying:)`` for a file that cannot be read or
    ///   has changed size, ``NetworkError/notRetryable(after:reason:)``'s reason as
    ///   ``NetworkError/invalidRequest(_:)`` when a one-shot body is read a second time,
    ///   ``NetworkError/invalidRequest(_:)`` when a sequence's length differs from ``length``,
    ///   and ``NetworkError/transportFailed(_:)`` for an error the sequence threw.
    public func forEachChunk(
        chunkSize: Int = 64 * 1024, _ each: (Data) async throws -> Void
    ) async throws(NetworkError) {
        switch source.kind {
        case .parts(let parts, let sizes):
            for (part, size) in zip(parts, sizes) {
                switch part {
                case .data(let data):
                    if !data.isEmpty { try await Self.forward(data, to: each) }
                case .file(let url):
                    let reader = try FileChunkReader(url: url, expected: size)
                    defer { reader.close() }
                    while let chunk = try reader.next(max: chunkSize) { try await Self.forward(chunk, to: each) }
                }
            }
        case .sequence(let pump):
            let first = source.read.withLock { read -> Bool in
                defer { read = true }
                return !read
            }
            guard first else { throw .invalidRequest(Self.alreadyRead) }
            var total: Int64 = 0
            do {
                try await pump { chunk in
                    total += Int64(chunk.count)
                    if let length, total > length { throw LengthMismatch(expected: length) }
                    try await each(chunk)
                }
            } catch let error as NetworkError {
                throw error
            } catch let error as LengthMismatch {
                throw .invalidRequest(error.description)
            } catch {
                throw .transportFailed(error)
            }
            if let length, total != length { throw .invalidRequest(LengthMismatch(expected: length).description) }
        }
    }

    /// Reads the whole body into memory: for a transport that sends bodies as `Data`.
    /// - Parameter limit: The most bytes to read; a longer body fails with
    ///   ``NetworkError/invalidRequest(_:)``.
    /// - Returns: The bytes.
    /// - Throws: What ``forEachChunk(chunkSize:_:)`` throws.
    public func collect(limit: Int? = nil) async throws(NetworkError) -> Data {
        var data = Data()
        if let length, length <= Int64(limit ?? Int.max) { data.reserveCapacity(Int(length)) }
        try await forEachChunk { chunk in
            if let limit, data.count + chunk.count > limit {
                throw NetworkError.invalidRequest("the request body is longer than \(limit) bytes")
            }
            data.append(chunk)
        }
        return data
    }

    /// The file, when the body is exactly one file's content (a transport can upload it from
    /// disk as it is).
    package var singleFile: URL? {
        if case .parts(let parts, _) = source.kind, parts.count == 1, case .file(let url) = parts[0] { return url }
        return nil
    }

    /// The whole body, when every part is already in memory and together they are at most
    /// `limit` bytes (a transport can send it as it is, without a temporary copy on disk).
    package func inMemory(upTo limit: Int) -> Data? {
        guard case .parts(let parts, let sizes) = source.kind, sizes.reduce(0, +) <= Int64(limit) else { return nil }
        var whole = Data()
        for part in parts {
            guard case .data(let data) = part else { return nil }
            whole.append(data)
        }
        return whole
    }

    /// Whether this is a one-shot body that a reader has already started reading.
    package var wasReadOnce: Bool { !isReplayable && source.read.withLock { $0 } }

    /// Why a one-shot body was not sent again.
    package static let alreadyRead =
        "the request body is a one-shot stream that an earlier attempt already read; give a file or parts to have it sent again"

    /// `N bytes, replayable` or `one-shot stream`; never the bytes.
    public var description: String {
        let size = length.map { "\($0) bytes" } ?? "unknown length"
        return isReplayable ? "body stream (\(size))" : "one-shot body stream (\(size))"
    }

    /// Same body: copies of one value.
    public static func == (lhs: HTTPBodyStream, rhs: HTTPBodyStream) -> Bool { lhs.source === rhs.source }

    /// Hashes the body's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(source)) }

    private static func forward(_ chunk: Data, to each: (Data) async throws -> Void) async throws(NetworkError) {
        do {
            try await each(chunk)
        } catch let error as NetworkError {
            throw error
        } catch {
            throw .transportFailed(error)
        }
    }

    /// The size of a regular file.
    static func size(of url: URL) throws(NetworkError) -> Int64 {
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
            guard (attributes[.type] as? FileAttributeType) == .typeRegular else {
                throw FileProblem("it is not a regular file")
            }
            return (attributes[.size] as? NSNumber)?.int64Value ?? 0
        } catch let error as NetworkError {
            throw error
        } catch {
            throw .fileFailed(file: url.lastPathComponent, underlying: error)
        }
    }
}

/// A sequence that yielded more or fewer bytes than its declared length.
struct LengthMismatch: Error, SafelyDescribable {
    let expected: Int64
    var description: String { "the request body stream's length differs from the declared \(expected) bytes" }
}

/// A plain explanation of a file problem, safe to print.
package struct FileProblem: Error, SafelyDescribable {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Reads a file in chunks and checks that it has the size it had when the body was made.
final class FileChunkReader {
    private let handle: FileHandle
    private let url: URL
    private var left: Int64

    init(url: URL, expected: Int64) throws(NetworkError) {
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw .fileFailed(file: url.lastPathComponent, underlying: error)
        }
        self.url = url
        self.left = expected
    }

    /// The next chunk, or `nil` at the expected end.
    func next(max: Int) throws(NetworkError) -> Data? {
        guard left > 0 else { return nil }
        let want = Int(min(Int64(max), left))
        let chunk: Data
        do {
            chunk = try handle.read(upToCount: want) ?? Data()
        } catch {
            throw .fileFailed(file: url.lastPathComponent, underlying: error)
        }
        guard !chunk.isEmpty else {
            throw .fileFailed(file: url.lastPathComponent, underlying: FileProblem("the file became shorter while it was sent"))
        }
        left -= Int64(chunk.count)
        return chunk
    }

    func close() { try? handle.close() }
}
