import ConveyorPipeline
import Foundation

#if canImport(Glibc) || canImport(Darwin)
    /// One connection of the ``ConformanceServer``, served on a thread of its own: reads requests
    /// (keep-alive), answers the kit's routes, and records what happened.
    ///
    /// | route | answer |
    /// |---|---|
    /// | `/echo` | 200, JSON: method, path, query, headers as `[name, value]` pairs in order, body length, the body in base64 when at most 64 KiB |
    /// | `/status/N` | status N with the body `status N` (none for 204 and 304); never a `Location` |
    /// | `/bytes?count=N[&chunked=1]` | N bytes of ``ConformancePattern``, written 64 KiB at a time |
    /// | `/repeat-header` | 200 with two `X-Multi` fields (`one`, `two`) and `X-Mixed-CASE-Name: yes` |
    /// | `/redirect?status=N&to=URL` | status N (302 by default) to `to` |
    /// | `/redirect-chain?n=K` | 302 to `n=K-1` (other query items kept), until 200 at `n=0` |
    /// | `/close-mid-body` | 200 with `Content-Length: 1000`, 100 bytes, then the server closes |
    /// | `/garbage` | bytes that are not HTTP, then the server closes |
    /// | `/stall` | nothing, until the client hangs up |
    /// | `/stall-body` | 200 headers with `Content-Length: 1000`, then nothing until the client hangs up |
    /// | `/close-at-once` | nothing; the server closes |
    /// | `/half-sent` | the status line `HTTP/1.1 200 OK`, then the server closes |
    /// | `/close-mid-headers` | the status line and half a header field, then the server closes |
    /// | `/two-lengths` | `Content-Length: 2` and `Content-Length: 9`, then 9 bytes |
    /// | `/bad-chunk` | a chunked body whose first chunk size is `zz` |
    /// | `/control-bytes?kind=cr\|nul` | a 200 whose `X-Odd` value holds a bare CR or a NUL |
    /// | `/utf8-header` | a 200 whose `X-Odd` value is valid UTF-8 beyond ASCII |
    /// | `/huge-headers` | a 200 with 1 MiB of header fields |
    /// | `/not-modified` | a 304 although the request had no validator |
    /// | `/trickle-headers` | the response head one byte every 50 ms, until the client hangs up |
    /// | `/upload` | reads the body as it arrives without keeping it; 200 with `bytes=N intact=1` when it is the pattern from its start (`intact=0` otherwise) |
    /// | `/resumable?bytes=N&mode=changed\|partial\|ignored` | a download that breaks and is resumed: the first request gets half of version 1 (`ETag: "v1"`, `Accept-Ranges: bytes`) and a close; a `Range` request then gets version 2 from the offset (`changed`, as a server that ignores `If-Range`), ten bytes of a `206` whose `Content-Range` ends early (`partial`), or a whole `200` (`ignored`); any later request gets the current version whole |
    /// | anything else | 404 |
    ///
    /// Every answer has `Cache-Control: no-store`, so a session's cache never answers for the server.
    final class ConformanceConnection {
        private let fd: Int32
        private let id: Int
        private let listener: Int
        private let server: ConformanceServer
        /// Bytes read but not consumed yet.
        private var pending: [UInt8] = []
        private var path = ""
        private var written = 0

        init(fd: Int32, id: Int, listener: Int, server: ConformanceServer) {
            self.fd = fd
            self.id = id
            self.listener = listener
            self.server = server
        }

        /// Serves requests until either side closes.
        func run() {
            while let request = readRequest() {
                path = request.path
                written = 0
                server.record(event(.requestReceived, request: request))
                guard respond(to: request) else { return }
                server.record(event(.responseWritten))
                if request.headers["Connection"]?.lowercased() == "close" { return }
            }
        }

        private func event(_ kind: ConformanceEvent.Kind, request: ConformanceRequest? = nil) -> ConformanceEvent {
            ConformanceEvent(
                kind: kind, connection: id, listener: listener, path: path, request: request, bytesWritten: written)
        }

        /// The client hung up (unless the server is stopping, which is not the client's doing).
        private func clientClosed() {
            if !server.isStopped { server.record(event(.closedByClient)) }
        }

        // MARK: Reading

        /// More bytes into `pending`; `false` (and the event recorded) when the client closed.
        private func fill() -> Bool {
            guard let bytes = ConformanceSocket.receive(fd) else {
                clientClosed()
                return false
            }
            pending += bytes
            return true
        }

        /// The bytes up to the next CRLF (excluded), or `nil` when the client closed first or the
        /// line is absurdly long.
        private func readLine(limit: Int = 65536) -> [UInt8]? {
            var searched = 0
            while true {
                if let index = Self.crlf(in: pending, from: searched) {
                    let line = Array(pending[..<index])
                    pending.removeSubrange(..<(index + 2))
                    return line
                }
                searched = max(0, pending.count - 1)
                guard pending.count < limit, fill() else { return nil }
            }
        }

        private static func crlf(in bytes: [UInt8], from start: Int) -> Int? {
            var index = start
            while index + 1 < bytes.count {
                if bytes[index] == 13 && bytes[index + 1] == 10 { return index }
                index += 1
            }
            return nil
        }

        private func readBytes(_ count: Int) -> Data? {
            var body = Data(pending.prefix(count))
            pending.removeFirst(min(count, pending.count))
            while body.count < count {
                guard let bytes = ConformanceSocket.receive(fd, capacity: min(1 << 18, count - body.count)) else {
                    clientClosed()
                    return nil
                }
                body.append(contentsOf: bytes)
            }
            return body
        }

        private func readRequest() -> ConformanceRequest? {
            var line = readLine()
            // RFC 9112: a server ignores empty lines before the request line.
            while let empty = line, empty.isEmpty { line = readLine() }
            guard let requestLine = line else { return nil }
            let parts = String(decoding: requestLine, as: UTF8.self).split(separator: " ")
            guard parts.count == 3 else { return nil }
            let method = String(parts[0])
            let target = String(parts[1])
            var headers = HTTPHeaders()
            while true {
                guard let line = readLine() else { return nil }
                if line.isEmpty { break }
                let text = String(decoding: line, as: UTF8.self)
                guard let colon = text.firstIndex(of: ":") else { return nil }
                let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                headers.add(name: String(text[..<colon]), value: value)
            }
            if headers["Expect"]?.lowercased() == "100-continue" {
                guard send("HTTP/1.1 100 Continue\r\n\r\n") else { return nil }
            }
            let (path, query) = Self.split(target)
            // `/upload` checks its body as it arrives and keeps none of it.
            let upload = path == "/upload" ? UploadCheck() : nil
            let body: Data
            let framing: ConformanceRequest.Framing
            if headers.values(for: "Transfer-Encoding").joined(separator: ",").lowercased().contains("chunked") {
                guard let chunked = readChunkedBody(into: upload) else { return nil }
                (body, framing) = (chunked, .chunked)
            } else if let length = headers["Content-Length"].flatMap({ Int($0) }), length >= 0 {
                if let upload {
                    guard readBytes(length, into: upload) else { return nil }
                    body = Data()
                } else {
                    guard length <= 256 << 20, let read = readBytes(length) else { return nil }
                    body = read
                }
                framing = .contentLength(length)
            } else {
                (body, framing) = (Data(), .none)
            }
            return ConformanceRequest(
                method: method, target: target, path: path, query: query, headers: headers, body: body,
                framing: framing, uploaded: upload.map { ($0.count, $0.intact) })
        }

        /// Reads `count` bytes into `upload`'s check, keeping none; `false` when the client closed.
        private func readBytes(_ count: Int, into upload: UploadCheck) -> Bool {
            var left = count
            let buffered = min(left, pending.count)
            upload.take(pending[..<buffered])
            pending.removeFirst(buffered)
            left -= buffered
            while left > 0 {
                guard let bytes = ConformanceSocket.receive(fd, capacity: min(1 << 18, left)) else {
                    clientClosed()
                    return false
                }
                upload.take(bytes[...])
                left -= bytes.count
            }
            return true
        }

        private func readChunkedBody(into upload: UploadCheck? = nil) -> Data? {
            var body = Data()
            var total = 0
            while true {
                guard let line = readLine() else { return nil }
                let sizeText = String(decoding: line, as: UTF8.self).split(separator: ";").first ?? ""
                guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0,
                    upload != nil || total + size <= 256 << 20
                else { return nil }
                total += size
                if size == 0 {
                    // Trailers, up to the empty line.
                    while true {
                        guard let trailer = readLine() else { return nil }
                        if trailer.isEmpty { return body }
                    }
                }
                if let upload {
                    guard readBytes(size, into: upload), let end = readLine(), end.isEmpty else { return nil }
                } else {
                    guard let chunk = readBytes(size), let end = readLine(), end.isEmpty else { return nil }
                    body.append(chunk)
                }
            }
        }

        static func split(_ target: String) -> (path: String, query: [String: String]) {
            guard let mark = target.firstIndex(of: "?") else { return (target, [:]) }
            var query: [String: String] = [:]
            for item in target[target.index(after: mark)...].split(separator: "&") {
                let pair = item.split(separator: "=", maxSplits: 1).map {
                    String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
                }
                if let name = pair.first { query[name] = pair.count > 1 ? pair[1] : "" }
            }
            return (String(target[..<mark]), query)
        }

        // MARK: Writing

        /// `false` (and the event recorded) when the client closed.
        private func send(_ bytes: some ContiguousBytes) -> Bool {
            let sent = bytes.withUnsafeBytes { ConformanceSocket.send(fd, $0) }
            if sent {
                written += bytes.withUnsafeBytes(\.count)
            } else {
                clientClosed()
            }
            return sent
        }

        private func send(_ text: String) -> Bool { send(Array(text.utf8)) }

        private func head(_ status: Int, _ fields: [(String, String)]) -> String {
            var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\nCache-Control: no-store\r\n"
            for (name, value) in fields { text += "\(name): \(value)\r\n" }
            return text + "\r\n"
        }

        /// A whole response with `Content-Length`; HEAD gets the headers only.
        private func reply(
            _ status: Int, body: Data = Data(), type: String = "text/plain", _ fields: [(String, String)] = [],
            to request: ConformanceRequest
        ) -> Bool {
            var all = fields
            if status != 204 && status != 304 {
                all += [("Content-Type", type), ("Content-Length", "\(body.count)")]
            }
            guard send(head(status, all)) else { return false }
            if request.method == "HEAD" || body.isEmpty || status == 204 || status == 304 { return true }
            return send(body)
        }

        /// Answers; `false` when the connection must end.
        private func respond(to request: ConformanceRequest) -> Bool {
            let query = request.query
            let segments = request.path.split(separator: "/")
            switch request.path {
            case "/echo":
                let cookie = query["cookie"] == "1" ? [("Set-Cookie", ConformanceProbe.plantedCookie)] : []
                return reply(200, body: request.echo, type: "application/json", cookie, to: request)
            case _ where segments.count == 2 && segments[0] == "status":
                let status = Int(segments[1]).map { min(max($0, 200), 599) } ?? 500
                let body = status == 204 || status == 304 ? Data() : Data("status \(status)".utf8)
                return reply(status, body: body, to: request)
            case "/bytes":
                let count = query["count"].flatMap { Int($0) }.map { min(max($0, 0), 1 << 30) } ?? 0
                return stream(count, chunked: query["chunked"] == "1", request: request)
            case "/repeat-header":
                let fields = [("X-Multi", "one"), ("X-Multi", "two"), ("X-Mixed-CASE-Name", "yes")]
                return reply(200, body: Data("ok".utf8), fields, to: request)
            case "/redirect":
                let status = query["status"].flatMap { Int($0) } ?? 302
                return reply(status, [("Location", query["to"] ?? "/echo")], to: request)
            case "/redirect-chain":
                let left = query["n"].flatMap { Int($0) } ?? 0
                guard left > 0 else { return reply(200, body: Data("chain end".utf8), to: request) }
                var items = query.filter { $0.key != "n" }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                items.insert("n=\(left - 1)", at: 0)
                return reply(302, [("Location", "/redirect-chain?" + items.joined(separator: "&"))], to: request)
            case "/close-mid-body":
                let cookie = query["cookie"] == "1" ? [("Set-Cookie", ConformanceProbe.plantedCookie)] : []
                let head = head(
                    200, [("Content-Type", "application/octet-stream"), ("Content-Length", "1000")] + cookie)
                _ = send(head) && send(ConformancePattern.bytes(count: 100))
                return false
            case "/garbage":
                _ = send([0x00, 0xFF] + Array("THIS IS NOT HTTP\r\n\r\n".utf8))
                return false
            case "/stall":
                drainUntilClosed()
                return false
            case "/stall-body":
                let head = head(200, [("Content-Type", "application/octet-stream"), ("Content-Length", "1000")])
                if send(head) { drainUntilClosed() }
                return false
            case "/upload":
                let (count, intact) = request.uploaded ?? (0, false)
                return reply(200, body: Data("bytes=\(count) intact=\(intact ? 1 : 0)".utf8), to: request)
            case "/resumable":
                return resumable(request)
            case "/events":
                return eventStream(request)
            default:
                return misbehave(request) ?? reply(404, body: Data("not found".utf8), to: request)
            }
        }

        /// The misbehaviors of a hostile server; `nil` for a path that is not one.
        private func misbehave(_ request: ConformanceRequest) -> Bool? {
            switch request.path {
            case "/close-at-once":
                return false
            case "/half-sent":
                _ = send("HTTP/1.1 200 OK\r\n")
                return false
            case "/close-mid-headers":
                _ = send("HTTP/1.1 200 OK\r\nContent-Type: text/pl")
                return false
            case "/two-lengths":
                _ = send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n123456789")
                return false
            case "/bad-chunk":
                _ = send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
                return false
            case "/control-bytes":
                let odd: [UInt8] = request.query["kind"] == "nul" ? [0x61, 0x00, 0x62] : [0x61, 0x0D, 0x62]
                let head = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Odd: ".utf8) + odd + Array("\r\n\r\nok".utf8)
                _ = send(head)
                return false
            case "/utf8-header":
                return reply(200, body: Data("ok".utf8), [("X-Odd", ConformancePattern.utf8Value)], to: request)
            case "/huge-headers":
                let line = "X-Pad: " + String(repeating: "p", count: 1016) + "\r\n"
                let block = String(repeating: line, count: 1024)
                _ = send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + block + "\r\nok")
                return false
            case "/not-modified":
                return reply(304, to: request)
            case "/trickle-headers":
                for byte in Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Slow: ".utf8) + Array(repeating: 0x61, count: 4096) {
                    guard !server.isStopped, send([byte]) else { return false }
                    usleep(50_000)
                }
                return false
            default:
                return nil
            }
        }

        /// `/resumable`: see the route table. Which request this is comes from the server's record
        /// (this request's arrival is in it already).
        private func resumable(_ request: ConformanceRequest) -> Bool {
            let total = request.query["bytes"].flatMap { Int($0) }.map { min(max($0, 2), 1 << 30) } ?? 1 << 20
            let mode = request.query["mode"] ?? "changed"
            let hit = server.events.filter { $0.kind == .requestReceived && $0.path == "/resumable" }.count
            let current = mode == "changed" && hit > 1 ? 2 : 1
            func fields(version: Int) -> [(String, String)] {
                [("Content-Type", "application/octet-stream"), ("ETag", "\"v\(version)\""), ("Accept-Ranges", "bytes")]
            }
            func body(version: Int, from start: Int, count: Int) -> Data {
                ConformancePattern.resumable(version: version, from: start, count: count)
            }
            if hit == 1 {
                // Half of version 1, then the connection breaks.
                let head = head(200, fields(version: 1) + [("Content-Length", "\(total)")])
                _ = send(head) && send(body(version: 1, from: 0, count: total / 2))
                return false
            }
            let range = request.headers["Range"].flatMap(ConformancePattern.rangeStart)
            if hit == 2, let start = range, start < total {
                switch mode {
                case "partial":
                    let count = min(10, total - start)
                    let head = head(
                        206,
                        fields(version: 1) + [
                            ("Content-Range", "bytes \(start)-\(start + count - 1)/\(total)"), ("Content-Length", "\(count)"),
                        ])
                    return send(head) && send(body(version: 1, from: start, count: count))
                case "ignored":
                    break
                default:  // changed: the new version from the offset, as a server that ignores If-Range
                    let count = total - start
                    let head = head(
                        206,
                        fields(version: 2) + [
                            ("Content-Range", "bytes \(start)-\(total - 1)/\(total)"), ("Content-Length", "\(count)"),
                        ])
                    return send(head) && send(body(version: 2, from: start, count: count))
                }
            }
            let head = head(200, fields(version: current) + [("Content-Length", "\(total)")])
            return send(head) && send(body(version: current, from: 0, count: total))
        }

        /// `/events`: a `text/event-stream` with no length (it ends when the connection does). The
        /// first connection sends events 1 and 2 in pieces that split CR from LF, then half of
        /// event 3, and drops; a reconnect with `Last-Event-ID: 2` gets event 3, then silence until
        /// the client leaves; one with `Last-Event-ID: 3` gets a 204 (stop). `?hold=1`: event 1,
        /// then silence.
        private func eventStream(_ request: ConformanceRequest) -> Bool {
            let head = head(200, [("Content-Type", "text/event-stream")])
            if request.query["hold"] == "1" {
                if send(head), send("id: 1\ndata: a\n\n") { drainUntilClosed() }
                return false
            }
            switch request.headers["Last-Event-ID"] {
            case nil:
                guard send(head) else { return false }
                for piece in ["retry: 0\r", "\n: split line ends\r\n", "id: 1\r", "\ndata: a\r\n\r", "\nid: 2\ndata: b\n", "\n", "id: 3\ndata: ha"] {
                    guard send(piece) else { return false }
                    usleep(5_000)  // separate writes, so the pieces tend to arrive as separate chunks
                }
                return false
            case "2":
                if send(head), send("id: 3\ndata: c\n\n") { drainUntilClosed() }
                return false
            case "3":
                return reply(204, to: request)
            default:
                return reply(409, body: Data("unexpected Last-Event-ID".utf8), to: request)
            }
        }

        /// Reads and drops whatever comes until the client closes (or the server stops).
        private func drainUntilClosed() {
            while ConformanceSocket.receive(fd) != nil {}
            clientClosed()
        }

        private func stream(_ count: Int, chunked: Bool, request: ConformanceRequest) -> Bool {
            let framing = chunked ? ("Transfer-Encoding", "chunked") : ("Content-Length", "\(count)")
            guard send(head(200, [("Content-Type", "application/octet-stream"), framing])) else { return false }
            if request.method == "HEAD" { return true }
            var offset = 0
            while offset < count {
                let piece = ConformancePattern.slice(from: offset, count: min(65536, count - offset))
                if chunked {
                    guard send(String(piece.count, radix: 16) + "\r\n"), send(piece), send("\r\n") else { return false }
                } else {
                    guard send(piece) else { return false }
                }
                offset += piece.count
            }
            return chunked ? send("0\r\n\r\n") : true
        }

        private static func reason(_ status: Int) -> String {
            switch status {
            case 200: "OK"
            case 201: "Created"
            case 204: "No Content"
            case 301: "Moved Permanently"
            case 302: "Found"
            case 303: "See Other"
            case 307: "Temporary Redirect"
            case 308: "Permanent Redirect"
            case 400: "Bad Request"
            case 401: "Unauthorized"
            case 404: "Not Found"
            case 418: "I'm a teapot"
            case 500: "Internal Server Error"
            case 503: "Service Unavailable"
            default: "Status"
            }
        }
    }
