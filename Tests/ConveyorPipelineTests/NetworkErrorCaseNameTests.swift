import ConveyorPipeline
import Foundation
import Testing

@Suite struct NetworkErrorCaseNameTests {
    static let response = HTTPResponse(status: 500, body: Data("tok-3f9a-SECRET".utf8), request: HTTPRequest(url: URL(string: "https://api.test/x?key=apikey-SECRET")!))

    /// One value of every case, with payloads that carry secrets.
    static let everyCase: [(NetworkError, String)] = [
        (.invalidRequest("header 'X' carries pw-SECRET"), "invalidRequest"),
        (.behaviorFailed(behavior: "Auth", hook: .modify, underlying: URLError(.badURL)), "behaviorFailed"),
        (.unacceptableStatus(response), "unacceptableStatus"),
        (.decodingFailed(response, underlying: URLError(.cannotDecodeContentData)), "decodingFailed"),
        (.timedOut, "timedOut"), (.responseTooLarge(limit: 1), "responseTooLarge"), (.offline, "offline"),
        (.connectionFailed(URLError(.cannotConnectToHost)), "connectionFailed"), (.cancelled, "cancelled"),
        (.tooManyRedirects, "tooManyRedirects"), (.transportFailed(URLError(.unknown)), "transportFailed"),
        (.fileFailed(file: "pw-SECRET.txt", underlying: URLError(.unknown)), "fileFailed"),
        (.notRetryable(after: .offline, reason: "pw-SECRET"), "notRetryable"),
    ]

    @Test func everyCaseHasItsOwnShortNameWithoutItsPayload() {
        for (error, name) in Self.everyCase {
            #expect(error.name == name)
            // The kind's static member matches it, and is the only kind that does.
            let kinds: [NetworkError] = [
                .invalidRequest, .behaviorFailed, .unacceptableStatus, .decodingFailed, .timedOut, .responseTooLarge,
                .offline, .connectionFailed, .cancelled, .tooManyRedirects, .transportFailed, .fileFailed, .notRetryable,
            ]
            #expect(kinds.filter { $0 ~= error }.map(\.name) == [name])
        }
        #expect(Set(Self.everyCase.map { $0.0.name }).count == Self.everyCase.count)
        #expect(Self.everyCase.allSatisfy { !$0.0.name.contains("SECRET") })
    }

    /// A head kept by a failure after it (a dropped stream) is readable, and changes nothing
    /// else: not the status, not `==`, not the pattern match, not the description.
    @Test func aKeptHeadChangesNothingButResponseHead() {
        let head = HTTPResponse(
            status: 200, headers: ["Set-Cookie": "s=pw-SECRET"], body: Data("pw-SECRET".utf8),
            request: HTTPRequest(url: URL(string: "https://api.test/feed")!))
        for (error, _) in Self.everyCase {
            let kept = error.afterHead(head)
            #expect(kept.responseHead?.status == 200)
            #expect(kept.responseHead?.headers["Set-Cookie"] == "s=pw-SECRET")
            #expect(kept.responseHead?.body.isEmpty == true)
            #expect(kept.status == error.status && kept.response == error.response)
            #expect(kept == error && error == kept)
            #expect(NetworkError(transportError: kept) == error)
            #expect("\(kept)" == "\(error)")
        }
        #expect(NetworkError.connectionFailed(URLError(.networkConnectionLost)).responseHead == nil)
        #expect(NetworkError.unacceptableStatus(Self.response).responseHead?.status == 500)
    }
}
