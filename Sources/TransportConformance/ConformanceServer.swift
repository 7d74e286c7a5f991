import ConveyorPipeline
import Foundation

/// A loopback HTTP/1.1 server for ``TransportConformance``, in Swift, so the kit needs nothing
/// but the package.
///
/// - Listens on 127.0.0.1 only, on **two** free ports: a redirect from the first to the second
///   is a redirect to another origin.
/// - One plain `Thread` accepts, one `Thread` serves each connection (keep-alive, Content-Length
///   and chunked request bodies, `Expect: 100-continue`); none of them ever runs on Swift's
///   cooperative pool, and async callers wait for events through continuations.
/// - Records what happened as ``ConformanceEvent``s: each request as it arrived (method,
///   target, every header field in order with its casing, the body), each connection the
///   client closed, each response written in full, so the kit can prove that a cancelled or
///   timed-out request really hung up.
/// - ``stop()`` wakes and closes every socket and returns at once; it joins nothing.
///
/// Routes: see ``ConformanceConnection``.
final class ConformanceServer: Sendable {
    /// The first port (the origin of the check) and the second (another origin).
    let ports: [Int]
    /// A port bound on 127.0.0.1 that does not listen: connecting to it is refused, and nothing
    /// else can take it while the server runs.
    let refusingPort: Int
    private let refusing: Int32
    private let listeners: [Int32]
    private let wake: (read: Int32, write: Int32)
    private let state = Locked(State())

    private struct State {
        var events: [ConformanceEvent] = []
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
        var nextConnection = 0
        /// Open connections, shut down by `stop()`. A connection's thread removes its descriptor
        /// here before it closes it, so `stop()` never touches a reused descriptor number.
        var open: Set<Int32> = []
        var stopped = false
    }

    private struct Waiter {
        let matches: @Sendable (ConformanceEvent) -> Bool
        let continuation: CheckedContinuation<ConformanceEvent?, Never>
    }

    /// Why the server cannot run.
    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    /// `http://127.0.0.1:<port>` for listener 0 or 1, followed by `pathAndQuery`.
    func url(_ pathAndQuery: String, listener: Int = 0) -> URL {
        // The string is built from an integer port and a path the kit writes; it always parses.
        URL(string: "http://127.0.0.1:\(ports[listener])\(pathAndQuery)") ?? URL(fileURLWithPath: "/")
    }

    private init(
        listeners: [Int32], ports: [Int], refusing: (fd: Int32, port: Int), wake: (read: Int32, write: Int32)
    ) {
        self.listeners = listeners
        self.ports = ports
        self.refusing = refusing.fd
        self.refusingPort = refusing.port
        self.wake = wake
    }

    /// Binds both ports and starts accepting. Returns at once (binding does not wait).
    /// - Throws: ``Unavailable`` when sockets cannot be used here.
    static func start() throws -> ConformanceServer {
        #if canImport(Glibc) || canImport(Darwin)
            var bound: [(fd: Int32, port: Int)] = []
            do {
                bound.append(try ConformanceSocket.loopback())
                bound.append(try ConformanceSocket.loopback())
                bound.append(try ConformanceSocket.loopback(listening: false))
                let wake = try ConformanceSocket.pipe()
                let server = ConformanceServer(
                    listeners: bound.prefix(2).map(\.fd), ports: bound.prefix(2).map(\.port), refusing: bound[2],
                    wake: wake)
                Thread.detachNewThread { server.acceptLoop() }
                return server
            } catch {
                for socket in bound { ConformanceSocket.close(socket.fd) }
                throw Unavailable(description: "the loopback server could not start: \(error)")
            }
        #else
            throw Unavailable(description: "the conformance server needs POSIX sockets (Glibc or Darwin)")
        #endif
    }

