public import ConveyorPipeline
public import Foundation

extension NetworkClient {
    /// Downloads a response body to a file, writing it as it arrives, through every behavior.
    ///
    /// ```swift
    /// let video = Request<Data>(path: "/videos/7/original").onProgress { progress in
    ///     print(progress.fractionCompleted ?? 0)
    /// }
    /// let saved = try await client.download(video, to: moviesFolder.appendingPathComponent("7.mp4"))
    /// print(saved.value.path, saved.attempts)
    /// ```
    ///
    /// - The body goes to a hidden partial file next to `destination` and is moved into place
    ///   in one `rename` when the request has succeeded: the destination never holds part of a
    ///   body, and a file already there is replaced only then.
    /// - A retried attempt resumes with `Range` and `If-Range` where the server supports ranges
    ///   (`Accept-Ranges: bytes` and an `ETag` or `Last-Modified`); otherwise it starts over. If
    ///   the download fails for good, a resumable partial file is kept, and the next download of
    ///   the same URL to the same destination resumes it. A partial file is removed after a file
    ///   error, or when nothing can be resumed.
    /// - Behaviors run as for ``send(_:)``; `afterSuccess` runs when the whole body is on disk.
    ///   An error response (a status outside the acceptable ones) is read into memory, as for
    ///   ``send(_:)``, and nothing is written.
    /// - The client's ``Configuration/maxResponseSize`` does not apply to the body written to
    ///   disk (it is not in memory); `maxSize` does. A transport that does not stream (not a
    ///   ``StreamingHTTPTransport``) holds the body in memory first, under the client's limit.
    /// - A request `timeout` bounds each whole attempt, body included: for a large file, set a
    ///   long one, or none (the transport's idle timeout then applies).
    ///
    /// - Parameters:
    ///   - request: The request; its `Output` is not used.
    ///   - destination: A `file:` URL in an existing directory.
    ///   - maxSize: The most bytes to write; more fails with
    ///     ``NetworkError/responseTooLarge(limit:)``. `nil` (the default) for no limit.
    /// - Returns: `destination`, the final response (with an empty body) and the attempt count.
    /// - Throws: ``NetworkError``: ``NetworkError/fileFailed(file:underlying:)`` when the
    ///   destination cannot be written (no directory, no permission, disk full).
    public func download<Output>(
        _ request: Request<Output>, to destination: URL, maxSize: Int64? = nil
    ) async throws(NetworkError) -> Response<URL> {
        try await download(request, to: destination, maxSize: maxSize, writeBytes: nil)
    }

    /// ``download(_:to:maxSize:)`` with the file writes replaced (tests simulate a full disk).
    package func download<Output>(
        _ request: Request<Output>, to destination: URL, maxSize: Int64?,
        writeBytes: (@Sendable (Int32, UnsafeRawBufferPointer) -> Int)?
    ) async throws(NetworkError) -> Response<URL> {
        let writer = DownloadWriter(
            destination: destination, acceptable: configuration.acceptableStatusCodes, maxSize: maxSize,
            writeBytes: writeBytes)
        let (response, attempts): (HTTPResponse, Int)
        do throws(NetworkError) {
            (response, attempts) = try await performTransfer(
                request.adding(ResumeDownloadBehavior(writer: writer)), taker: writer
            ) { request throws(NetworkError) in try writer.open(for: request) }
            try writer.finish(with: response)
        } catch {
            writer.abandon(after: error)
            throw error
        }
        return Response(value: destination, response: response, attempts: attempts)
    }

    /// Sends a request and returns as soon as the response's head has arrived, with its body as
    /// an `AsyncSequence` of chunks you read while it arrives (in bounded memory: the transfer
    /// waits while you don't read).
    ///
    /// ```swift
    /// let events = try await client.stream(Request<Data>(path: "/events.ndjson"))
    /// for try await chunk in events.body { lines.feed(chunk) }
    /// ```
    ///
    /// - Attempts that fail before the head arrives are retried as for ``send(_:)``. Once this
    ///   returns, the request is never sent again: a later failure ends the body's sequence with
    ///   its error (``NetworkError/notRetryable(after:reason:)`` when a behavior wanted a retry).
    /// - Behaviors see the outcome when the body ends, fails, or is abandoned (you stop reading
    ///   or drop the stream: ``NetworkError/cancelled``), so their hooks stay balanced.
    /// - An error status throws here, with the body read into memory, as for ``send(_:)``.
    /// - A request `timeout` bounds each whole attempt, body included.
    ///
    /// - Parameter request: The request; its `Output` is not used.
    /// - Returns: The head and the body's chunks.
    /// - Throws: ``NetworkError`` when no acceptable response head arrived.
    public func stream<Output>(_ request: Request<Output>) async throws(NetworkError) -> StreamedResponse {
        let channel = ChunkChannel(capacity: 1 << 20)
        let taker = StreamTaker(channel: channel, acceptable: configuration.acceptableStatusCodes)
        let transfer = Task {
            do throws(NetworkError) {
                let (response, _) = try await performTransfer(request, taker: taker) { _ throws(NetworkError) in }
                if !taker.tookHead {
                    // A behavior answered, or the body came whole: hand it over as one chunk.
                    var head = response
                    head.body = Data()
                    if taker.settle(.success(head)), !response.body.isEmpty { try await channel.send(response.body) }
                }
                channel.finish(nil)
            } catch {
                if !taker.settle(.failure(error)) { channel.finish(error) }
            }
        }
        channel.whenClosed { transfer.cancel() }
        let head = await withTaskCancellationHandler {
            await taker.waitForHead()
        } onCancel: {
            transfer.cancel()
        }
        switch head {
        case .success(let response): return StreamedResponse(response: response, body: ResponseBodyStream(channel))
        case .failure(let error):
            channel.close()
            throw error
        }
    }

    /// Runs `request` with its body going to `taker`; `prepare` sees the built request first.
    /// - Returns: The final response (its body empty when `taker` took it) and the attempt count.
    func performTransfer<Output>(
        _ request: Request<Output>, taker: any ResponseBodyTaker,
        prepare: (HTTPRequest) throws(NetworkError) -> Void
    ) async throws(NetworkError) -> (HTTPResponse, Int) {
        let absolute = URLBuilder.isAbsolute(request.path)
        // An event stream has no total timeout: it lasts while bytes keep coming (the engine
        // ignores the bound for a transfer that times out when idle).
        let httpRequest = try makeHTTPRequest(request, absolute: absolute, bounded: true)
        try prepare(httpRequest)
        let plan =
            request.exclusions.isEmpty && request.behaviors.isEmpty
            ? behaviors.plan : behaviors.plan(excluding: request.exclusions, adding: request.behaviors)
        let targetsBase = !absolute || Origin(httpRequest.url) == baseScope.origin
        let context = RequestContext(
            request: httpRequest, scope: baseScope, targetsBaseOrigin: targetsBase,
            transfer: Self.transfer(taker: taker, request: request, plan: plan), values: request.contextValues)
        return try await runner.run(httpRequest, plan: plan, context: context) { response in
            (response, context.attempt)
        }
    }
}
