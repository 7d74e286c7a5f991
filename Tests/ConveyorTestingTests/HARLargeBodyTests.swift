import ConveyorTesting
import Foundation
import Testing

#if os(Linux)
    import Glibc

    /// What recording a large response reads and keeps, counted exactly rather than measured: the
    /// body lives in an anonymous mapping whose pages exist only once something reads or writes
    /// them, so `mincore` tells which bytes the recorder read; what it keeps is its archive.
    @Suite struct HARLargeBodyTests {
        static let size = 200_000_000
        static let limit = 1 << 20
        static let page = Int(sysconf(Int32(_SC_PAGESIZE)))

        /// A 200 MB body of which only the first `textBytes` bytes were ever written (text); the
        /// rest reads as zero bytes, and a page of it exists only once it was read.
        static func lazyBody(textBytes: Int) throws -> (Data, UnsafeMutableRawPointer) {
            let base = try #require(
                mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0))
            try #require(base != MAP_FAILED)
            _ = madvise(base, size, MADV_NOHUGEPAGE)  // a touched byte makes one page, not 2 MB, exist
            base.initializeMemory(as: UInt8.self, repeating: UInt8(ascii: "a"), count: textBytes)
            let body = Data(
                bytesNoCopy: base, count: size, deallocator: .custom { pointer, count in munmap(pointer, count) })
            return (body, base)
        }

        /// How many pages of the body at or past `offset` exist (were read or written).
        static func pagesTouched(_ base: UnsafeMutableRawPointer, from offset: Int) -> Int {
            let first = offset / page
            var vector = [UInt8](repeating: 0, count: (size + page - 1) / page)
            guard mincore(base, size, &vector) == 0 else { return -1 }
            return vector[first...].filter { $0 & 1 != 0 }.count
        }

        /// A 200 MB response recorded with a 1 MiB limit: the recorder reads the limit and the
        /// redaction's 4 KiB of slack, not a page more, and keeps an archive of about the limit
        /// (text) or its base64 (bytes that are not text). The issue saw 45.7 MB of peak memory
        /// for this; whatever the allocator does, nothing here grows with the body.
        @Test(arguments: [true, false])
        func aLargeResponseIsReadAndKeptOnlyUpToTheLimit(text: Bool) async throws {
            let written = text ? Self.limit + 3 * Self.page : 0
            let (body, base) = try Self.lazyBody(textBytes: written)
            let mock = MockTransport()
            mock.enqueue(.response(status: 200, headers: ["Content-Type": "text/plain"], body: body))
            let recorder = HARRecorder(maxBodySize: Self.limit)
            let recording = HARRecordingTransport(wrapping: mock, recorder: recorder)
            let response = try await recording.send(
                HTTPRequest(
                    url: URL(string: "https://api.example/big")!, headers: ["Authorization": "Bearer tok-0d1e-SECRET"]),
                transfer: nil)
            #expect(response.body.count == Self.size)
            // Read: the limit, the preview's 4 KiB of slack, and the page each ends in.
            let readable = Self.limit + 4096 + Self.page
            #expect(Self.pagesTouched(base, from: max(written, readable)) == 0)
            // Kept: the entry, its body cut at the limit.
            let archive = try recorder.data()
            let bodyBytes = text ? Self.limit : (Self.limit + 2) / 3 * 4
            #expect(archive.count > bodyBytes)
            #expect(archive.count < bodyBytes + 4096)
            let json = try JSONSerialization.jsonObject(with: archive) as? [String: Any]
            let entry = ((json?["log"] as? [String: Any])?["entries"] as? [[String: Any]])?.first
            let content = (entry?["response"] as? [String: Any])?["content"] as? [String: Any]
            #expect(content?["comment"] as? String == "cut: the first \(Self.limit) of \(Self.size) bytes")
            #expect(content?["encoding"] as? String == (text ? nil : "base64"))
            withExtendedLifetime(response) {}
        }
    }
#endif
