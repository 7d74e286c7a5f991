import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The upstream weather API the service calls, as a real server on 127.0.0.1: it issues bearer
/// tokens for client credentials, refuses a request without the current one (401), and answers
/// per city:
/// - `oslo`: 503 with `Retry-After: 0` the first time, then the weather;
/// - `atlantis`: always 500; `nowhere`: 404;
/// - `slowtown`: held until the test releases it (`no-store`, so no cache can answer);
/// - any other city: the weather, cacheable for a minute by any cache (`public`: the weather is
///   the same whoever asks, so instances that sign in with tokens of their own share it).
/// Every token it issued is good until `expire()` (each instance of the service signs in itself).
/// `GET /saved` answers a user's saved cities to the user's own bearer token (`user-<name>-…`),
/// `private, max-age=60`: an answer for that user alone.
actor UpstreamState {
    static let secret = "client-s3cret-SECRET"
    private(set) var tokensIssued = 0
    private var valid: Set<String> = []
    private(set) var unauthorized = 0
    private var hits: [String: Int] = [:]
    /// `GET /saved` answers, by user.
    private(set) var saved: [String: Int] = [:]
    private var released = false
    private var held: [CheckedContinuation<Void, Never>] = []
    nonisolated let arrivals: AsyncStream<String>
    private let arrived: AsyncStream<String>.Continuation

    init() { (arrivals, arrived) = AsyncStream.makeStream() }

    func hits(_ city: String) -> Int { hits[city, default: 0] }
    /// Weather requests that reached the upstream, every city together.
    var hitsAll: Int { hits.values.reduce(0, +) }

    func issue() -> String {
        tokensIssued += 1
        let token = "tok-\(tokensIssued)-SECRET"
        valid.insert(token)
        return token
    }

    /// Expires every token: the next request gets a 401.
    func expire() { valid = [] }

    func authorize(_ header: String?) -> Bool {
        guard let header, header.hasPrefix("Bearer "), valid.contains(String(header.dropFirst(7))) else {
            unauthorized += 1
            return false
        }
        return true
    }

    func arrive(_ city: String) -> Int {
        hits[city, default: 0] += 1
        arrived.yield(city)
        return hits[city]!
    }

    func savedAnswer(for user: String) { saved[user, default: 0] += 1 }

    func waitForRelease() async {
        if released { return }
        await withCheckedContinuation { held.append($0) }
    }

    func release() {
        released = true
        held.forEach { $0.resume() }
        held = []
    }
}

struct TokenRequest: Decodable { let clientID: String; let clientSecret: String }

func upstreamApplication(_ state: UpstreamState) -> some ApplicationProtocol {
    let router = Router()
    router.post("/token") { request, context -> Response in
        let credentials = try await request.decode(as: TokenRequest.self, context: context)
        guard credentials.clientSecret == UpstreamState.secret else { return Response(status: .unauthorized) }
        let token = await state.issue()
        return json(#"{"access_token": "\#(token)"}"#)
    }
    router.get("/saved") { request, _ -> Response in
        // A user's own token: `Bearer user-<name>-<anything>`.
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer user-"),
            let user = header.dropFirst("Bearer user-".count).split(separator: "-").first
        else { return Response(status: .unauthorized, headers: [.wwwAuthenticate: "Bearer"]) }
        await state.savedAnswer(for: String(user))
        return json(#"{"user": "\#(user)", "cities": ["\#(user)ville", "paris"]}"#, cacheControl: "private, max-age=60")
    }
    router.get("/weather/:city") { request, context -> Response in
        let city = try context.parameters.require("city")
        guard await state.authorize(request.headers[.authorization]) else {
            return Response(status: .unauthorized, headers: [.wwwAuthenticate: "Bearer"])
        }
        let hit = await state.arrive(city)
        switch city {
        case "oslo" where hit == 1: return Response(status: .serviceUnavailable, headers: [.retryAfter: "0"])
        case "atlantis": return Response(status: .internalServerError)
        case "nowhere": return Response(status: .notFound)
        case "slowtown":
            await state.waitForRelease()
            return json(#"{"city": "Slowtown", "temperature": 4.5, "summary": "fog"}"#, cacheControl: "no-store")
        default:
            return json(#"{"city": "\#(city.capitalized)", "temperature": 21.5, "summary": "sunny"}"#)
        }
    }
    return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
}

func json(_ text: String, cacheControl: String = "public, max-age=60") -> Response {
    Response(
        status: .ok, headers: [.contentType: "application/json", .cacheControl: cacheControl],
        body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
}

/// Runs the upstream on a free port for `body`.
func withUpstream<Value: Sendable>(
    _ body: @Sendable (URL, UpstreamState) async throws -> Value
) async throws -> Value {
    let state = UpstreamState()
    return try await upstreamApplication(state).test(.live) { client in
        let port = try #require(client.port)
        return try await body(URL(string: "http://127.0.0.1:\(port)")!, state)
    }
}
