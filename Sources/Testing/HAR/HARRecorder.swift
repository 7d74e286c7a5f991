public import ConveyorBehaviors
public import ConveyorPipeline
public import Foundation

/// Collects exchanges as a HAR 1.2 archive (what browsers' devtools, Charles and Proxyman open),
/// redacted by the rules of Conveyor's logs, and writes it to a file after every exchange.
///
/// Record through a ``HARRecordingTransport`` (every exchange the transport makes: each attempt,
/// as sent) or a ``HARRecordingBehavior`` (each attempt where the behavior sits in the chain),
/// and replay the file with ``HARReplayTransport``:
///
/// ```swift
/// let recorder = HARRecorder(file: URL(fileURLWithPath: "/tmp/session.har"))
/// let client = NetworkClient(
///     baseURL: URL(string: "https://api.example.com")!,
///     transport: HARRecordingTransport(wrapping: URLSessionTransport.shared, recorder: recorder))
/// ```
///
/// - **Redacted like logs.** Every header a ``Conveyor/Redactor`` hides (credentials by name and by
///   meaning, the client's ``Conveyor/SensitiveHeaders``) is `***`; so are hidden query items and URL
///   user info, and the values of hidden form fields and JSON keys in bodies. Every credential
///   value the request carried is scrubbed from everything else recorded (the response's body and
///   headers included), in the encodings a server may echo it in.
/// - **Bounded, and nothing added.** A body is read up to ``maxBodySize`` bytes: a longer one is
///   cut there, with a HAR `comment` saying so, and holds exactly the bytes read; bytes that are
///   not text (not UTF-8, or with control bytes) are written as base64, scrubbed of every secret
///   the request carried. Headers that carry a URL (`Location`, `Link`…) have its secret items
///   masked. A body streamed to a file or to the caller
///   (``Conveyor/NetworkClient/download(_:to:maxSize:)``, ``Conveyor/NetworkClient/stream(_:)``) is not recorded.
/// - **Timings** come from the transport where it measures them (``Conveyor/HTTPResponse/timings``);
///   otherwise the whole exchange counts as `wait`.
public final class HARRecorder: Sendable {
    /// Where the archive is written after every exchange, if anywhere.
    public let file: URL?
    /// The redaction rules (the ones your `LoggingBehavior` uses, for the same result).
    public let redactor: Redactor
    /// The most bytes of a body that are recorded.
    public let maxBodySize: Int

    private let state = Locked(State())
    /// What follows the last entry in this recorder's archives (``archiveEnd(bodyLimit:)``).
    private let archiveEnd: Data?
    /// The files a recorder of this process has written, held while any recorder writes one.
    /// Process-wide because a file is: two recorders of one file (an auth client's and an API
    /// client's, each from `HARMode`) must add to it, not write over each other, and one write at a
    /// time keeps every write whole. Only HAR recording takes it, never a request's path.
    private static let filesWritten = Locked<Set<String>>([])

    private struct State {
        /// Each exchange's entry, encoded once when it is recorded and indented for its place in
        /// the archive: a write assembles them instead of encoding every entry again (which made
        /// recording N exchanges cost N² entry encodings).
        var entries: [Data] = []
        var writeError: String?
        /// How many of ``entries`` are in ``file`` already.
        var written = 0
    }

    /// Creates a recorder.
    /// - Parameters:
    ///   - file: Where to write the archive after every exchange: the first recorder of the
    ///     process to write it starts it over (in one rename); then each exchange, whichever
    ///     recorder of the process made it, is added in place (the closing brackets written again
    ///     after it), so a long recording writes each entry once and recorders that share the file
    ///     lose nothing of each other's. A file another program rewrote is read and added to.
    ///     `nil` to keep the archive in memory (``data()``).
    ///   - redactor: The redaction rules; the defaults hide every credential Conveyor knows.
    ///   - maxBodySize: The most bytes of a body recorded; 256 KiB by default.
    public init(file: URL? = nil, redactor: Redactor = Redactor(), maxBodySize: Int = 256 * 1024) {
        self.file = file
        self.redactor = redactor
        self.maxBodySize = max(0, maxBodySize)
        archiveEnd = Self.archiveEnd(bodyLimit: self.maxBodySize)
    }

