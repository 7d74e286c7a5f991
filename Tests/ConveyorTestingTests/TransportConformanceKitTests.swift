import ConveyorTestSupport
import ConveyorTesting
import ConveyorTransportConformance
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The kit proves something only if it catches broken transports, by name.
@Suite struct TransportConformanceKitTests {
    static let healthy = URLSessionTransport(configuration: .ephemeral)
    /// A loaded machine (the sanitizer, the whole suite on two cores) can take a minute for a
    /// one-second check: only a hang should fail one, and "promptly" is as generous as in the
    /// suites that run every check (none of the failures these tests expect is about time).
    static let options = TransportConformance.Options(promptness: promptness, hangLimit: kitHangLimit)

    func failure(_ outcome: TransportConformance.Outcome) -> String? {
        if case .failed(let message) = outcome.status { return message }
        return nil
    }

    @Test func aTransportThatCutsLargeBodiesShortFails() async {
        // 16 MiB bodies in this process: not while a test measures its memory.
        let outcome = await MemoryGate.withTurn {
            await TransportConformance.run(
                .largeResponse, on: HalvingTransport(inner: Self.healthy), options: Self.options)
        }
        let message = failure(outcome)
        #expect(message?.contains("8388608 of 16777216 bytes came back") == true, "\(outcome)")
        #expect(!outcome.isConforming)
    }

    @Test func aTransportThatTurnsAConnectionClosedMidBodyIntoSuccessFails() async {
        let outcome = await TransportConformance.run(
            .closeMidBody, on: ErrorSwallowingTransport(inner: Self.healthy), options: Self.options)
        #expect(failure(outcome)?.contains("a truncated body must be an error") == true, "\(outcome)")
    }

