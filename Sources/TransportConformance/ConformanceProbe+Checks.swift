import Conveyor
import ConveyorPipeline
import Foundation

/// The checks. Each returns a detail (what it saw where several behaviors conform) or throws what
/// the transport got wrong. Messages name header fields, never their values.
extension ConformanceProbe {
    func run(_ check: TransportConformance.Check) async throws(ConformanceFailure) -> String? {
        switch check {
        case .methods: try await methods()
        case .requestBodies: try await requestBodies()
        case .requestHeaders: try await requestHeaders()
        case .responseHeaders: try await responseHeaders()
        case .statusCodes: try await statusCodes()
        case .largeResponse: try await largeResponse()
        case .responseSizeLimit: try await responseSizeLimit()
        case .timeout: try await timeout(path: "/stall", what: "a server that never answers")
        case .cancellation: try await cancellation()
        case .sameOriginRedirect: try await sameOriginRedirect()
        case .crossOriginRedirect: try await crossOriginRedirect()
        case .redirectMethods: try await redirectMethods()
        case .redirectLimit: try await redirectLimit()
        case .closeMidBody: try await closeMidBody()
        case .garbageResponse: try await garbageResponse()
        case .stalledBody: try await timeout(path: "/stall-body", what: "response headers, then silence")
        case .connectionRefused: try await connectionRefused()
        case .closeBeforeResponse: try await alwaysFails("/close-at-once", "a connection closed before any byte")
        case .halfSentResponse: try await alwaysFails("/half-sent", "a status line, then the connection closed")
        case .closeMidHeaders: try await alwaysFails("/close-mid-headers", "a connection closed mid-headers")
        case .conflictingContentLength: try await alwaysFails("/two-lengths", "Content-Length 2 and 9")
        case .badChunkSize: try await alwaysFails("/bad-chunk", "a chunk size that is not hexadecimal")
        case .controlBytesInHeaders: try await controlBytesInHeaders()
        case .nonASCIIHeader: try await nonASCIIHeader()
        case .hugeHeaderBlock: try await hugeHeaderBlock()
        case .unsolicitedNotModified: try await unsolicitedNotModified()
        case .headerTrickle: try await timeout(path: "/trickle-headers", what: "the head one byte every 50 ms")
        case .resumeWithChangedValidator:
            try await resume(
                mode: "changed", expectedVersion: 2,
                what: "a download resumed with Range, answered 206 with another ETag (If-Range ignored)")
        case .resumeWithPartialContent:
            try await resume(
                mode: "partial", expectedVersion: 1,
                what: "a download resumed with Range, answered 206 whose Content-Range covers 10 bytes of the rest")
        case .resumeRangeIgnored:
            try await resume(
                mode: "ignored", expectedVersion: 1, what: "a download resumed with Range, answered 200 with the whole body")
        case .earlyStreamExit: try await earlyStreamExit()
        case .streamedTransfers: try await streamedTransfers()
        case .eventStreamReconnect: try await eventStreamReconnect()
        case .eventStreamExit: try await eventStreamExit()
        }
    }

    private func methods() async throws(ConformanceFailure) -> String? {
        let methods: [HTTPMethod] = [.get, .head, .post, .put, .patch, .delete, .options, "PURGE"]
        for (index, method) in methods.enumerated() {
            let target = "/echo?method=\(index)"
            let body = [.post, .put, .patch].contains(method) ? Data("body of \(method)".utf8) : nil
            let what = "\(method) \(target)"
            let response = try await response(HTTPRequest(method: method, url: server.url(target), body: body), what)
            let arrived = try await arrived(target, what)
            guard arrived.method == method.rawValue else {
                throw ConformanceFailure("\(what) arrived as \(arrived.method)")
            }
            if let body, arrived.body != body {
                throw ConformanceFailure("\(what): its \(body.count)-byte body arrived as \(arrived.body.count) bytes")
            }
            guard response.status == 200 else {
                throw ConformanceFailure("\(what): expected status 200, got \(response.status)")
            }
            if method == .head {
                guard response.body.isEmpty else {
                    throw ConformanceFailure("HEAD returned a body of \(response.body.count) bytes; it has none")
                }
            } else if response.body != arrived.echo {
                throw ConformanceFailure(
                    "\(what): the response body (\(response.body.count) bytes) is not what the server sent "
                        + "(\(arrived.echo.count) bytes)")
            }
        }
        return nil
    }