    /// How many exchanges were recorded.
    public var entryCount: Int { state.withLock { $0.entries.count } }

    /// Why the last write to ``file`` failed, if it did (recording never fails a request).
    public var lastWriteError: String? { state.withLock { $0.writeError } }

    /// The archive so far, as HAR 1.2 JSON.
    public func data() throws -> Data {
        let entries = state.withLock { $0.entries }
        return try Self.archive(entries: entries, bodyLimit: maxBodySize)
    }

    /// Writes the archive so far to `url` (atomically).
    /// - Parameter url: A `file:` URL.
    public func write(to url: URL) throws {
        try data().write(to: url, options: .atomic)
    }

    /// Records one exchange: the request as sent and its response, or the error it failed with.
    func record(
        _ request: HTTPRequest, outcome: Result<HTTPResponse, NetworkError>, started: Date, elapsed: Duration, streamed: Bool
    ) {
        let entry = makeEntry(request, outcome: outcome, started: started, elapsed: elapsed, streamed: streamed)
        guard let encoded = try? Self.encodedEntry(entry) else {
            state.withLock { $0.writeError = "an exchange could not be encoded" }
            return
        }
        state.withLock { $0.entries.append(encoded) }
        guard let file else { return }
        Self.filesWritten.withLock { filesWritten in
            do {
                try persist(to: file, filesWritten: &filesWritten)
                state.withLock { $0.writeError = nil }
            } catch {
                state.withLock { $0.writeError = "the archive could not be written to \(file.lastPathComponent)" }
            }
        }
    }

    /// Brings `file` up to every exchange this recorder made: the first write of the file in this
    /// process starts it over with them; later ones append the entries it lacks in place (the
    /// closing brackets written again after them), so recording N exchanges writes each entry
    /// once, and entries other recorders added stay. A file that does not end as this recorder
    /// ends an archive (another program's, or another body limit's) is read and written whole
    /// with its entries and these. Called under ``filesWritten``.
    private func persist(to file: URL, filesWritten: inout Set<String>) throws {
        let (entries, written) = state.withLock { ($0.entries, $0.written) }
        guard written < entries.count else { return }
        let path = file.standardizedFileURL.path
        if !filesWritten.contains(path) {
            try Self.archive(entries: entries, bodyLimit: maxBodySize).write(to: file, options: .atomic)
            filesWritten.insert(path)
        } else if try !appendInPlace(entries[written...], to: file) {
            // Not as a recorder of this process left it: keep what it holds, add what it lacks.
            let existing = (try? Data(contentsOf: file)).flatMap { try? JSONDecoder().decode(HARFile.self, from: $0) }
            let kept = try existing?.log.entries.map(Self.encodedEntry) ?? Array(entries[..<written])
            try Self.archive(entries: kept + entries[written...], bodyLimit: maxBodySize).write(to: file, options: .atomic)
        }
        state.withLock { $0.written = entries.count }
    }

    /// Appends `entries` to the archive in `file`, in place of its closing brackets, which are
    /// written again after them. Returns `false`, having written nothing, when the file does not
    /// end as this recorder's archives end.
    private func appendInPlace(_ entries: ArraySlice<Data>, to file: URL) throws -> Bool {
        guard let end = archiveEnd, let handle = try? FileHandle(forUpdating: file) else { return false }
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        // The last entry's `}` and the archive's ending: an archive without entries is written whole.
        guard size > UInt64(end.count) else { return false }
        let tailStart = size - UInt64(end.count)
        try handle.seek(toOffset: tailStart - 1)
        guard try handle.read(upToCount: end.count + 1) == Data("}".utf8) + end else { return false }
        var tail = Data()
        tail.reserveCapacity(entries.reduce(end.count) { $0 + $1.count + 2 })
        for entry in entries {
            tail.append(contentsOf: ",\n".utf8)
            tail.append(entry)
        }
        tail.append(end)
        try handle.seek(toOffset: tailStart)
        try handle.write(contentsOf: tail)
        return true
    }

