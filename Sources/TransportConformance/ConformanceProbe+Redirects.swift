import Conveyor
import ConveyorPipeline
import Foundation

/// Redirects and server faults.
extension ConformanceProbe {
    /// The name the kit adds to the sensitive header names of its requests.
    static let addedCredentialName = "X-Conformance-Credential"

    /// The sensitive header names of the kit's requests: the built-in ones and ``addedCredentialName``,
    /// carried by each request (``HTTPRequest/sensitiveHeaders``), as a client's would be.
    static let sensitive = SensitiveHeaders.standard.adding([addedCredentialName])

    /// A GET of `url` with `headers` and the kit's sensitive header names.
    static func carrying(_ headers: HTTPHeaders, to url: URL) -> HTTPRequest {
        var request = HTTPRequest(url: url, headers: headers)
        request.sensitiveHeaders = sensitive
        return request
    }

    /// One credential per kind, and a header that is not one. The values are made up, but are
    /// treated as secrets all the same: messages name the fields, never print them.
    private static func credentials() -> HTTPHeaders {
        [
            "Authorization": "Bearer conformance-token-5e1f",
            "Cookie": "session=conformance-cookie-9a2c",
            "X-API-Key": "conformance-key-77b0",
            addedCredentialName: "conformance-credential-d4e8",
            "X-Ordinary": "kept",
        ]
    }

    /// The credential fields of `sent` whose values arrived in `arrived` (in any field of that
    /// name, alone or joined with others).
    private static func forwarded(_ sent: HTTPHeaders, in arrived: ConformanceRequest) -> [String] {
        sent.filter { sensitive.contains($0.name) }.filter { field in
            arrived.headers.values(for: field.name).contains { $0.contains(field.value) }
        }.map(\.name)
    }

    func sameOriginRedirect() async throws(ConformanceFailure) -> String? {
        let headers = Self.credentials()
        let target = redirect(302, to: "/echo?from=same-origin")
        let what = "a same-origin 302"
        let response = try await response(Self.carrying(headers, to: server.url(target)), "GET \(target)")
        guard response.status == 200 else {
            throw ConformanceFailure("\(what) was not followed: got status \(response.status)")
        }
        let arrived = try await arrived("/echo?from=same-origin", what)
        let kept = Self.forwarded(headers, in: arrived)
        let dropped = headers.filter { Self.sensitive.contains($0.name) }.map(\.name).filter { !kept.contains($0) }
        guard dropped.isEmpty else {
            throw ConformanceFailure(
                "\(what) dropped \(dropped.joined(separator: ", ")): credentials stay with their origin, "
                    + "and this is the same origin")
        }
        guard arrived.headers["X-Ordinary"] == "kept" else { throw ConformanceFailure("\(what) dropped X-Ordinary") }
        return nil
    }

    func crossOriginRedirect() async throws(ConformanceFailure) -> String? {
        let headers = Self.credentials()
        for status in [302, 307] {
            let landing = "/echo?from=\(status)"
            let target = redirect(status, to: server.url(landing, listener: 1).absoluteString)
            let what = "a \(status) to another origin (port \(server.ports[1]) instead of \(server.ports[0]))"
            var request = Self.carrying(headers, to: server.url(target))
            // The caller's own Host, naming the first origin: it must not reach the other one.
            request.headers["Host"] = "127.0.0.1:\(server.ports[0])"
            let response = try await response(request, "GET \(target)")
            guard response.status == 200 else {
                throw ConformanceFailure("\(what) was not followed: got status \(response.status)")
            }
            let arrived = try await arrived(landing, listener: 1, what)
            let forwarded = Self.forwarded(headers, in: arrived)
            guard forwarded.isEmpty else {
                throw ConformanceFailure(
                    "\(what) forwarded \(forwarded.joined(separator: ", ")): every SensitiveHeaders name must be "
                        + "dropped on a redirect to another origin")
            }
            guard arrived.headers.values(for: "Host") == ["127.0.0.1:\(server.ports[1])"] else {
                throw ConformanceFailure(
                    "\(what) arrived with Host \(arrived.headers.values(for: "Host")): the caller's Host names the first "
                        + "origin and must be dropped with the credentials")
            }
            guard arrived.headers["X-Ordinary"] == "kept" else {
                throw ConformanceFailure("\(what) dropped X-Ordinary, which is not a credential")
            }
            let planting = redirect(status, to: server.url("/echo?cookie=1", listener: 1).absoluteString)
            let planted = try await self.response(HTTPRequest(url: server.url(planting)), "GET \(planting)")
            guard !planted.headers.contains("Set-Cookie") else {
                throw ConformanceFailure(
                    "\(what) delivered the other origin's Set-Cookie: the response is the asked URL's, and a "
                        + "redirect target may not set cookies for it")
            }
            try await cookieInBrokenOffHead(after: status)
        }
        return nil
    }

