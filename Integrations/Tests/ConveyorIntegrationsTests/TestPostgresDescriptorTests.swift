import Foundation
import IntegrationsTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The PostgreSQL server a test starts keeps no descriptor of the test process open: a pipe whose
/// write end the process held (without close-on-exec) when the server started reaches its end once
/// the process closes it. Before `postgres.sh` closed what it inherited, the server held such a
/// write end for as long as it ran, and an Integrations run hung at startup: LocalServer's probe
/// read its pipe to the end while `TestPostgres.start()` ran beside it.
@Suite struct TestPostgresDescriptorTests {
    @Test func aServerStartedByATestHoldsNoPipeOfTheTestProcess() async throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let (reader, writer) = (ends[0], ends[1])
        defer { close(reader) }
        let server = try await TestPostgres.start()
        close(writer)
        var poller = pollfd(fd: reader, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, 5_000)
        var byte: UInt8 = 0
        // Readable within 5 s, and what is read is the end (0 bytes), not data.
        #expect(ready == 1 && read(reader, &byte, 1) == 0, "the server holds the write end")
        await server.stop()
    }
}