#endif

/// The bytes the kit sends and expects: a fixed pseudo-random run of 65,521 bytes (a prime, so a
/// chunk dropped, repeated or moved by a multiple of any power-of-two buffer size shows),
/// repeated.
enum ConformancePattern {
    static let period = 65521
    /// The `X-Odd` value of `/utf8-header`: obs-text that is valid UTF-8.
    static let utf8Value = "\u{0731} \u{00E9}"

    static let unit: Data = {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var bytes = [UInt8](repeating: 0, count: period)
        for index in bytes.indices {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            bytes[index] = UInt8(truncatingIfNeeded: state >> 24)
        }
        return Data(bytes)
    }()

    /// `count` bytes of the pattern starting at `offset`.
    static func slice(from offset: Int, count: Int) -> Data {
        var result = Data(capacity: count)
        var position = offset % period
        while result.count < count {
            let take = min(period - position, count - result.count)
            result.append(unit[position..<(position + take)])
            position = 0
        }
        return result
    }

    /// The first `count` bytes of the pattern.
    static func bytes(count: Int) -> Data { slice(from: 0, count: count) }

    /// `/resumable`'s bytes: version 1 is the pattern, version 2 the pattern 1,000 bytes on.
    static func resumable(version: Int, from offset: Int, count: Int) -> Data {
        slice(from: offset + (version == 2 ? 1000 : 0), count: count)
    }

