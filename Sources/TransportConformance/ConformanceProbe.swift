import Conveyor
import ConveyorPipeline
import Foundation

/// Runs one check: starts a server, runs the check's steps, stops the server.
enum ConformanceCheck {
    struct Found {
        var status: TransportConformance.Outcome.Status
        var detail: String?
    }

    static func run(
        _ check: TransportConformance.Check, on transport: any HTTPTransport, options: TransportConformance.Options
    ) async -> Found {
        let server: ConformanceServer
        do {
            server = try ConformanceServer.start()
        } catch {
            return Found(status: .skipped("\(error)"))
        }
        defer { server.stop() }
        let probe = ConformanceProbe(server: server, transport: transport, options: options)
        do {
            let detail = try await probe.run(check)
            return Found(status: .passed, detail: detail)
        } catch {
            return Found(status: .failed(error.message), detail: error.detail)
        }
    }
}

/// A check's verdict that the transport broke the contract.
struct ConformanceFailure: Error {
    let message: String
    var detail: String?
    init(_ message: String, detail: String? = nil) {
        self.message = message
        self.detail = detail
    }
}

/// What a call to the transport ended with.
enum ConformanceResult: Sendable {
    case response(HTTPResponse)
    /// The error as the client maps it.
    case failure(NetworkError)
    /// Still running at the bound; abandoned, never awaited.
    case stillRunning

    /// For messages: `status 200 with 12 bytes`, the error's safe description, or that it hung.
    var summary: String {
        switch self {
        case .response(let response): "a response, status \(response.status) with \(response.body.count) bytes"
        case .failure(let error): "the error \(Self.name(error))"
        case .stillRunning: "no result"
        }
    }

    /// `.timedOut`, `.connectionFailed(URLError(code: -1004))`: the case and its safe description.
    static func name(_ error: NetworkError) -> String {
        switch error {
        case .timedOut: ".timedOut"
        case .cancelled: ".cancelled"
        case .tooManyRedirects: ".tooManyRedirects"
        case .offline: ".offline"
        case .responseTooLarge: ".responseTooLarge(limit: \(error.limit ?? 0))"
        case .connectionFailed: ".connectionFailed (\(error))"
        case .transportFailed: ".transportFailed (\(error))"
        default: "\(error)"
        }
    }
}

/// The steps checks are made of: bounded calls to the transport, and the server's record.
struct ConformanceProbe {
    let server: ConformanceServer
    let transport: any HTTPTransport
    let options: TransportConformance.Options

    /// The bound for a call that should simply work: generous, it only catches hangs.
    var hangLimit: Duration { options.hangLimit }

    /// Starts `request` in a task of its own.
    func start(_ request: HTTPRequest) -> Task<HTTPResponse, any Error> {
        let transport = transport
        return Task { try await transport.send(request) }
    }

    /// Sends `request` and waits at most `limit` for it to end.
    func send(_ request: HTTPRequest, within limit: Duration? = nil) async -> (ConformanceResult, Duration) {
        let start = ContinuousClock.now
        let result = await Self.result(of: self.start(request), within: limit ?? hangLimit)
        return (result, ContinuousClock.now - start)
    }

    /// The task's result, or ``ConformanceResult/stillRunning`` once `limit` has passed (the task
    /// is then left to finish on its own: stopping the server ends its connection).
    static func result(of task: Task<HTTPResponse, any Error>, within limit: Duration) async -> ConformanceResult {
        let first = FirstOf<ConformanceResult>()
        Task {
            switch await task.result {
            case .success(let response): first.offer(.response(response))
            case .failure(let error): first.offer(.failure(NetworkError(transportError: error)))
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + limit.conformanceSeconds) {
            first.offer(.stillRunning)
        }
        return await first.value()
    }

    /// Sends `request` and requires a response.
    func response(_ request: HTTPRequest, _ what: String) async throws(ConformanceFailure) -> HTTPResponse {
        switch await send(request).0 {
        case .response(let response): return response
        case .stillRunning:
            throw ConformanceFailure("\(what): no result within \(hangLimit) (a hang)")
        case .failure(let error):
            throw ConformanceFailure("\(what): expected a response, got \(ConformanceResult.name(error))")
        }
    }

    /// The request the server received on `listener` with exactly this target.
    func arrived(_ target: String, listener: Int = 0, _ what: String) async throws(ConformanceFailure)
        -> ConformanceRequest
    {
        let event = await server.event(within: .seconds(1)) {
            $0.kind == .requestReceived && $0.listener == listener && $0.request?.target == target
        }
        guard let request = event?.request else {
            throw ConformanceFailure("\(what): the server never received \(target)")
        }
        return request
    }

    /// Waits (at most ``TransportConformance/Options/promptness``) for the client to close
    /// `connection`; throws naming `what` ended and what the server saw otherwise.
    func expectClosed(connection: Int, after what: String) async throws(ConformanceFailure) {
        let closed = await server.event(within: options.promptness) {
            $0.kind == .closedByClient && $0.connection == connection
        }
        guard closed == nil else { return }
        let written = server.events.contains { $0.kind == .responseWritten && $0.connection == connection }
        throw ConformanceFailure(
            "\(what), but the server's connection stayed open for \(options.promptness) afterwards"
                + (written ? " (the server had written the whole response)" : "")
                + ": the transfer was not stopped")
    }

    /// A target on this server for `/redirect`.
    func redirect(_ status: Int, to location: String) -> String {
        let encoded = location.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? location
        return "/redirect?status=\(status)&to=\(encoded)"
    }
}
