import Conveyor
import ConveyorTestSupport
import Foundation
import Testing

/// The framing table (Tests/Support/FramingCases.swift) over URLSession and the local server;
/// `AsyncHTTPClientFramingTests` holds AsyncHTTPClient to the same table.
@Suite struct FramingEndToEndTests {
    @Test func urlSessionAgreesWithTheTable() async throws {
        try await LocalServer.withServer { server in
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport())
            for (kind, expected) in FramingCases.expected {
                do throws(NetworkError) {
                    let response = try await client.send(Request<HTTPResponse>(path: "/framing/\(kind)"))
                    #expect(expected == "200", "\(kind): a response")
                    #expect(String(decoding: response.body, as: UTF8.self) == "ok")
                    if kind == "utf8" { #expect(response.headers["X-Odd"] == FramingCases.utf8Value) }
                } catch {
                    #expect(error.name == expected, "\(kind): \(error)")
                }
            }
        }
    }
}