    private func requestBodies() async throws(ConformanceFailure) -> String? {
        let bodies: [(String, Data)] = [
            ("empty", Data()), ("small", Data("a small body".utf8)), ("binary (all 256 byte values)", Data(0...255)),
            ("8 MB", ConformancePattern.bytes(count: 8 << 20)),
        ]
        var chunked: [String] = []
        for (index, (name, body)) in bodies.enumerated() {
            let target = "/echo?body=\(index)"
            let what = "POST \(target) with the \(name) body"
            let request = HTTPRequest(
                method: .post, url: server.url(target), headers: ["Content-Type": "application/octet-stream"],
                body: body)
            let response = try await response(request, what)
            let arrived = try await arrived(target, what)
            if let problem = Self.framingProblem(arrived, what) { throw problem }
            guard arrived.body == body else {
                let offset = ConformancePattern.firstDifference(arrived.body, body)
                throw ConformanceFailure(
                    "\(what): \(arrived.body.count) of \(body.count) bytes arrived, differing from byte \(offset)")
            }
            switch arrived.framing {
            case .contentLength(let length) where length == body.count: break
            case .none where body.isEmpty: break
            case .chunked: chunked.append(name)
            case .contentLength(let length):
                throw ConformanceFailure("\(what): Content-Length \(length) for \(body.count) bytes")
            case .none:
                throw ConformanceFailure("\(what): sent with neither Content-Length nor chunked framing")
            }
            guard response.status == 200 else {
                throw ConformanceFailure("\(what): expected status 200, got \(response.status)")
            }
        }
        // A body the caller did not label arrives unlabelled: a type the transport makes up (a
        // form type, as FoundationNetworking adds to a POST) changes how the server reads it.
        let unlabelled = HTTPRequest(method: .post, url: server.url("/echo?body=unlabelled"), body: Data("a=1&b=2".utf8))
        let what = "POST /echo?body=unlabelled with a body and no Content-Type"
        _ = try await response(unlabelled, what)
        let arrived = try await arrived("/echo?body=unlabelled", what)
        if let added = arrived.headers.values(for: "Content-Type").first {
            throw ConformanceFailure("\(what): arrived with Content-Type \(added), which the request did not have")
        }
        let framing = try await ownLengthThatLies()
        return ([framing] + (chunked.isEmpty ? [] : ["sent chunked: \(chunked.joined(separator: ", "))"]))
            .joined(separator: "; ")
    }

    /// A request whose own `Content-Length` (3) disagrees with its 10-byte body: refused, or sent
    /// framed by the body itself; never under the wrong length, which makes the server read the
    /// rest of the body as the next request on the connection.
    private func ownLengthThatLies() async throws(ConformanceFailure) -> String {
        let target = "/echo?body=own-length"
        let body = Data("0123456789".utf8)
        var request = HTTPRequest(method: .post, url: server.url(target), body: body)
        request.headers["Content-Length"] = "3"
        let what = "POST \(target), 10 bytes under its own Content-Length: 3"
        let outcome = await send(request).0
        let received = server.events.first { $0.kind == .requestReceived && $0.request?.target == target }?.request
        switch outcome {
        case .stillRunning: throw ConformanceFailure("\(what): no result within \(hangLimit) (a hang)")
        case .failure where received == nil: return "a request whose own Content-Length disagrees with its body: refused"
        case .failure, .response:
            let arrived: ConformanceRequest
            if let received { arrived = received } else { arrived = try await self.arrived(target, what) }
            if let problem = Self.framingProblem(arrived, what) { throw problem }
            guard arrived.body == body else {
                throw ConformanceFailure(
                    "\(what): the server read \(arrived.body.count) of its 10 bytes as the body (the rest is read as the "
                        + "next request on the connection): refuse such a request or frame the body by its own length")
            }
            return "a request whose own Content-Length disagrees with its body: sent framed by the body's length"
        }
    }

