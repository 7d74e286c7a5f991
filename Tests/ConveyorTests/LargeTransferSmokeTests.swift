import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct LargeTransferSmokeTests {
    @Test func downloadWritesTheBody() async throws {
        try await LocalServer.withServer { server in
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport())
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let dest = dir.appendingPathComponent("out.bin")
            let done = try await client.download(Request<Data>(path: "/stream", query: ["bytes": 10_000_000]), to: dest)
            let size = try FileManager.default.attributesOfItem(atPath: dest.path)[.size] as? NSNumber
            #expect(size?.intValue == 10_000_000)
            #expect(done.response.status == 200)
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["out.bin"])
        }
    }

    @Test func streamDeliversChunks() async throws {
        try await LocalServer.withServer { server in
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport())
            let streamed = try await client.stream(Request<Data>(path: "/stream", query: ["bytes": 5_000_000]))
            var total = 0
            for try await chunk in streamed.body { total += chunk.count }
            #expect(total == 5_000_000)
        }
    }

    @Test func uploadFromFile() async throws {
        try await LocalServer.withServer { server in
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport())
            let file = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
            try Data("hello file".utf8).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let echo: Echo = try await client.send(Request<Echo>(method: .post, path: "/echo", body: .file(file, contentType: "text/plain")))
            #expect(echo.body == "hello file")
            #expect(echo.headers["content-type"] == "text/plain")
        }
    }
}