    /// The first byte of a `Range: bytes=N-` request, or `nil`.
    static func rangeStart(_ value: String) -> Int? {
        guard value.hasPrefix("bytes="), let dash = value.firstIndex(of: "-") else { return nil }
        return Int(value[value.index(value.startIndex, offsetBy: 6)..<dash])
    }
}

/// What `/upload` checks of a body as it arrives: its length, and whether every byte is the
/// pattern's from the start.
final class UploadCheck {
    private(set) var count = 0
    private(set) var intact = true

    func take(_ bytes: some Collection<UInt8>) {
        guard intact else {
            count += bytes.count
            return
        }
        let expected = ConformancePattern.slice(from: count, count: bytes.count)
        // Compared in place (a generic `elementsEqual` goes byte by byte through the iterator
        // protocol: seconds of CPU for a 64 MiB upload in a debug build).
        let same =
            bytes.withContiguousStorageIfAvailable { received in
                expected.withUnsafeBytes { pattern in
                    guard received.count == pattern.count else { return false }
                    guard let left = received.baseAddress, let right = pattern.baseAddress else { return true }
                    return memcmp(left, right, received.count) == 0
                }
            } ?? expected.elementsEqual(bytes)
        if !same { intact = false }
        count += bytes.count
    }
}

extension ConformanceRequest {
    private struct Echo: Encodable {
        var method: String
        var path: String
        var query: [String: String]
        var headers: [[String]]
        var bodyLength: Int
        var bodyBase64: String?
    }

    /// What `/echo` answers: JSON (sorted keys) of the method, path, query, every header field
    /// as a `[name, value]` pair in order, the body's length and, up to 64 KiB, the body in base64.
    var echo: Data {
        let echo = Echo(
            method: method, path: path, query: query, headers: headers.map { [$0.name, $0.value] },
            bodyLength: body.count, bodyBase64: body.count <= 65536 ? body.base64EncodedString() : nil)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(echo)) ?? Data("{}".utf8)
    }
}
