@testable import Conveyor
import ConveyorTestSupport
import ConveyorTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Upload copies are private (0600, created exclusively), removed on every ending, swept when a
/// crashed process left them, and not made at all when the body is already in memory.
@Suite struct TemporaryFileTests {
    static var temporary: URL { FileManager.default.temporaryDirectory }

    /// The upload copies in the temporary directory whose content starts with `marker`.
    static func copies(startingWith marker: String) -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? []
        return names.filter { $0.hasPrefix(URLSessionTransport.uploadCopyPrefix) }.map {
            temporary.appendingPathComponent($0)
        }.filter { url in
            (try? Data(contentsOf: url)).map { $0.starts(with: Data(marker.utf8)) } ?? false
        }
    }

    static func mode(of url: URL) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: url.path))?[.posixPermissions] as? Int
    }

    /// A one-shot body: the marker, then (while the copy is being written) a look at the copy.
    static func body(_ marker: String, seen: Locked<[(URL, Int?)]>) -> RequestBody {
        let (chunks, feed) = AsyncStream<Data>.makeStream()
        feed.yield(Data(marker.utf8))
        return .stream(
            chunks.map { chunk in
                if chunk == Data(marker.utf8) {
                    feed.yield(Data(" and the rest".utf8))
                    feed.finish()
                } else {
                    let found = copies(startingWith: marker).map { ($0, mode(of: $0)) }
                    seen.withLock { $0 += found }
                }
                return chunk
            }, contentType: "text/plain")
    }

    @Test(arguments: ["/echo", "/status/500", "refused"])
    func aOneShotUploadsCopyIsPrivateAndGoneAfterwards(_ path: String) async throws {
        try await LocalServer.withServer { server in
            let marker = "private-\(UUID().uuidString)"
            let seen = Locked<[(URL, Int?)]>([])
            let base = path == "refused" ? URL(string: "http://127.0.0.1:9")! : server.baseURL
            let client = NetworkClient(baseURL: base, transport: URLSessionTransport(configuration: .ephemeral))
            _ = try? await client.send(
                Request<Data>(method: .put, path: path == "refused" ? "/echo" : path, body: Self.body(marker, seen: seen)))
            let during = seen.withLock { $0 }
            #expect(during.count == 1, "the copy was seen \(during.count) times while it was written")
            for (url, mode) in during {
                #expect(mode == 0o600, "mode \(String(mode ?? -1, radix: 8))")
                #expect(!FileManager.default.fileExists(atPath: url.path), "the copy outlived the request")
            }
        }
    }

    @Test func partsInMemoryAreSentFromMemoryAndPartsWithAFileAreCopied() throws {
        let small = try HTTPBodyStream(parts: [.data(Data("a".utf8)), .data(Data("b".utf8))])
        #expect(small.inMemory(upTo: URLSessionTransport.inMemoryUploadLimit) == Data("ab".utf8))
        let large = try HTTPBodyStream(parts: [.data(Data(count: 9 << 20))])
        #expect(large.inMemory(upTo: URLSessionTransport.inMemoryUploadLimit) == nil)
        let file = Self.temporary.appendingPathComponent("conveyor-test-part-\(UUID().uuidString)")
        try Data("x".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let mixed = try HTTPBodyStream(parts: [.data(Data("a".utf8)), .file(file)])
        #expect(mixed.inMemory(upTo: URLSessionTransport.inMemoryUploadLimit) == nil)
    }

    @Test func aMultipartFormInMemoryArrivesWithoutACopy() async throws {
        try await LocalServer.withServer { server in
            let marker = "in-memory-\(UUID().uuidString)"
            var form = MultipartForm(boundary: marker)
            form.append("secret", name: "password")
            let client = NetworkClient(baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral))
            let echo: Echo = try await client.send(Request<Echo>(method: .post, path: "/echo", body: .multipart(form)))
            #expect(echo.body.contains("secret"))
            #expect(Self.copies(startingWith: "--" + marker).isEmpty)
        }
    }

    @Test func oldCopiesAreSweptAndRecentOnesKept() throws {
        // The once-per-process sweep a transport's creation runs must have run before this test's
        // files exist: run beside a test that made the first transport, it swept the old copy
        // first and this sweep counted 0 (a CI run under the thread sanitizer).
        _ = URLSessionTransport.sweptOldCopies
        let old = Self.temporary.appendingPathComponent(URLSessionTransport.uploadCopyPrefix + "old-\(UUID().uuidString)")
        let recent = Self.temporary.appendingPathComponent(URLSessionTransport.uploadCopyPrefix + "new-\(UUID().uuidString)")
        try Data("x".utf8).write(to: old)
        try Data("y".utf8).write(to: recent)
        defer { try? FileManager.default.removeItem(at: recent) }
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-3 * 86_400)], ofItemAtPath: old.path)
        #expect(URLSessionTransport.sweepUploadCopies(olderThan: 86_400) >= 1)
        #expect(!FileManager.default.fileExists(atPath: old.path))
        #expect(FileManager.default.fileExists(atPath: recent.path))
    }
}
