public import ConveyorBehaviors
public import ConveyorPipeline
public import Foundation

/// A transport that answers from a HAR file: each request gets the recorded response of the
/// entry it matches, and goes through the pipeline like a real one (retries, the cache,
/// validation, decoding).
///
/// ```swift
/// let replay = try HARReplayTransport(contentsOf: Bundle.module.url(forResource: "session", withExtension: "har")!)
/// let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!, transport: replay)
/// ```
///
/// - **Matching** is by method, URL (scheme, host, port and path equal; query items equal in any
///   order) and request body, compared after the redaction the recording applied (so a request
///   whose token or password differs from the recorded one still matches). Headers are not
///   compared.
/// - **Strict** (the default): each entry answers once, in the order recorded for its origin
///   (scheme, host and port): a request must match the next unused entry of its own origin, while
///   requests to different origins (an auth server and an API, each client's) may come in any
///   order between them. **Lenient**: any unused matching entry answers, first recorded first;
///   when all matching entries were used, the last one answers again.
/// - **No match** fails the attempt with ``Unmatched``, whose description lists the closest
///   recorded entries and why each did not match. The client sees
///   ``Conveyor/NetworkError/transportFailed(_:)`` with it.
/// - An entry recorded without a response (the exchange failed) fails the attempt with the same
///   kind of ``Conveyor/NetworkError`` (``Conveyor/NetworkError/timedOut``, ``Conveyor/NetworkError/connectionFailed(_:)``…).
/// - Recorded bodies are what the recorder wrote: redacted values stay `***`, and a body cut at
///   the recorder's size limit is replayed cut (record fixtures with a large enough
///   ``HARRecorder/maxBodySize``).
public final class HARReplayTransport: HTTPTransport, Sendable {
    /// How requests are matched to entries.
    public enum Mode: Sendable, Hashable {
        /// Each entry once, in order.
        case strict
        /// Any matching entry, unused ones first.
        case lenient
    }

    /// The mode.
    public let mode: Mode
    /// The redaction rules the recording used.
    public let redactor: Redactor
    private let entries: [HARFile.Entry]
    /// Each origin's entries, in the recorded order (strict mode walks each on its own).
    private let entriesByOrigin: [String: [Int]]
    private let bodyLimit: Int
    /// How far strict mode is in each origin's entries, and which entries have answered.
    private let used = Locked<(next: [String: Int], used: Set<Int>)>(([:], []))