    // MARK: - Encoding

    /// How the archive is encoded: indented, keys sorted, `/` as it is (what a diff reads best).
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// Where an entry sits in the archive: `{ "log" : { "entries" : [` is three levels deep.
    static let entryIndent = Data("      ".utf8)

    /// One entry as the archive's encoding writes it in place: every line indented by
    /// ``entryIndent`` (an empty line, which the encoder writes for an empty array, stays empty;
    /// a JSON string never holds a raw line break).
    static func encodedEntry(_ entry: HARFile.Entry) throws -> Data {
        let encoded = try encoder().encode(entry)
        var indented = Data()
        indented.reserveCapacity(encoded.count + encoded.count / 8)
        for line in encoded.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if !indented.isEmpty { indented.append(UInt8(ascii: "\n")) }
            if !line.isEmpty { indented.append(entryIndent) }
            indented.append(contentsOf: line)
        }
        return indented
    }

    /// The archive as ``archive(entries:bodyLimit:)``'s fallback makes it, for an encoder whose
    /// layout it does not know (for tests: it must give the same bytes as ``data()``).
    package func dataEncodedWhole() throws -> Data {
        try Self.archiveEncodedWhole(entries: state.withLock { $0.entries }, bodyLimit: maxBodySize)
    }

    /// The archive in `data` decoded and encoded again whole, as ``archive(entries:bodyLimit:)``
    /// must match (for tests).
    package static func encodedWhole(_ data: Data) throws -> Data {
        try encoder().encode(JSONDecoder().decode(HARFile.self, from: data))
    }

    /// The archive with these encoded entries: the encoding of an archive without entries, with
    /// the entries put in its empty `entries` array. The same bytes as encoding the archive whole
    /// (HARTests compares them).
    static func archive(entries: [Data], bodyLimit: Int) throws -> Data {
        let encoded = try encoder().encode(emptyArchive(bodyLimit: bodyLimit))
        guard !entries.isEmpty else { return encoded }
        guard let range = encoded.firstRange(of: emptyList) else {
            // Another encoder layout: encode the whole archive instead.
            return try archiveEncodedWhole(entries: entries, bodyLimit: bodyLimit)
        }
        var archive = Data()
        archive.reserveCapacity(encoded.count + entries.reduce(0) { $0 + $1.count + 2 })
        archive.append(encoded[..<range.lowerBound])
        archive.append(contentsOf: "\"entries\" : [\n".utf8)
        for (index, entry) in entries.enumerated() {
            if index > 0 { archive.append(contentsOf: ",\n".utf8) }
            archive.append(entry)
        }
        archive.append(contentsOf: "\n    ]".utf8)
        archive.append(encoded[range.upperBound...])
        return archive
    }

    /// An archive without entries.
    private static func emptyArchive(bodyLimit: Int) -> HARFile {
        HARFile(log: .init(creator: .init(name: "Conveyor", version: "1"), entries: [], _conveyorBodyLimit: bodyLimit))
    }

    /// The empty `entries` array as the encoder writes it, where ``archive(entries:bodyLimit:)``
    /// puts the entries.
    private static let emptyList = Data("\"entries\" : [\n\n    ]".utf8)

    /// What follows the last entry in an archive ``archive(entries:bodyLimit:)`` assembles (the
    /// entries array closed, then the keys after it), or `nil` for an encoder layout it does not
    /// know (it then encodes archives whole, and nothing is appended in place).
    static func archiveEnd(bodyLimit: Int) -> Data? {
        guard let encoded = try? encoder().encode(emptyArchive(bodyLimit: bodyLimit)),
            let range = encoded.firstRange(of: emptyList)
        else { return nil }
        return Data("\n    ]".utf8) + encoded[range.upperBound...]
    }

    /// The archive with these encoded entries, decoded and encoded whole: what
    /// ``archive(entries:bodyLimit:)`` falls back to for an encoder whose layout it does not know.
    static func archiveEncodedWhole(entries: [Data], bodyLimit: Int) throws -> Data {
        let decoder = JSONDecoder()
        let whole = HARFile(
            log: .init(
                creator: .init(name: "Conveyor", version: "1"),
                entries: try entries.map { try decoder.decode(HARFile.Entry.self, from: $0) },
                _conveyorBodyLimit: bodyLimit))
        return try encoder().encode(whole)
    }

    func makeEntry(
        _ request: HTTPRequest, outcome: Result<HTTPResponse, NetworkError>, started: Date, elapsed: Duration, streamed: Bool
    ) -> HARFile.Entry {
        let sensitive = request.sensitiveHeaders
        // One scrubber for the whole entry: building one derives every encoding of every secret.
        let scrubber = SecretScrubber(secrets: redactor.secretValues(in: request))
        let scrub = { (text: String) in self.redactor.scrub(text, scrubber: scrubber) }
        let url = redactor.redact(request.url)
        var postData: HARFile.PostData?
        var requestComment: String?
        if let body = request.body {
            let recorded = HARBody.make(
                body, contentType: request.headers["Content-Type"], limit: maxBodySize, redactor: redactor, scrubber: scrubber)
            postData = HARFile.PostData(
                mimeType: request.headers["Content-Type"] ?? "", text: recorded.text ?? "", comment: recorded.comment,
                _encoding: recorded.encoding,
                _conveyorDigest: HARBody.digest(
                    body, contentType: request.headers["Content-Type"], limit: maxBodySize, redactor: redactor))
        } else if let stream = request.bodyStream {
            requestComment = "a streamed body of \(stream.length.map { "\($0) bytes" } ?? "unknown length"): not recorded"
        }
        let harRequest = HARFile.Request(
            method: request.method.rawValue, url: url,
            headers: request.headers.map { .init(name: $0.name, value: scrub(redactor.value(of: $0, sensitive: sensitive))) },
            queryString: Self.queryItems(of: url),
            postData: postData, bodySize: request.body?.count ?? Int(request.bodyStream?.length ?? 0),
            comment: requestComment)
        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        switch outcome {
        case .success(let response):
            let contentType = response.headers["Content-Type"]
            let recorded = HARBody.make(
                response.body, contentType: contentType, limit: maxBodySize, redactor: redactor, scrubber: scrubber)
            let timings = HARFile.Timings(response.timings, elapsed: elapsed)
            let harResponse = HARFile.Response(
                status: response.status, statusText: "",
                headers: response.headers.map {
                    .init(name: $0.name, value: scrub(redactor.value(of: $0, sensitive: sensitive)))
                },
                content: .init(
                    size: response.timings?.responseBodyBytes ?? response.body.count, mimeType: contentType ?? "",
                    text: recorded.text, encoding: recorded.encoding,
                    comment: streamed ? "the body went to a file or the caller as it arrived: not recorded" : recorded.comment),
                redirectURL: response.headers["Location"].map { scrub(redactor.redactingURLs(in: $0)) } ?? "",
                bodySize: response.body.count)
            return HARFile.Entry(
                startedDateTime: iso.string(from: started), time: timings.total, request: harRequest, response: harResponse,
                timings: timings)
        case .failure(let error):
            let wait = HARFile.Timings(nil, elapsed: elapsed)
            return HARFile.Entry(
                startedDateTime: iso.string(from: started), time: wait.total, request: harRequest,
                response: HARFile.Response(
                    status: 0, statusText: "", headers: [], content: .init(size: 0, mimeType: ""), redirectURL: "",
                    bodySize: -1, comment: "no response: \(scrub(error.description))"),
                timings: wait, comment: "the exchange failed: \(error.name)", _conveyorError: error.name)
        }
    }

    /// The query items of a (redacted) URL, percent-decoded, in order.
    static func queryItems(of url: String) -> [HARFile.NameValue] {
        guard let items = URLComponents(string: url)?.queryItems else { return [] }
        return items.map { HARFile.NameValue(name: $0.name, value: $0.value ?? "") }
    }
}

