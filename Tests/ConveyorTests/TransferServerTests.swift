import Conveyor
import ConveyorTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The test server's large-transfer routes (`/blob`, `/upload`), checked with plain requests, so
/// the download and upload tests can rely on them.
@Suite struct TransferServerTests {
    /// Every status comes back as a response; nothing is retried.
    func client(_ server: LocalServer) -> NetworkClient {
        NetworkClient(
            baseURL: server.baseURL, transport: URLSessionTransport(configuration: .ephemeral),
            configuration: .init(acceptableStatusCodes: Set(100..<600)))
    }

    func get(_ server: LocalServer, _ path: String, _ query: QueryParameters, headers: HTTPHeaders = [:]) async throws
        -> HTTPResponse
    {
        try await client(server).send(Request<HTTPResponse>(path: path, query: query, headers: headers))
    }

    /// Whether `body` is the blob's bytes from absolute offset `start` (byte i is i % 256).
    func isBlob(_ body: Data, from start: Int) -> Bool {
        body.enumerated().allSatisfy { $0.element == UInt8(truncatingIfNeeded: start + $0.offset) }
    }

    struct Upload: Decodable, Equatable {
        var bytes: Int
        var sha256: String
        var contentType: String?
        var chunked: Bool
    }

    struct Logged: Decodable, Equatable {
        var bytes: Int
        var sha256: String
        var status: Int
    }

    struct Log: Decodable { var log: [Logged] }
    struct Count: Decodable { var count: Int }
    struct Ranges: Decodable { var ranges: [String?] }

