import Conveyor
import ConveyorPipeline
import Foundation

/// The checks of a hostile server: responses cut short, framed twice, or carrying bytes a header
/// may not hold. The contract: a failure (never a success built from half a response), no hang,
/// no end of the process. A response is judged after ``FramingPolicy``, as
/// ``Conveyor/NetworkClient`` judges it, so a transport may hand over a response the policy then
/// refuses. Each cut-short misbehavior is tried several times: a platform trap that depends on
/// timing shows in one of them.
extension ConformanceProbe {
    /// How often each cut-short misbehavior is tried.
    static let hostileTries = 8

    /// `path` fails every time, as a transport error, a refused connection, or a response the
    /// framing policy refuses; returns how it failed.
    func alwaysFails(_ path: String, _ what: String) async throws(ConformanceFailure) -> String? {
        var seen: Set<String> = []
        for attempt in 1...Self.hostileTries {
            let (result, _) = await send(HTTPRequest(url: server.url(path)))
            switch Self.judged(result) {
            case .failure(let error) where error.name == "transportFailed" && error.underlying is MalformedResponse:
                seen.insert("a response the framing policy refuses")
            case .failure(let error):
                switch error {
                case .transportFailed, .connectionFailed: seen.insert(ConformanceResult.name(error))
                default:
                    throw ConformanceFailure(
                        "\(what) (try \(attempt)): expected .transportFailed or .connectionFailed, got "
                            + ConformanceResult.name(error))
                }
            case .response(let response):
                throw ConformanceFailure(
                    "\(what) (try \(attempt)) came back as a response (status \(response.status), "
                        + "\(response.body.count) bytes): it must be an error")
            case .stillRunning:
                throw ConformanceFailure("\(what) (try \(attempt)): no result within \(hangLimit) (a hang)")
            }
        }
        return "ends with " + seen.sorted().joined(separator: " or ")
    }

    /// A response passed through the framing policy, as the client passes it.
    static func judged(_ result: ConformanceResult) -> ConformanceResult {
        guard case .response(let response) = result else { return result }
        do {
            try FramingPolicy.check(response.headers)
            return result
        } catch {
            return .failure(error)
        }
    }

    func controlBytesInHeaders() async throws(ConformanceFailure) -> String? {
        var details: [String] = []
        for kind in ["cr", "nul"] {
            let what = "a header value with a bare \(kind == "cr" ? "CR" : "NUL")"
            let (result, _) = await send(HTTPRequest(url: server.url("/control-bytes?kind=\(kind)")))
            switch Self.judged(result) {
            case .failure(.transportFailed), .failure(.connectionFailed):
                details.append("\(what): \(Self.judged(result).summary)")
            case .response(let response):
                let value = response.headers["X-Odd"] ?? ""
                guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) else {
                    throw ConformanceFailure("\(what) was handed over with the byte in X-Odd")
                }
                details.append("\(what): a response without the byte")
            case .failure(let error):
                throw ConformanceFailure(
                    "\(what): expected .transportFailed or a value without the byte, got \(ConformanceResult.name(error))")
            case .stillRunning:
                throw ConformanceFailure("\(what): no result within \(hangLimit) (a hang)")
            }
        }
        return details.joined(separator: "; ")
    }

    func nonASCIIHeader() async throws(ConformanceFailure) -> String? {
        let what = "GET /utf8-header (X-Odd is valid UTF-8 beyond ASCII)"
        let response = try await response(HTTPRequest(url: server.url("/utf8-header")), what)
        do {
            try FramingPolicy.check(response.headers)
        } catch {
            throw ConformanceFailure("\(what): the framing policy refuses the response the transport handed over")
        }
        guard response.headers["X-Odd"] == ConformancePattern.utf8Value else {
            throw ConformanceFailure("\(what): X-Odd did not arrive byte for byte")
        }
        return nil
    }

    func hugeHeaderBlock() async throws(ConformanceFailure) -> String? {
        let (result, _) = await send(HTTPRequest(url: server.url("/huge-headers")))
        switch Self.judged(result) {
        case .stillRunning:
            throw ConformanceFailure("1 MiB of response header fields: no result within \(hangLimit) (a hang)")
        case .failure(.transportFailed), .failure(.connectionFailed), .failure(.responseTooLarge), .response:
            return Self.judged(result).summary
        case .failure(let error):
            throw ConformanceFailure(
                "1 MiB of response header fields: expected a response or a transport error, got "
                    + ConformanceResult.name(error))
        }
    }

    func unsolicitedNotModified() async throws(ConformanceFailure) -> String? {
        let (result, _) = await send(HTTPRequest(url: server.url("/not-modified")))
        switch Self.judged(result) {
        case .response(let response) where response.status == 304 && response.body.isEmpty:
            return nil
        case .failure(.transportFailed), .failure(.connectionFailed):
            return Self.judged(result).summary
        default:
            throw ConformanceFailure(
                "a 304 to a request without a validator: expected status 304 with no body (or a transport error), "
                    + "got \(Self.judged(result).summary)")
        }
    }
}