/// A transport that records every exchange of the transport it wraps into a ``HARRecorder``:
/// each attempt as it went on the wire (after every behavior), with its response or failure.
///
/// ```swift
/// let recorder = HARRecorder(file: URL(fileURLWithPath: "/tmp/session.har"))
/// let transport = HARRecordingTransport(wrapping: URLSessionTransport.shared, recorder: recorder)
/// ```
/// Streaming stays streaming: a body the client streams to a file or to the caller passes
/// through unrecorded (the entry says so).
public struct HARRecordingTransport: StreamingHTTPTransport {
    /// The transport that sends.
    public let wrapped: any HTTPTransport
    /// Where exchanges go.
    public let recorder: HARRecorder

    /// Wraps a transport.
    /// - Parameters:
    ///   - wrapped: The transport that sends.
    ///   - recorder: Where exchanges go.
    public init(wrapping wrapped: any HTTPTransport, recorder: HARRecorder) {
        self.wrapped = wrapped
        self.recorder = recorder
    }

    /// The wrapped transport's.
    public var honorsCancellation: Bool { wrapped.honorsCancellation }

    /// Sends through the wrapped transport and records the exchange.
    /// - Parameters:
    ///   - request: The attempt.
    ///   - transfer: Where a streamed body goes, if anywhere.
    /// - Returns: The wrapped transport's response.
    /// - Throws: What the wrapped transport throws.
    public func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        let started = Date()
        let clock = ContinuousClock()
        let start = clock.now
        do {
            let response: HTTPResponse
            if let streaming = wrapped as? any StreamingHTTPTransport {
                response = try await streaming.send(request, transfer: transfer)
            } else {
                response = try await wrapped.send(request)
            }
            recorder.record(
                request, outcome: .success(response), started: started, elapsed: clock.now - start,
                streamed: transfer?.takesBodies ?? false)
            return response
        } catch {
            recorder.record(
                request, outcome: .failure(NetworkError(transportError: error)), started: started, elapsed: clock.now - start,
                streamed: false)
            throw error
        }
    }
}