    /// The `Set-Cookie` the conformance server sets where a check asks it to.
    static let plantedCookie = "planted=conformance-7d1e; Path=/"

    /// A download redirected by `status` to another origin whose body breaks off after a head with
    /// a `Set-Cookie`: the behaviors see that head (a dropped stream's cookies count), without the
    /// cookie. A 307 sends a `POST` with a body, which a transport may follow itself.
    private func cookieInBrokenOffHead(after status: Int) async throws(ConformanceFailure) {
        guard transport is any StreamingHTTPTransport else { return }
        let target = redirect(status, to: server.url("/close-mid-body?cookie=1", listener: 1).absoluteString)
        let what = "a download redirected by \(status) to another origin whose body broke off"
        let jar = CookieJar()
        let client = NetworkClient(baseURL: server.url("/"), transport: transport) { CookieBehavior(jar: jar) }
        let request = Request<Void>(
            method: status == 307 ? .post : .get, path: server.url(target).absoluteString,
            body: status == 307 ? .data(Data("a body".utf8), contentType: "text/plain") : .none)
        let file = Self.scratchFile("redirected.bin")
        defer { try? FileManager.default.removeItem(at: file) }
        let ended = await Self.bounded(hangLimit) { try await client.download(request, to: file) }
        switch ended {
        case nil: throw ConformanceFailure("\(what): the download did not end within \(hangLimit) (a hang)")
        case .success: throw ConformanceFailure("\(what): the download succeeded with 100 of 1000 bytes")
        case .failure: break
        }
        guard jar.cookies.isEmpty else {
            throw ConformanceFailure(
                "\(what): the head the behaviors saw carried the other origin's Set-Cookie, and CookieBehavior "
                    + "stored it for the origin asked")
        }
    }

    func redirectMethods() async throws(ConformanceFailure) -> String? {
        let body = Data("a body that must survive 307 and 308".utf8)
        for status in [303, 307, 308] {
            let landing = "/echo?after=\(status)"
            let target = redirect(status, to: landing)
            let what = "POST with a body, redirected by \(status)"
            let request = HTTPRequest(
                method: .post, url: server.url(target), headers: ["Content-Type": "text/plain"], body: body)
            let response = try await response(request, what)
            guard response.status == 200 else {
                throw ConformanceFailure("\(what) was not followed: got status \(response.status)")
            }
            let arrived = try await arrived(landing, what)
            if status == 303 {
                guard arrived.method == "GET", arrived.body.isEmpty else {
                    throw ConformanceFailure(
                        "\(what) arrived as \(arrived.method) with \(arrived.body.count) bytes: 303 means GET, "
                            + "without the body")
                }
            } else {
                guard arrived.method == "POST", arrived.body == body else {
                    throw ConformanceFailure(
                        "\(what) arrived as \(arrived.method) with \(arrived.body.count) of \(body.count) bytes: "
                            + "\(status) keeps the method and the body")
                }
            }
        }
        return nil
    }

