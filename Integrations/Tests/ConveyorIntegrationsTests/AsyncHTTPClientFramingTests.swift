import Conveyor
import Foundation
import IntegrationsTestSupport
import Testing

/// The framing table (Tests/Support/FramingCases.swift) over AsyncHTTPClient and the local
/// server: the same outcomes as URLSession's (`FramingEndToEndTests`).
@Suite struct AsyncHTTPClientFramingTests {
    @Test func asyncHTTPClientAgreesWithTheTable() async throws {
        try await LocalServer.withServer { server in
            let client = try ahcClient(server)
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