    /// Loads a HAR file.
    /// - Parameters:
    ///   - file: A HAR 1.2 file: ``HARRecorder``'s, or one a browser's devtools, Charles or
    ///     Proxyman exported (every field replay does not need is optional).
    ///   - mode: ``Mode/strict`` by default.
    ///   - redactor: The rules the recording used; the defaults by default.
    /// - Throws: ``HARFileError`` when the file cannot be read or is not HAR.
    public convenience init(contentsOf file: URL, mode: Mode = .strict, redactor: Redactor = Redactor()) throws {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw HARFileError(description: "\(file.lastPathComponent) could not be read")
        }
        try self.init(data: data, mode: mode, redactor: redactor)
    }

    /// The replay of `file` in `mode` that ``HARMode`` gives every client of the process, as its
    /// recorders of one file share the file: one walk through the recording however many clients
    /// (an auth client's and an API client's) take part. A file whose bytes changed since (a new
    /// recording) gets a new replay.
    static func shared(contentsOf file: URL, mode: Mode) throws -> HARReplayTransport {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw HARFileError(description: "\(file.lastPathComponent) could not be read")
        }
        let key = SharedKey(path: file.standardizedFileURL.path, mode: mode)
        if let kept = sharedReplays.withLock({ $0[key] }), kept.data == data { return kept.replay }
        let made = try HARReplayTransport(data: data, mode: mode)
        return sharedReplays.withLock { replays in
            // Another client may have loaded the same bytes meanwhile: theirs is the one.
            if let kept = replays[key], kept.data == data { return kept.replay }
            replays[key] = (data, made)
            return made
        }
    }

    private struct SharedKey: Hashable {
        let path: String
        let mode: Mode
    }

    /// The replays ``shared(contentsOf:mode:)`` gave, with the bytes each was loaded from. Only
    /// `HARMode` takes the lock, never a request's path.
    private static let sharedReplays = Locked<[SharedKey: (data: Data, replay: HARReplayTransport)]>([:])

    /// Loads a HAR archive from its JSON.
    /// - Parameters:
    ///   - data: HAR 1.2 JSON.
    ///   - mode: ``Mode/strict`` by default.
    ///   - redactor: The rules the recording used.
    /// - Throws: ``HARFileError`` when the data is not HAR.
    public init(data: Data, mode: Mode = .strict, redactor: Redactor = Redactor()) throws {
        let archive: HARFile
        do {
            archive = try JSONDecoder().decode(HARFile.self, from: data)
        } catch {
            throw HARFileError(description: "not a HAR 1.2 archive: \(NetworkError.describe(error))")
        }
        self.entries = archive.log.entries
        var byOrigin: [String: [Int]] = [:]
        for (index, entry) in archive.log.entries.enumerated() { byOrigin[Wanted.origin(of: entry.request.url), default: []].append(index) }
        self.entriesByOrigin = byOrigin
        // A number from a file: a negative limit trapped `prefix` on the first request with a body;
        // it reads as 0 (bodies are then compared by their digests alone).
        self.bodyLimit = max(0, archive.log._conveyorBodyLimit ?? 256 * 1024)
        self.mode = mode
        self.redactor = redactor
    }

    /// How many entries the file holds.
    public var entryCount: Int { entries.count }

    /// How many entries have answered (each counted once).
    public var usedEntryCount: Int { used.withLock { $0.used.count } }

    /// A replay answers at once.
    public var honorsCancellation: Bool { true }

    /// The response of the entry `request` matches.
    /// - Parameter request: The attempt.
    /// - Returns: The recorded response.
    /// - Throws: ``Unmatched`` when no entry matches; the recorded failure's ``Conveyor/NetworkError`` for
    ///   an entry recorded without a response.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try answer(request)
    }

    /// The recorded requests, as the file has them (method, URL, body text): what the `har` fuzz
    /// target sends back to the file.
    package var recordedRequests: [(method: String, url: String, body: String?)] {
        entries.map { ($0.request.method, $0.request.url, $0.request.postData?.text) }
    }

    /// ``send(_:)``, without suspending.
    package func answer(_ request: HTTPRequest) throws -> HTTPResponse {
        let wanted = Wanted(request, redactor: redactor, limit: bodyLimit)
        // Decided under the lock; an unmatched request is described after it (which reads it again).
        enum Pick { case entry(Int), unmatched(next: Int?) }
        let pick = used.withLock { state -> Pick in
            switch mode {
            case .strict:
                // The next entry of the request's origin: another origin's entries (an auth
                // server's, a CDN's) do not stand in its way.
                let position = state.next[wanted.origin, default: 0]
                guard let indices = entriesByOrigin[wanted.origin], position < indices.count else {
                    return .unmatched(next: nil)
                }
                let next = indices[position]
                guard wanted.mismatches(entries[next]).isEmpty else { return .unmatched(next: next) }
                state.used.insert(next)
                state.next[wanted.origin] = position + 1
                return .entry(next)
            case .lenient:
                let matching = entries.indices.filter { wanted.mismatches(entries[$0]).isEmpty }
                guard let index = matching.first(where: { !state.used.contains($0) }) ?? matching.last else {
                    return .unmatched(next: nil)
                }
                state.used.insert(index)
                return .entry(index)
            }
        }
        guard case .entry(let index) = pick else {
            if case .unmatched(let next) = pick { throw unmatched(wanted, next: next) }
            throw unmatched(wanted, next: nil)
        }
        let entry = entries[index]
        if let kind = entry._conveyorError ?? (entry.response.status == 0 ? "transportFailed" : nil) {
            throw Self.failure(named: kind)
        }
        var headers = HTTPHeaders()
        for field in entry.response.headers { headers.add(name: field.name, value: field.value) }
        let body = HARBody.bytes(text: entry.response.content.text, encoding: entry.response.content.encoding)
        return HTTPResponse(status: entry.response.status, headers: headers, body: body, request: request)
    }

    /// The failure a recorded entry without a response stands for.
    static func failure(named kind: String) -> NetworkError {
        switch kind {
        case "timedOut": .timedOut
        case "offline": .offline
        case "cancelled": .cancelled
        case "tooManyRedirects": .tooManyRedirects
        case "connectionFailed": .connectionFailed(RecordedFailure(kind: kind))
        default: .transportFailed(RecordedFailure(kind: kind))
        }
    }

    /// The exchange failed when it was recorded.
    struct RecordedFailure: Error, SafelyDescribable {
        let kind: String
        var description: String { "recorded as failed (\(kind))" }
    }

    private func unmatched(_ wanted: Wanted, next: Int?) -> Unmatched {
        // The entry strict mode expected first, then the closest others by how many parts differ.
        let ranked = entries.indices.map { ($0, wanted.mismatches(entries[$0])) }
            .sorted { ($0.0 == next ? -1 : $0.1.count, $0.0) < ($1.0 == next ? -1 : $1.1.count, $1.0) }
        let closest = ranked.prefix(3).map { index, reasons in
            let entry = entries[index]
            let used = self.used.withLock { $0.used.contains(index) } ? " (already used)" : ""
            let why = reasons.isEmpty ? "matches, but it is not next" + used : reasons.joined(separator: "; ") + used
            return "#\(index + 1) \(entry.request.method) \(entry.request.url): \(why)"
        }
        return Unmatched(
            request: "\(wanted.method) \(wanted.url)", mode: mode, entryCount: entries.count, closest: closest)
    }

    /// No recorded entry answers a request.
    public struct Unmatched: Error, SafelyDescribable, Hashable {
        /// The request, redacted as recordings are.
        public let request: String
        /// The mode.
        public let mode: Mode
        /// How many entries the file holds.
        public let entryCount: Int
        /// The closest entries, each with why it did not match.
        public let closest: [String]

        /// What did not match and the closest entries.
        public var description: String {
            "no recorded entry (of \(entryCount), \(mode == .strict ? "strict" : "lenient")) matches \(request)"
                + (closest.isEmpty ? "" : "; closest: " + closest.joined(separator: " | "))
        }
    }

    /// A request as the recording would have written it.
    struct Wanted {
        let method: String
        let url: String
        let location: String
        /// Scheme, host and port: strict mode keeps the recorded order per origin.
        let origin: String
        let query: [String: Int]
        let body: String?
        let digest: String?

        init(_ request: HTTPRequest, redactor: Redactor, limit: Int) {
            method = request.method.rawValue
            url = redactor.redact(request.url)
            location = Self.location(of: url)
            origin = Self.origin(of: url)
            query = Self.multiset(HARRecorder.queryItems(of: url))
            if let data = request.body {
                let recorded = HARBody.make(
                    data, contentType: request.headers["Content-Type"], limit: limit, redactor: redactor,
                    scrubber: SecretScrubber(secrets: redactor.secretValues(in: request)))
                body = recorded.text ?? ""
                digest = HARBody.digest(data, contentType: request.headers["Content-Type"], limit: limit, redactor: redactor)
            } else {
                body = nil
                digest = nil
            }
        }

        /// The URL without its query and fragment.
        static func location(of url: String) -> String {
            String(url.prefix { $0 != "?" && $0 != "#" })
        }

        /// The origin of a URL: scheme and host lowercased, and the port, the scheme's default
        /// when it has none (`https://API.example` and `https://api.example:443` are one). A URL
        /// that does not parse is its own origin, whole.
        static func origin(of url: String) -> String {
            guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
                let host = components.host?.lowercased()
            else { return location(of: url) }
            let port = components.port ?? ["http": 80, "ws": 80, "https": 443, "wss": 443][scheme]
            return "\(scheme)://\(host)" + (port.map { ":\($0)" } ?? "")
        }

        static func multiset(_ items: [HARFile.NameValue]) -> [String: Int] {
            var counts: [String: Int] = [:]
            for item in items { counts[item.name + "=" + item.value, default: 0] += 1 }
            return counts
        }

        /// Why `entry` does not answer this request; empty when it does.
        func mismatches(_ entry: HARFile.Entry) -> [String] {
            var reasons: [String] = []
            if entry.request.method != method { reasons.append("method \(entry.request.method), not \(method)") }
            let recordedLocation = Self.location(of: entry.request.url)
            if recordedLocation != location { reasons.append("URL \(recordedLocation), not \(location)") }
            let recordedQuery = Self.multiset(
                entry.request.queryString.isEmpty ? HARRecorder.queryItems(of: entry.request.url) : entry.request.queryString)
            if recordedQuery != query {
                let missing = query.keys.filter { recordedQuery[$0] != query[$0] }.sorted()
                let extra = recordedQuery.keys.filter { query[$0] != recordedQuery[$0] }.sorted()
                reasons.append(
                    "query differs" + (missing.isEmpty ? "" : " (the request has \(missing.joined(separator: ", ")))")
                        + (extra.isEmpty ? "" : " (the entry has \(extra.joined(separator: ", ")))"))
            }
            let recordedBody = entry.request.postData.map { $0.text }
            // A recorder's digest when the entry has one (a browser's HAR has only the text).
            let differs =
                if let recorded = entry.request.postData?._conveyorDigest { recorded != digest }
                else { (recordedBody ?? "") != (body ?? "") }
            if differs {
                let common = zip(recordedBody ?? "", body ?? "").prefix { $0 == $1 }.count
                reasons.append(
                    "body differs from character \(common) (\((recordedBody ?? "").count) recorded, \((body ?? "").count) sent)")
            }
            return reasons
        }
    }
}

/// A HAR file that cannot be used.
public struct HARFileError: Error, SafelyDescribable, Hashable {
    /// What is wrong.
    public let description: String
}