    /// Closes the listeners and every connection, and wakes every waiter with `nil`. Returns at
    /// once; the threads end on their own. Safe to call more than once.
    func stop() {
        // Under the lock, so no connection's thread closes its descriptor (and the number is
        // reused elsewhere) between reading the set and shutting it down; and only once: the
        // accept loop closes the wake pipe when it wakes, so a second write would hit whatever
        // reused the number.
        let waiters = state.withLock { state -> [Waiter]? in
            guard !state.stopped else { return nil }
            state.stopped = true
            #if canImport(Glibc) || canImport(Darwin)
                ConformanceSocket.write(wake.write, byte: 1)
                for fd in state.open { ConformanceSocket.shutdown(fd) }
            #endif
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters ?? [] { waiter.continuation.resume(returning: nil) }
    }

    deinit { stop() }

    var isStopped: Bool { state.withLock { $0.stopped } }

    // MARK: Events

    /// Every event so far, in order.
    var events: [ConformanceEvent] { state.withLock { $0.events } }

    /// The first event (recorded already or still to come) that `matches`, or `nil` when none
    /// arrives within `limit` (an upper bound for hang detection, never a wait for time to pass)
    /// or the server stops.
    func event(
        within limit: Duration, where matches: @escaping @Sendable (ConformanceEvent) -> Bool
    ) async -> ConformanceEvent? {
        let id = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ConformanceEvent?, Never>) in
                let found = state.withLock { state -> ConformanceEvent?? in
                    if let event = state.events.first(where: matches) { return .some(event) }
                    if state.stopped || Task.isCancelled { return .some(nil) }
                    state.waiters[id] = Waiter(matches: matches, continuation: continuation)
                    return nil
                }
                if let found { return continuation.resume(returning: found) }
                DispatchQueue.global().asyncAfter(deadline: .now() + limit.conformanceSeconds) { [self] in
                    resumeWaiter(id)
                }
            }
        } onCancel: {
            resumeWaiter(id)
        }
    }

    private func resumeWaiter(_ id: Int) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(returning: nil)
    }

    func record(_ event: ConformanceEvent) {
        let resumed = state.withLock { state -> [Waiter] in
            state.events.append(event)
            let matching = state.waiters.filter { $0.value.matches(event) }
            for id in matching.keys { state.waiters[id] = nil }
            return Array(matching.values)
        }
        for waiter in resumed { waiter.continuation.resume(returning: event) }
    }

    // MARK: Threads

    #if canImport(Glibc) || canImport(Darwin)
        private func acceptLoop() {
            defer {
                for fd in listeners { ConformanceSocket.close(fd) }
                ConformanceSocket.close(refusing)
                ConformanceSocket.close(wake.read)
                ConformanceSocket.close(wake.write)
            }
            while true {
                let ready = ConformanceSocket.waitReadable(listeners + [wake.read])
                if ready.isEmpty || ready.contains(wake.read) || isStopped { return }
                for listener in ready {
                    guard let fd = ConformanceSocket.accept(listener),
                        let index = listeners.firstIndex(of: listener)
                    else { continue }
                    let id = state.withLock { state -> Int? in
                        guard !state.stopped else { return nil }
                        state.nextConnection += 1
                        state.open.insert(fd)
                        return state.nextConnection
                    }
                    guard let id else {
                        ConformanceSocket.close(fd)
                        return
                    }
                    Thread.detachNewThread { [self] in
                        ConformanceConnection(fd: fd, id: id, listener: index, server: self).run()
                        state.withLock { _ = $0.open.remove(fd) }
                        ConformanceSocket.close(fd)
                    }
                }
            }
        }
    #endif
}

/// Something the conformance server saw.
struct ConformanceEvent: Sendable {
    enum Kind: Sendable, Equatable {
        /// A request arrived in full (``request`` holds it).
        case requestReceived
        /// The client closed the connection (or reset it) while the server read or wrote.
        case closedByClient
        /// A response was written in full.
        case responseWritten
    }

    let kind: Kind
    /// Which connection, numbered from 1 in the order they were accepted.
    let connection: Int
    /// 0 for the first port, 1 for the second (another origin).
    let listener: Int
    /// The path of the last request on the connection, or `""` before the first.
    let path: String
    /// The request, for ``Kind/requestReceived``.
    let request: ConformanceRequest?
    /// Response bytes written on the connection for its last request.
    let bytesWritten: Int
}

/// A request as the server read it off the wire.
struct ConformanceRequest: Sendable {
    /// How the body was framed.
    enum Framing: Sendable, Equatable {
        case none
        case contentLength(Int)
        case chunked
    }

    let method: String
    /// The request target as sent (`/echo?a=1`).
    let target: String
    let path: String
    let query: [String: String]
    /// Every field in order, with the casing it arrived in. Its `description` redacts credentials.
    let headers: HTTPHeaders
    let body: Data
    let framing: Framing
    /// For `/upload`: the body's length and whether it was the pattern from its start (the body
    /// itself is not kept).
    var uploaded: (count: Int, intact: Bool)? = nil
}

extension Duration {
    /// Seconds as a `Double`, for Dispatch deadlines; clamped to [0, 1 day].
    var conformanceSeconds: Double {
        let (seconds, attoseconds) = components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        return Swift.min(Swift.max(value, 0), 86_400)
    }
}
