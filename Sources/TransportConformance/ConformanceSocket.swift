#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

#if canImport(Glibc) || canImport(Darwin)
    /// The few POSIX socket calls the conformance server makes, with the Glibc/Darwin differences
    /// in one place. Every descriptor is close-on-exec, so a process the tests spawn never keeps a
    /// connection open after the server closed it.
    enum ConformanceSocket {
        struct Failure: Error, CustomStringConvertible {
            let description: String
            init(_ call: String) { description = "\(call) failed (errno \(errno))" }
        }

        /// A TCP socket bound to 127.0.0.1 on a free port; listening unless `listening` is false
        /// (a bound socket that does not listen refuses connections, and keeps its port taken).
        static func loopback(listening: Bool = true) throws -> (fd: Int32, port: Int) {
            #if canImport(Glibc)
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            #else
                let fd = socket(AF_INET, SOCK_STREAM, 0)
            #endif
            guard fd >= 0 else { throw Failure("socket") }
            prepare(fd)
            // No SO_REUSEADDR: a free port (port 0) needs none.
            var address = sockaddr_in()
            #if canImport(Darwin)
                address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
            #endif
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
            let size = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) }
            }
            guard bound == 0 else {
                let failure = Failure("bind(127.0.0.1:0)")
                close(fd)
                throw failure
            }
            if listening, listen(fd, 128) != 0 {
                let failure = Failure("listen")
                close(fd)
                throw failure
            }
            var actual = sockaddr_in()
            var length = size
            let named = withUnsafeMutablePointer(to: &actual) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard named == 0 else {
                let failure = Failure("getsockname")
                close(fd)
                throw failure
            }
            return (fd, Int(UInt16(bigEndian: actual.sin_port)))
        }

        /// Close-on-exec, and on Darwin no SIGPIPE (Linux passes `MSG_NOSIGNAL` to `send`).
        static func prepare(_ fd: Int32) {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            #if canImport(Darwin)
                var one: Int32 = 1
                _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
        }

        /// Accepts a connection, with Nagle's algorithm off (otherwise small responses wait for
        /// delayed ACKs). `nil` when the call fails.
        static func accept(_ listener: Int32) -> Int32? {
            let fd: Int32
            #if canImport(Glibc)
                fd = Glibc.accept(listener, nil, nil)
            #else
                fd = Darwin.accept(listener, nil, nil)
            #endif
            guard fd >= 0 else { return nil }
            prepare(fd)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            return fd
        }

        /// A pipe whose read end wakes the accept loop.
        static func pipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [0, 0]
            #if canImport(Glibc)
                guard Glibc.pipe(&fds) == 0 else { throw Failure("pipe") }
            #else
                guard Darwin.pipe(&fds) == 0 else { throw Failure("pipe") }
            #endif
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return (fds[0], fds[1])
        }

        /// Waits until one of `fds` is readable; returns the readable ones (empty on error).
        static func waitReadable(_ fds: [Int32]) -> [Int32] {
            var polls = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            while true {
                let count = poll(&polls, nfds_t(polls.count), -1)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return [] }
                return polls.filter { $0.revents != 0 }.map(\.fd)
            }
        }

        /// Reads what is available, at most `capacity` bytes: `nil` when the peer closed or the
        /// connection broke.
        static func receive(_ fd: Int32, capacity: Int = 65536) -> [UInt8]? {
            var buffer = [UInt8](repeating: 0, count: capacity)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, capacity, 0) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return nil }
                buffer.removeSubrange(count...)
                return buffer
            }
        }

        /// Writes every byte; `false` when the peer closed or the connection broke.
        static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
            #if canImport(Glibc)
                let flags = Int32(MSG_NOSIGNAL)
            #else
                let flags: Int32 = 0
            #endif
            var offset = 0
            while offset < bytes.count {
                let count =
                    bytes.baseAddress.map { base in
                        #if canImport(Glibc)
                            Glibc.send(fd, base + offset, bytes.count - offset, flags)
                        #else
                            Darwin.send(fd, base + offset, bytes.count - offset, flags)
                        #endif
                    } ?? 0
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }

        /// Wakes every call blocked on `fd` (they fail); the descriptor stays open.
        static func shutdown(_ fd: Int32) {
            #if canImport(Glibc)
                _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
            #else
                _ = Darwin.shutdown(fd, SHUT_RDWR)
            #endif
        }

        static func close(_ fd: Int32) {
            #if canImport(Glibc)
                _ = Glibc.close(fd)
            #else
                _ = Darwin.close(fd)
            #endif
        }

        static func write(_ fd: Int32, byte: UInt8) {
            var byte = byte
            #if canImport(Glibc)
                _ = Glibc.write(fd, &byte, 1)
            #else
                _ = Darwin.write(fd, &byte, 1)
            #endif
        }
    }
#endif
