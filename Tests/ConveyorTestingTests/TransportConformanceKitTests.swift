import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The kit proves something only if it catches broken transports, by name.
@Suite struct TransportConformanceKitTests {
    static let healthy = URLSessionTransport(configuration: .ephemeral)

    func failure(_ outcome: TransportConformance.Outcome) -> String? {
        if case .failed(let message) = outcome.status { return message }
        return nil
    }

    @Test func aTransportThatCutsLargeBodiesShortFails() async {
        let outcome = await TransportConformance.run(.largeResponse, on: HalvingTransport(inner: Self.healthy))
        let message = failure(outcome)
        #expect(message?.contains("8388608 of 16777216 bytes came back") == true, "\(outcome)")
        #expect(!outcome.isConforming)
    }

    @Test func aTransportThatTurnsAConnectionClosedMidBodyIntoSuccessFails() async {
        let outcome = await TransportConformance.run(.closeMidBody, on: ErrorSwallowingTransport(inner: Self.healthy))
        #expect(failure(outcome)?.contains("a truncated body must be an error") == true, "\(outcome)")
    }

    @Test func aTransportThatForwardsCredentialsAcrossOriginsFailsWithoutPrintingThem() async {
        let outcome = await TransportConformance.run(.crossOriginRedirect, on: ForwardingTransport())
        let message = failure(outcome) ?? ""
        #expect(
            message.contains("forwarded Authorization, Cookie, X-API-Key, X-Conformance-Credential"), "\(outcome)")
        for secret in ["conformance-token", "conformance-cookie", "conformance-key", "conformance-credential-"] {
            #expect(!outcome.description.contains(secret), "\(outcome)")
        }
    }

    @Test func aTransportThatIgnoresCancellationFails() async {
        let outcome = await TransportConformance.run(
            .cancellation, on: CancellationIgnoringTransport(inner: Self.healthy),
            options: .init(promptness: .seconds(1)))
        #expect(
            failure(outcome)?.contains("expected .cancelled within 1.0 seconds, got no result") == true, "\(outcome)")
    }

    @Test func aKnownIssueThatShowsConformsAndOneThatNoLongerShowsAsksToRemoveTheMark() async {
        let issue = TransportConformance.KnownIssue(reason: "swallows errors", reference: "test#1")
        let options = TransportConformance.Options(knownIssues: [.closeMidBody: issue])

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

    @Test func runAllReportsEveryCheckInOrder() async {
        let outcomes = await TransportConformance.runAll(on: ErrorSwallowingTransport(inner: Self.healthy))
        #expect(outcomes.map(\.check) == TransportConformance.Check.allCases)
        #expect(outcomes.first { $0.check == .connectionRefused }?.isConforming == false)
        #expect(outcomes.first { $0.check == .methods }?.isConforming == true)
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

final class RefusingRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