/// A behavior that records each attempt into a ``HARRecorder`` as it passes this behavior: for
/// an app that wants a capture of what it sent and received, whatever its transport. Put it last
/// to record attempts as the transport gets them (every other behavior's headers included,
/// redacted).
///
/// ```swift
/// let capture = HARRecorder(file: FileManager.default.temporaryDirectory.appendingPathComponent("capture.har"))
/// let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!) {
///     RetryBehavior()
///     HARRecordingBehavior(recorder: capture)
/// }
/// ```
public struct HARRecordingBehavior: AttemptIntercepting {
    /// Where attempts go.
    public let recorder: HARRecorder

    /// Creates the behavior.
    /// - Parameter recorder: Where attempts go.
    public init(recorder: HARRecorder) { self.recorder = recorder }

    /// Passes the attempt on and records it with its response or failure.
    /// - Parameters:
    ///   - request: The attempt.
    ///   - context: The request's context.
    ///   - next: The rest of the chain and the transport.
    /// - Returns: The response from further in.
    /// - Throws: What further in throws.
    public func intercept(_ request: HTTPRequest, context: RequestContext, next: @escaping InterceptNext) async throws
        -> HTTPResponse
    {
        let started = Date()
        let clock = ContinuousClock()
        let start = clock.now
        do {
            let response = try await next(request)
            recorder.record(
                request, outcome: .success(response), started: started, elapsed: clock.now - start,
                streamed: context.streamsResponseBody)
            return response
        } catch {
            recorder.record(
                request, outcome: .failure(NetworkError(transportError: error)), started: started, elapsed: clock.now - start,
                streamed: false)
            throw error
        }
    }
}