    @Test func aTransportThatForwardsCredentialsAcrossOriginsFailsWithoutPrintingThem() async {
        let outcome = await TransportConformance.run(
            .crossOriginRedirect, on: ForwardingTransport(), options: Self.options)
        let message = failure(outcome) ?? ""
        #expect(
            message.contains("forwarded Authorization, Cookie, X-API-Key, X-Conformance-Credential"), "\(outcome)")
        for secret in ["conformance-token", "conformance-cookie", "conformance-key", "conformance-credential-"] {
            #expect(!outcome.description.contains(secret), "\(outcome)")
        }
    }

    @Test func aTransportThatForwardsTheCallersHostToAnotherOriginFails() async {
        let outcome = await TransportConformance.run(
            .crossOriginRedirect, on: CookiePassingTransport(keepsHost: true), options: Self.options)
        #expect(failure(outcome)?.contains("the caller's Host names the first origin") == true, "\(outcome)")
    }

    @Test func aTransportThatLetsARedirectTargetSetCookiesFails() async {
        let outcome = await TransportConformance.run(
            .crossOriginRedirect, on: CookiePassingTransport(), options: Self.options)
        #expect(failure(outcome)?.contains("delivered the other origin's Set-Cookie") == true, "\(outcome)")
    }

    @Test func aTransportThatIgnoresCancellationFails() async {
        let outcome = await TransportConformance.run(
            .cancellation, on: CancellationIgnoringTransport(inner: Self.healthy),
            options: .init(promptness: .seconds(1), hangLimit: kitHangLimit))
        #expect(
            failure(outcome)?.contains("expected .cancelled within 1.0 seconds, got no result") == true, "\(outcome)")
    }

    @Test func aKnownIssueThatShowsConformsAndOneThatNoLongerShowsAsksToRemoveTheMark() async {
        let issue = TransportConformance.KnownIssue(reason: "swallows errors", reference: "test#1")
        let options = TransportConformance.Options(hangLimit: kitHangLimit, knownIssues: [.closeMidBody: issue])

        let shows = await TransportConformance.run(
            .closeMidBody, on: ErrorSwallowingTransport(inner: Self.healthy), options: options)
        guard case .knownIssue(issue, let observed) = shows.status else {
            Issue.record("expected a known issue, got \(shows)")
            return
        }
        #expect(observed.contains("truncated body"))
        #expect(shows.isConforming)

        let fixed = await TransportConformance.run(.closeMidBody, on: Self.healthy, options: options)
        #expect(fixed.status == .knownIssueFixed(issue))
        #expect(!fixed.isConforming)
        #expect(fixed.description.contains("remove the mark"), "\(fixed)")
    }

    /// In process: URLSession would end the process on the half-sent response (Linux).
    @Test func runAllReportsEveryCheckInOrder() async {
        let outcomes = await MemoryGate.withTurn {  // the kit's server writes its large bodies in this process
            await TransportConformance.runAll(on: RefusingTransport(), options: Self.options)
        }
        #expect(outcomes.map(\.check) == TransportConformance.Check.allCases)
        #expect(outcomes.first { $0.check == .connectionRefused }?.isConforming == true)
        #expect(outcomes.first { $0.check == .halfSentResponse }?.isConforming == true)
        #expect(outcomes.first { $0.check == .methods }?.isConforming == false)
    }

    static let trap = "a deliberate trap for the conformance kit's tests"

    func inChild(_ check: TransportConformance.Check, _ transport: String, _ issue: TransportConformance.KnownIssue?)
        async throws -> TransportConformance.Outcome
    {
        let child = try #require(BuiltExecutable.url("conformance-child"))
        let options = TransportConformance.Options(
            hangLimit: kitHangLimit, knownIssues: issue.map { [check: $0] } ?? [:])
        return await TransportConformance.runInChildProcess(
            check, executable: child, arguments: [transport], options: options)
    }

    @Test func aChildThatTrapsFailsItsCheckWithTheSignalAndTheFatalError() async throws {
        let outcome = try await inChild(.methods, "trapping", nil)
        let message = failure(outcome) ?? ""
        #expect(message.contains("ended with signal"), "\(outcome)")
        #expect(message.contains(Self.trap), "\(outcome)")
    }

    @Test func aTrapMarkMatchesThatTrapAndNothingElse() async throws {
        let marked = TransportConformance.KnownIssue(reason: "traps", reference: "test#2", trap: Self.trap)
        let shows = try await inChild(.methods, "trapping", marked)
        guard case .knownIssue(marked, let observed) = shows.status else {
            Issue.record("expected the known trap, got \(shows)")
            return
        }
        #expect(observed.contains("signal"))

        let other = TransportConformance.KnownIssue(reason: "traps", reference: "test#3", trap: "another fatal error")
        let mismatch = try await inChild(.methods, "trapping", other)
        #expect(failure(mismatch)?.contains("this is not it") == true, "\(mismatch)")

        // A failure that is not a trap does not match a trap mark either.
        let swallowed = await TransportConformance.run(
            .closeMidBody, on: ErrorSwallowingTransport(inner: Self.healthy),
            options: .init(hangLimit: kitHangLimit, knownIssues: [.closeMidBody: marked]))
        #expect(failure(swallowed)?.contains("this is not it") == true, "\(swallowed)")
    }

    @Test func aTrapMarkThatNoLongerTrapsAsksToRemoveTheMark() async throws {
        let marked = TransportConformance.KnownIssue(reason: "used to trap", reference: "test#4", trap: Self.trap)
        let fixed = try await inChild(.methods, "urlsession-ephemeral", marked)
        #expect(fixed.status == .knownIssueFixed(marked), "\(fixed)")
        #expect(!fixed.isConforming)
    }

    /// A mark that names its failure excuses that failure and no other.
    @Test func aKnownIssueWithAFailureTextExcusesOnlyThatFailure() async {
        let matching = TransportConformance.KnownIssue(
            reason: "swallows errors", reference: "test#5", failure: "truncated body")
        let shows = await TransportConformance.run(
            .closeMidBody, on: ErrorSwallowingTransport(inner: Self.healthy),
            options: .init(hangLimit: kitHangLimit, knownIssues: [.closeMidBody: matching]))
        #expect(shows.isConforming, "\(shows)")
        let other = TransportConformance.KnownIssue(
            reason: "swallows errors", reference: "test#6", failure: "a different failure")
        let mismatch = await TransportConformance.run(
            .closeMidBody, on: ErrorSwallowingTransport(inner: Self.healthy),
            options: .init(hangLimit: kitHangLimit, knownIssues: [.closeMidBody: other]))
        #expect(failure(mismatch)?.contains("this is not it") == true, "\(mismatch)")
    }

    @Test func aChildThatCannotStartIsSkippedNotPassed() async {
        let outcome = await TransportConformance.runInChildProcess(
            .methods, executable: URL(fileURLWithPath: "/nonexistent/conformance-child"))
        guard case .skipped(let reason) = outcome.status else {
            Issue.record("expected skipped, got \(outcome)")
            return
        }
        #expect(reason.contains("could not start"))
        #expect(!outcome.isConforming)
    }
}