    func redirectLimit() async throws(ConformanceFailure) -> String? {
        let limit = options.maximumRedirects
        let allowed = "/redirect-chain?n=\(limit)&run=allowed"
        let response = try await response(
            HTTPRequest(url: server.url(allowed)), "a chain of \(limit) redirects (Options.maximumRedirects)")
        guard response.status == 200 else {
            throw ConformanceFailure(
                "a chain of \(limit) redirects (Options.maximumRedirects) ended with status \(response.status)")
        }
        let over = "/redirect-chain?n=\(limit + 1)&run=over"
        let (result, _) = await send(HTTPRequest(url: server.url(over)))
        guard case .failure(.tooManyRedirects) = result else {
            let followed = server.events.filter { $0.kind == .requestReceived && $0.request?.query["run"] == "over" }
            throw ConformanceFailure(
                "a chain of \(limit + 1) redirects: expected .tooManyRedirects, got \(result.summary) after "
                    + "\(max(0, followed.count - 1)) redirects were followed")
        }
        // The same through a client, whose validation would turn a delivered 3xx into
        // `.unacceptableStatus`: past the limit a request ends with `.tooManyRedirects` on every
        // path (a body in memory, and for a streaming transport a streamed body and a download).
        let client = client()
        let query: QueryParameters = ["n": limit + 1, "run": "client"]
        var paths: [(String, @Sendable () async throws -> Void)] = [
            ("send", { _ = try await client.send(Request<Data>(path: "/redirect-chain", query: query)) })
        ]
        if transport is any StreamingHTTPTransport {
            let file = Self.scratchFile("redirected.bin")
            paths.append(("stream", { _ = try await client.stream(Request<Data>(path: "/redirect-chain", query: query)).body.collect() }))
            paths.append(("download", {
                defer { try? FileManager.default.removeItem(at: file) }
                _ = try await client.download(Request<Data>(path: "/redirect-chain", query: query), to: file)
            }))
        }
        for (name, work) in paths {
            let outcome = await Self.bounded(hangLimit, work)
            guard case .failure(let error)? = outcome, NetworkError(transportError: error) == .tooManyRedirects else {
                let got =
                    switch outcome {
                    case nil: "no result within \(hangLimit) (a hang)"
                    case .success: "a success"
                    case .failure(let error)?: ConformanceResult.name(NetworkError(transportError: error))
                    }
                throw ConformanceFailure(
                    "a chain of \(limit + 1) redirects through NetworkClient.\(name): expected .tooManyRedirects, got \(got)")
            }
        }
        return nil
    }

    func closeMidBody() async throws(ConformanceFailure) -> String? {
        let (result, _) = await send(HTTPRequest(url: server.url("/close-mid-body")))
        switch result {
        case .failure(let error): return "ends with \(ConformanceResult.name(error))"
        case .response(let response):
            throw ConformanceFailure(
                "a connection closed after 100 of 1000 promised body bytes came back as a response (status "
                    + "\(response.status), \(response.body.count) bytes): a truncated body must be an error")
        case .stillRunning:
            throw ConformanceFailure("a connection closed mid-body: no result within \(hangLimit)")
        }
    }

    func garbageResponse() async throws(ConformanceFailure) -> String? {
        let (result, _) = await send(HTTPRequest(url: server.url("/garbage")))
        switch result {
        case .failure(.transportFailed), .failure(.connectionFailed):
            return result.summary
        default:
            throw ConformanceFailure(
                "bytes that are not HTTP: expected .transportFailed or .connectionFailed, got \(result.summary)")
        }
    }

    func connectionRefused() async throws(ConformanceFailure) -> String? {
        let url = URL(string: "http://127.0.0.1:\(server.refusingPort)/refused") ?? server.url("/refused")
        let (result, _) = await send(HTTPRequest(url: url))
        guard case .failure(.connectionFailed) = result else {
            throw ConformanceFailure(
                "a port nothing listens on: expected .connectionFailed, got \(result.summary)")
        }
        return nil
    }
}