    /// The first 300,000 bytes of the blob pattern, and their SHA-256.
    let body = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0) })
    let bodySHA256 = "5576a58a474142a55f619be58eea2c14d7d7937cb99d5ef600a704fcde5ddbd8"

    @Test func blobIsDeterministicWithValidators() async throws {
        try await LocalServer.withServer { server in
            let response = try await get(server, "/blob", ["bytes": 200_000])
            #expect(response.status == 200)
            #expect(response.body.count == 200_000)
            #expect(isBlob(response.body, from: 0))
            #expect(response.headers["Content-Type"] == "application/octet-stream")
            #expect(response.headers["Accept-Ranges"] == "bytes")
            #expect(response.headers["ETag"] == #""blob-200000""#)
            #expect(response.headers["Last-Modified"] == "Mon, 01 Jan 2024 00:00:00 GMT")
        }
    }

    @Test func rangesAnswer206WithTheSlice() async throws {
        try await LocalServer.withServer { server in
            let tail = try await get(server, "/blob", ["bytes": 100_000], headers: ["Range": "bytes=1000-"])
            #expect(tail.status == 206)
            #expect(tail.headers["Content-Range"] == "bytes 1000-99999/100000")
            #expect(tail.body.count == 99_000)
            #expect(isBlob(tail.body, from: 1000))

            let middle = try await get(server, "/blob", ["bytes": 100_000], headers: ["Range": "bytes=300-309"])
            #expect(middle.status == 206)
            #expect(middle.headers["Content-Range"] == "bytes 300-309/100000")
            #expect(middle.body == Data((300..<310).map { UInt8(truncatingIfNeeded: $0) }))

            let beyond = try await get(server, "/blob", ["bytes": 100], headers: ["Range": "bytes=100-"])
            #expect(beyond.status == 416)
            #expect(beyond.headers["Content-Range"] == "bytes */100")
        }
    }

    @Test func ifRangeWithAnotherValidatorGetsTheWholeBody() async throws {
        try await LocalServer.withServer { server in
            let query: QueryParameters = ["bytes": 1000, "etag": #""v2""#]
            let stale = try await get(server, "/blob", query, headers: ["Range": "bytes=500-", "If-Range": #""v1""#])
            #expect(stale.status == 200)
            #expect(stale.headers["ETag"] == #""v2""#)
            #expect(stale.body.count == 1000)

            let current = try await get(server, "/blob", query, headers: ["Range": "bytes=500-", "If-Range": #""v2""#])
            #expect(current.status == 206)
            #expect(current.body.count == 500)
            #expect(isBlob(current.body, from: 500))
        }
    }

    @Test func norangeIgnoresRange() async throws {
        try await LocalServer.withServer { server in
            let response = try await get(
                server, "/blob", ["bytes": 1000, "norange": 1], headers: ["Range": "bytes=10-"])
            #expect(response.status == 200)
            #expect(response.headers["Accept-Ranges"] == nil)
            #expect(response.body.count == 1000)
        }
    }

    @Test func failatClosesMidBodyOnceThenTheRestCanBeResumed() async throws {
        try await LocalServer.withServer { server in
            let query: QueryParameters = ["bytes": 500_000, "failat": 123_457, "key": "resume"]
            await #expect(throws: NetworkError.self) {
                try await client(server).send(Request<Data>(path: "/blob", query: query))
            }
            let rest = try await get(server, "/blob", query, headers: ["Range": "bytes=123457-"])
            #expect(rest.status == 206)
            #expect(rest.headers["Content-Range"] == "bytes 123457-499999/500000")
            #expect(isBlob(rest.body, from: 123_457))

            let count = try await client(server).send(Request<Count>(path: "/blob/count", query: ["key": "resume"]))
            #expect(count.count == 2)
            let ranges = try await client(server).send(Request<Ranges>(path: "/blob/ranges", query: ["key": "resume"]))
            #expect(ranges.ranges == [nil, "bytes=123457-"])
        }
    }

    @Test func failAnswersTheStatusOnceWithRetryAfter() async throws {
        try await LocalServer.withServer { server in
            let query: QueryParameters = ["bytes": 10, "fail": 503, "key": "unavailable"]
            let first = try await get(server, "/blob", query)
            #expect(first.status == 503)
            #expect(first.headers["Retry-After"] == "0")
            let second = try await get(server, "/blob", query)
            #expect(second.status == 200)
            #expect(second.body == Data((0..<10).map { UInt8($0) }))
        }
    }

    @Test func slowChunksArriveWhole() async throws {
        try await LocalServer.withServer { server in
            let response = try await get(server, "/blob", ["bytes": 40, "chunk": 8, "delay": 1])
            #expect(response.status == 200)
            #expect(response.body == Data((0..<40).map { UInt8($0) }))
        }
    }

    @Test func uploadCountsAndHashesTheBody() async throws {
        try await LocalServer.withServer { server in
            let upload = try await client(server).send(
                Request<Upload>(
                    method: .put, path: "/upload", query: ["key": "plain"],
                    body: .data(body, contentType: "application/octet-stream")))
            #expect(
                upload
                    == Upload(
                        bytes: 300_000, sha256: bodySHA256, contentType: "application/octet-stream", chunked: false))
            let log = try await client(server).send(Request<Log>(path: "/upload/log", query: ["key": "plain"]))
            #expect(log.log == [Logged(bytes: 300_000, sha256: bodySHA256, status: 200)])
        }
    }

    @Test func uploadFailsOnceAfterReadingTheWholeBody() async throws {
        try await LocalServer.withServer { server in
            let request = Request<HTTPResponse>(
                method: .post, path: "/upload", query: ["key": "retried", "fail": 503],
                body: .data(body, contentType: nil))
            let first = try await client(server).send(request)
            #expect(first.status == 503)
            #expect(first.headers["Retry-After"] == "0")
            let second = try await client(server).send(request)
            #expect(second.status == 200)
            let log = try await client(server).send(Request<Log>(path: "/upload/log", query: ["key": "retried"]))
            #expect(
                log.log == [
                    Logged(bytes: 300_000, sha256: bodySHA256, status: 503),
                    Logged(bytes: 300_000, sha256: bodySHA256, status: 200),
                ])
        }
    }

    @Test func closeafterHangsUpMidUpload() async throws {
        try await LocalServer.withServer { server in
            let request = Request<Upload>(
                method: .post, path: "/upload", query: ["key": "cut", "closeafter": 100_000],
                body: .data(body, contentType: nil))
            await #expect(throws: NetworkError.self) { try await client(server).send(request) }
            let second = try await client(server).send(request)
            #expect(second.bytes == 300_000)
            let log = try await client(server).send(Request<Log>(path: "/upload/log", query: ["key": "cut"]))
            #expect(log.log.map(\.bytes) == [100_000, 300_000])
            #expect(log.log.map(\.status) == [0, 200])
        }
    }

    /// A body of unknown length goes out with chunked transfer coding, which the server decodes.
    /// (Sent with URLSession's body stream: `NetworkClient` sends a length when it knows one.)
    @Test func uploadDecodesAChunkedBody() async throws {
        try await LocalServer.withServer { server in
            var request = URLRequest(url: server.url("/upload?key=chunked"))
            request.httpMethod = "POST"
            request.httpBodyStream = InputStream(data: body)
            request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
            let (data, _) = try await URLSession(configuration: .ephemeral).data(for: request)
            let upload = try JSONDecoder().decode(Upload.self, from: data)
            #expect(
                upload
                    == Upload(
                        bytes: 300_000, sha256: bodySHA256, contentType: "application/octet-stream", chunked: true))
        }
    }
}