/// Refuses every connection.
struct RefusingTransport: HTTPTransport {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        throw URLError(.cannotConnectToHost)
    }
}

/// Returns the first half of every body over 1 MiB, as if the connection dropped and it did not notice.
struct HalvingTransport: HTTPTransport {
    let inner: any HTTPTransport
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var response = try await inner.send(request)
        if response.body.count > 1 << 20 { response.body = response.body.prefix(response.body.count / 2) }
        return response
    }
}

/// Turns every error into an empty 200.
struct ErrorSwallowingTransport: HTTPTransport {
    let inner: any HTTPTransport
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        do {
            return try await inner.send(request)
        } catch {
            return HTTPResponse(status: 200, request: request)
        }
    }
}

/// Awaits its work in a task that does not inherit cancellation.
struct CancellationIgnoringTransport: HTTPTransport {
    let inner: any HTTPTransport
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let inner = inner
        return try await Task { try await inner.send(request) }.value
    }
}

/// Follows redirects itself and sends every header on, credentials included, to any origin.
struct ForwardingTransport: HTTPTransport {
    let session = URLSession(configuration: .ephemeral, delegate: RefusingRedirects(), delegateQueue: nil)
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var current = request
        for _ in 0..<5 {
            let response = try await session.send(current)
            guard (300..<400).contains(response.status), let location = response.headers["Location"],
                let next = URL(string: location, relativeTo: current.url)
            else { return response }
            current.url = next.absoluteURL
        }
        return try await session.send(current)
    }
}

/// Follows redirects itself and drops every credential header on the way, but delivers the
/// last response's headers whole: what the `Set-Cookie` part of `crossOriginRedirect` must catch.
struct CookiePassingTransport: HTTPTransport {
    /// Whether the caller's `Host` goes to the other origin too.
    var keepsHost = false
    let session = URLSession(configuration: .ephemeral, delegate: RefusingRedirects(), delegateQueue: nil)
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var current = request
        for _ in 0..<5 {
            let response = try await session.send(current)
            guard (300..<400).contains(response.status), let location = response.headers["Location"],
                let next = URL(string: location, relativeTo: current.url)
            else { return response }
            current.url = next.absoluteURL
            current.headers = HTTPHeaders(
                request.headers.filter {
                    !request.sensitiveHeaders.contains($0.name) && (keepsHost || $0.name.lowercased() != "host")
                })
        }
        return try await session.send(current)
    }
}

final class RefusingRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

/// Says it streams, but ignores the transfer and collects every body itself (under the request's
/// in-memory limit): what `streamedTransfers` must catch.
struct BufferingStreamingTransport: StreamingHTTPTransport {
    let inner: URLSessionTransport
    func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        try await inner.send(request)
    }
}

extension TransportConformanceKitTests {
    @Test func aTransportThatClaimsToStreamButCollectsBodiesFails() async {
        let outcome = await MemoryGate.withTurn {
            await TransportConformance.run(
                .streamedTransfers, on: BufferingStreamingTransport(inner: Self.healthy), options: Self.options)
        }
        #expect(
            failure(outcome)?.contains("the body was not handed to the transfer as it arrived") == true, "\(outcome)")
    }

    @Test func aStreamingTransportStreamsBothWaysInTheKit() async {
        let outcome = await MemoryGate.withTurn {
            await TransportConformance.run(.streamedTransfers, on: Self.healthy, options: Self.options)
        }
        #expect(outcome.status == .passed, "\(outcome)")
        // In this process the memory is not the check's to measure: it says so.
        #expect(outcome.detail?.contains("memory not measured") == true, "\(outcome)")
    }
}

extension TransportConformanceKitTests {
    /// A transport that collects bodies instead of handing them to the transfer gives an event
    /// stream nothing to parse: the kit must say so rather than pass an empty stream.
    @Test func aTransportThatBuffersEventStreamsFailsAndAStreamingOnePasses() async {
        let buffering = await TransportConformance.run(
            .eventStreamReconnect, on: BufferingStreamingTransport(inner: Self.healthy), options: Self.options)
        // No event ever reaches the parser, so the check fails one of two ways, by how the
        // connections that the 1 s idle timeout ends add up: the stream ends empty, or it ends
        // with the timeout of its last connection (seen in 2 of 3 full runs under TSan, where a
        // buffered connection takes longer). Either way it names what went wrong; it never passes.
        let message = failure(buffering) ?? ""
        #expect(
            message.contains("the events were []") || message.contains("the stream ended with The request timed out"),
            "\(buffering)")
        let healthy = await TransportConformance.run(.eventStreamReconnect, on: Self.healthy, options: Self.options)
        #expect(healthy.status == .passed, "\(healthy)")
        let exit = await TransportConformance.run(.eventStreamExit, on: Self.healthy, options: Self.options)
        #expect(exit.status == .passed, "\(exit)")
    }
}