    /// What is invalid in how `request` framed its body: both `Content-Length` and
    /// `Transfer-Encoding` (RFC 9112 §6.2 forbids a sender to send both; a proxy and a server that
    /// read them differently are how requests are smuggled), a blank `Transfer-Encoding`, or more
    /// than one `Content-Length`.
    static func framingProblem(_ request: ConformanceRequest, _ what: String) -> ConformanceFailure? {
        let codings = request.headers.values(for: "Transfer-Encoding")
        let lengths = request.headers.values(for: "Content-Length")
        if !codings.isEmpty, !lengths.isEmpty {
            return ConformanceFailure(
                "\(what): sent with both Content-Length and Transfer-Encoding (RFC 9112 §6.2 forbids it: "
                    + "it is how requests are smuggled)")
        }
        if codings.contains(where: { $0.allSatisfy { $0 == " " || $0 == "\t" } }) {
            return ConformanceFailure("\(what): sent with a blank Transfer-Encoding field")
        }
        if lengths.count > 1 { return ConformanceFailure("\(what): sent with \(lengths.count) Content-Length fields") }
        return nil
    }

    private func requestHeaders() async throws(ConformanceFailure) -> String? {
        let value = #"text/plain; q=0.5, a="quoted, value"; path=/x?y=1&z=%20 ~!*'()[]{}<>@\|^`#$"#
        var headers = HTTPHeaders()
        headers.add(name: "X-Repeat", value: "first")
        headers.add(name: "X-Repeat", value: "second")
        headers.add(name: "X-MiXeD-CaSe", value: "yes")
        headers.add(name: "X-Value", value: value)
        let target = "/echo?headers"
        _ = try await response(HTTPRequest(url: server.url(target), headers: headers), "GET \(target)")
        let arrived = try await arrived(target, "GET \(target)")
        let repeated = arrived.headers.values(for: "X-Repeat")
        var details: [String] = []
        switch repeated {
        case ["first", "second"]: details.append("a repeated field arrived as two fields")
        case ["first, second"]: details.append("a repeated field arrived joined with \", \"")
        default:
            throw ConformanceFailure(
                "two X-Repeat fields (first, second) arrived as \(repeated): expected two fields or one "
                    + "joined with \", \"")
        }
        guard let mixed = arrived.headers.first(where: { $0.name.lowercased() == "x-mixed-case" }) else {
            throw ConformanceFailure("the field X-MiXeD-CaSe did not arrive")
        }
        guard mixed.value == "yes" else { throw ConformanceFailure("X-MiXeD-CaSe arrived with another value") }
        details.append(mixed.name == "X-MiXeD-CaSe" ? "names keep their casing" : "names arrive as \(mixed.name)")
        guard arrived.headers["X-Value"] == value else {
            throw ConformanceFailure("an ASCII value with punctuation arrived altered in X-Value")
        }
        return details.joined(separator: "; ")
    }

    private func responseHeaders() async throws(ConformanceFailure) -> String? {
        let response = try await response(HTTPRequest(url: server.url("/repeat-header")), "GET /repeat-header")
        let values = response.headers.values(for: "x-multi")
        let split = values.flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        guard split == ["one", "two"] else {
            throw ConformanceFailure(
                "two X-Multi fields (one, two) were read back as \(values): both values must be readable, as "
                    + "two fields or joined with \",\"")
        }
        guard response.headers["X-MIXED-case-name"] == "yes", response.headers["x-mixed-case-name"] == "yes" else {
            throw ConformanceFailure("X-Mixed-CASE-Name is not found by a lookup in another case")
        }
        return values.count == 2 ? "repeated fields came back as two fields" : "repeated fields came back joined"
    }

    private func statusCodes() async throws(ConformanceFailure) -> String? {
        for status in [200, 201, 204, 301, 400, 401, 404, 418, 500, 503] {
            let what = "GET /status/\(status)" + (status == 301 ? " (without Location)" : "")
            let response = try await response(HTTPRequest(url: server.url("/status/\(status)")), what)
            guard response.status == status else {
                throw ConformanceFailure("\(what): got status \(response.status)")
            }
            let expected = status == 204 ? Data() : Data("status \(status)".utf8)
            guard response.body == expected else {
                throw ConformanceFailure(
                    "\(what): the body has \(response.body.count) bytes, the server sent \(expected.count)")
            }
        }
        return nil
    }

    private func largeResponse() async throws(ConformanceFailure) -> String? {
        for (count, chunked) in [(16 << 20, false), (1 << 20, true)] {
            let target = "/bytes?count=\(count)" + (chunked ? "&chunked=1" : "")
            let what = "GET \(target) (\(chunked ? "chunked" : "Content-Length"))"
            let body = try await response(HTTPRequest(url: server.url(target)), what).body
            let expected = ConformancePattern.bytes(count: count)
            guard body == expected else {
                let offset = ConformancePattern.firstDifference(body, expected)
                throw ConformanceFailure(
                    "\(what): \(body.count) of \(count) bytes came back, differing from byte \(offset)")
            }
        }
        return nil
    }

