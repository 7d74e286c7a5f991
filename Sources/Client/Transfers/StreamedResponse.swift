public import ConveyorPipeline
public import Foundation

/// A response whose body arrives while you read it: what ``NetworkClient/stream(_:)`` returns.
///
/// ```swift
/// let download = try await client.stream(Request<Data>(path: "/export.ndjson"))
/// print(download.response.status, download.response.headers["Content-Type"] ?? "")
/// for try await chunk in download.body {
///     parser.feed(chunk)
/// }
/// ```
public struct StreamedResponse: Sendable {
    /// The status and headers; its ``HTTPResponse/body`` is empty (the body is ``body``).
    public let response: HTTPResponse
    /// The body's chunks, in order.
    public let body: ResponseBodyStream
}

/// A response body as an `AsyncSequence` of chunks, read once, with backpressure: while you
/// don't ask for the next chunk, the transfer waits (at most about 1 MiB is queued).
///
/// - The sequence ends when the body is complete and the request's behaviors have seen the
///   outcome; it throws the ``NetworkError`` that ended the transfer otherwise (for example
///   ``NetworkError/connectionFailed(_:)`` when the server closes mid-body).
/// - Stop reading early (leave the loop, drop its iterator, or drop the stream) and the transfer is
///   cancelled: the behaviors see ``NetworkError/cancelled``, whoever still holds the response
///   value. Cancelling the reading task does the same.
/// - Iterate it once: chunks are handed out, not kept, so two iterators would each see part.
public struct ResponseBodyStream: AsyncSequence, Sendable {
    /// Each element is the next chunk of the body.
    public typealias Element = Data

    let owner: ChannelOwner

    init(_ channel: ChunkChannel) { owner = ChannelOwner(channel) }

    /// The iterator: each ``next()`` waits for the next chunk.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let owner: ChannelOwner
        /// Ends the transfer when the last copy of this iterator goes (the loop was left).
        let lifetime: IterationLifetime

        /// The next chunk, or `nil` at the end of the body.
        /// - Throws: The ``NetworkError`` that ended the transfer.
        public mutating func next() async throws -> Data? {
            try await owner.channel.next()
        }
    }

    /// Creates the iterator.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(owner: owner, lifetime: IterationLifetime(owner.channel))
    }

    /// Reads the rest of the body into memory.
    /// - Parameter limit: The most bytes to keep; a longer body fails with
    ///   ``NetworkError/responseTooLarge(limit:)`` and stops the transfer.
    /// - Returns: The bytes.
    /// - Throws: The ``NetworkError`` that ended the transfer.
    public func collect(limit: Int? = nil) async throws(NetworkError) -> Data {
        var data = Data()
        while let chunk = try await owner.channel.next() {
            if let limit, data.count + chunk.count > limit {
                owner.channel.close()
                throw .responseTooLarge(limit: limit)
            }
            data.append(chunk)
        }
        return data
    }
}

/// Closes the channel when the last copy of the stream and its iterators are gone, so a body
/// nobody reads any more stops the transfer.
/// Held by an iterator (and its copies): when the last one goes, the loop was left, so the
/// transfer ends, even while the app holds the stream or the response.
final class IterationLifetime: Sendable {
    let channel: ChunkChannel
    init(_ channel: ChunkChannel) { self.channel = channel }
    deinit { channel.close() }
}

final class ChannelOwner: Sendable {
    let channel: ChunkChannel
    init(_ channel: ChunkChannel) { self.channel = channel }
    deinit { channel.close() }
}

/// Takes a streamed response's body for ``NetworkClient/stream(_:)``: hands the head to the
/// waiting caller and the chunks to the channel.
final class StreamTaker: ResponseBodyTaker {
    let channel: ChunkChannel
    private let acceptable: Set<Int>
    private let head = Locked<HeadState>(.waiting(nil))

    enum HeadState {
        case waiting(CheckedContinuation<Result<HTTPResponse, NetworkError>, Never>?)
        case arrived(Result<HTTPResponse, NetworkError>)
        case delivered
    }

    init(channel: ChunkChannel, acceptable: Set<Int>) {
        self.channel = channel
        self.acceptable = acceptable
    }

    func takesBody(of head: HTTPResponse, attempt: Int) throws(NetworkError) -> Bool {
        guard acceptable.contains(head.status) else { return false }
        var response = head
        response.body = Data()
        guard settle(.success(response)) else { throw .cancelled }  // the caller already left
        return true
    }

    func receive(_ chunk: Data) async throws(NetworkError) {
        try await channel.send(chunk)
    }

    func retryForbiddenReason(for request: HTTPRequest, context: RequestContext) -> String? {
        head.withLock { state in
            switch state {
            case .waiting: nil
            case .arrived, .delivered: "the response's head had already reached the caller of stream(_:)"
            }
        }
    }

    var resumedBytes: Int64 { 0 }

    /// Whether the head went to the caller.
    var tookHead: Bool {
        head.withLock { state in
            if case .waiting = state { return false }
            return true
        }
    }

    /// Settles the head: the response, or the failure that came first. Returns `false` when it
    /// was settled already.
    @discardableResult
    func settle(_ result: Result<HTTPResponse, NetworkError>) -> Bool {
        let (settled, waiter) = head.withLock { state -> (Bool, CheckedContinuation<Result<HTTPResponse, NetworkError>, Never>?) in
            guard case .waiting(let waiter) = state else { return (false, nil) }
            if let waiter {
                state = .delivered
                return (true, waiter)
            }
            state = .arrived(result)
            return (true, nil)
        }
        waiter?.resume(returning: result)
        return settled
    }

    /// Waits for the head (or the failure that came first).
    func waitForHead() async -> Result<HTTPResponse, NetworkError> {
        await withCheckedContinuation { continuation in
            let ready = head.withLock { state -> Result<HTTPResponse, NetworkError>? in
                switch state {
                case .waiting:
                    state = .waiting(continuation)
                    return nil
                case .arrived(let result):
                    state = .delivered
                    return result
                case .delivered:
                    return .failure(.cancelled)
                }
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