/// A streaming transport whose every request hangs, ignoring cancellation, until released.
struct HangingStreamingTransport: StreamingHTTPTransport {
    let stuck: Stuck
    func send(_ request: HTTPRequest, transfer: TransferHandler?) async throws -> HTTPResponse {
        await stuck.wait()
        throw URLError(.cancelled)
    }
}

extension TransportConformanceKitTests {
    /// The hang bound is the caller's: a hang fails the check at `hangLimit`, not at a fixed 60 s.
    @Test func aHangFailsTheCheckAtTheOptionsHangLimit() async {
        let stuck = Stuck()
        defer { stuck.release() }
        let started = ContinuousClock.now
        let outcome = await TransportConformance.run(
            .eventStreamReconnect, on: HangingStreamingTransport(stuck: stuck),
            options: .init(hangLimit: .milliseconds(300)))
        #expect(
            failure(outcome)?.contains("the stream did not end within 0.3 seconds (a hang)") == true, "\(outcome)")
        // Bounded below only: on a loaded machine the bound's timer may fire late, never early.
        #expect(ContinuousClock.now - started >= .milliseconds(300))
    }
}

/// Labels every unlabelled body as a form, as FoundationNetworking does to a POST.
struct FormLabellingTransport: HTTPTransport {
    let inner: any HTTPTransport
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var labelled = request
        if labelled.body != nil, !labelled.headers.contains("Content-Type") {
            labelled.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        }
        return try await inner.send(labelled)
    }
}

extension TransportConformanceKitTests {
    @Test func aTransportThatMakesUpAContentTypeFails() async {
        let (outcome, healthy) = await MemoryGate.withTurn {  // the check's 8 MB body
            let outcome = await TransportConformance.run(
                .requestBodies, on: FormLabellingTransport(inner: Self.healthy), options: Self.options)
            let healthy = await TransportConformance.run(.requestBodies, on: Self.healthy, options: Self.options)
            return (outcome, healthy)
        }
        #expect(
            failure(outcome)?.contains(
                "with a body and no Content-Type: arrived with Content-Type application/x-www-form-urlencoded") == true,
            "\(outcome)")
        #expect(healthy.status == .passed, "\(healthy)")
    }
}

/// Sends a request's header fields as they are through a bare data task, as URLSession does on
/// Linux: a `Content-Length` of the request's own goes out even when the body is longer.
struct VerbatimFramingTransport: HTTPTransport {
    let session = URLSession(configuration: .ephemeral)
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method.rawValue
        for field in request.headers { urlRequest.addValue(field.value, forHTTPHeaderField: field.name) }
        urlRequest.httpBody = request.body
        urlRequest.setValue(" ", forHTTPHeaderField: "Content-Type")  // no made-up form type
        let (data, response): (Data, HTTPURLResponse) = try await withCheckedThrowingContinuation { continuation in
            session.dataTask(with: urlRequest) { data, response, error in
                if let http = response as? HTTPURLResponse, error == nil {
                    continuation.resume(returning: (data ?? Data(), http))
                } else {
                    continuation.resume(throwing: error ?? URLError(.badServerResponse))
                }
            }.resume()
        }
        let http = response
        return HTTPResponse(status: http.statusCode, body: data, request: request)
    }
}

extension TransportConformanceKitTests {
    @Test func aTransportThatSendsARequestsOwnWrongLengthFails() async {
        let (outcome, healthy) = await MemoryGate.withTurn {  // the check's 8 MB body
            let outcome = await TransportConformance.run(
                .requestBodies, on: VerbatimFramingTransport(), options: Self.options)
            let healthy = await TransportConformance.run(.requestBodies, on: Self.healthy, options: Self.options)
            return (outcome, healthy)
        }
        #expect(failure(outcome)?.contains("the server read 3 of its 10 bytes as the body") == true, "\(outcome)")
        #expect(healthy.status == .passed, "\(healthy)")
        #expect(healthy.detail?.contains("disagrees with its body: refused") == true, "\(healthy)")
    }
}