    private func responseSizeLimit() async throws(ConformanceFailure) -> String? {
        let limit = 1 << 20
        let what = "GET /bytes?count=\(64 << 20) with maxResponseSize \(limit)"
        let request = HTTPRequest(url: server.url("/bytes?count=\(64 << 20)"), maxResponseSize: limit)
        let (result, elapsed) = await send(request, within: options.promptness)
        guard case .failure(.responseTooLarge(limit: limit)) = result else {
            throw ConformanceFailure(
                "\(what): expected .responseTooLarge(limit: \(limit)) within \(options.promptness), got "
                    + "\(result.summary)")
        }
        guard let connection = server.events.first(where: { $0.path == "/bytes" })?.connection else {
            throw ConformanceFailure("\(what): the server never received it")
        }
        try await expectClosed(connection: connection, after: "\(what) failed as it should after \(elapsed)")
        return nil
    }

    private func timeout(path: String, what answer: String) async throws(ConformanceFailure) -> String? {
        let timeout: Duration = .seconds(1)
        let what = "GET \(path) (\(answer)) with a 1 s timeout"
        let bound = timeout + options.promptness
        // A response first, so that the wait can be on a connection the transport keeps: on Linux
        // FoundationNetworking spins a core while a request waits on a connection it has just
        // opened (Docs/Reliability.md), and what is checked here is the request's deadline, not
        // the connection's age. A transport that opens a connection per request waits on a new one.
        _ = await send(HTTPRequest(url: server.url("/bytes?count=1")))
        let (result, elapsed) = await send(HTTPRequest(url: server.url(path), timeout: timeout), within: bound)
        guard case .failure(.timedOut) = result else {
            throw ConformanceFailure("\(what): expected .timedOut within \(bound), got \(result.summary)")
        }
        guard elapsed >= timeout - .milliseconds(50) else {
            throw ConformanceFailure("\(what): timed out after \(elapsed), before the timeout")
        }
        guard let connection = server.events.first(where: { $0.path == path })?.connection else {
            throw ConformanceFailure("\(what): the server never received it")
        }
        try await expectClosed(connection: connection, after: "\(what) timed out after \(elapsed)")
        return nil
    }

    private func cancellation() async throws(ConformanceFailure) -> String? {
        let task = start(HTTPRequest(url: server.url("/stall")))
        // Wait for the server to have the request, or for the call to end without it (a refused
        // connection, say): then there is nothing to cancel, and no reason to wait any longer.
        let server = server
        let waiting = Task { await server.event(within: hangLimit) { $0.kind == .requestReceived && $0.path == "/stall" } }
        Task {
            _ = await task.result
            waiting.cancel()
        }
        guard let received = await waiting.value else {
            task.cancel()
            let ended = await Self.result(of: task, within: options.promptness)
            throw ConformanceFailure("GET /stall never reached the server (the call ended with \(ended.summary))")
        }
        let what = "GET /stall, cancelled once the server had it"
        let claim = transport.honorsCancellation ? " (the transport says it honors cancellation)" : ""
        task.cancel()
        let start = ContinuousClock.now
        let result = await Self.result(of: task, within: options.promptness)
        let elapsed = ContinuousClock.now - start
        guard case .failure(.cancelled) = result else {
            throw ConformanceFailure(
                "\(what): expected .cancelled within \(options.promptness), got \(result.summary)\(claim)")
        }
        try await expectClosed(connection: received.connection, after: "\(what) ended with .cancelled after \(elapsed)")
        return transport.honorsCancellation
            ? nil
            : "it ends promptly when cancelled: its honorsCancellation could return true, saving a task per attempt"
    }
}

extension ConformancePattern {
    /// The offset of the first byte where `a` and `b` differ (compared 64 KiB at a time), or the
    /// shorter length when one is a prefix of the other.
    static func firstDifference(_ a: Data, _ b: Data) -> Int {
        let a = a.startIndex == 0 ? a : Data(a)
        let b = b.startIndex == 0 ? b : Data(b)
        let shorter = min(a.count, b.count)
        var block = 0
        while block < shorter {
            let end = min(block + 65536, shorter)
            if a[block..<end] != b[block..<end] {
                for index in block..<end where a[index] != b[index] { return index }
            }
            block = end
        }
        return shorter
    }
}
