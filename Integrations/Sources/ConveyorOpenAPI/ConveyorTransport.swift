public import Conveyor
public import Foundation
public import HTTPTypes
public import OpenAPIRuntime

/// A `ClientTransport` for clients that swift-openapi-generator writes: every generated operation
/// goes through a ``Conveyor/NetworkClient``, so all its behaviors apply (token refresh, retries
/// with `Retry-After`, the cache, de-duplication, logging, metrics, tracing).
///
/// ```swift
/// import ConveyorOpenAPI
///
/// let conveyor = NetworkClient(baseURL: URL(string: "https://api.example.com")!) {
///     AuthTokenBehavior(provider: tokens)
///     RetryBehavior()
///     CacheBehavior(storage: InMemoryCacheStorage())
/// }
/// let api = Client(
///     serverURL: conveyor.baseURL,
///     transport: ConveyorTransport(client: conveyor, operations: [
///         Operations.login.id: .excluding(.type(AuthTokenBehavior.self))
///     ]))
/// ```
///
/// - **Operations:** each request's ``RequestContext`` starts with the operation's id
///   (``RequestContext/openAPIOperationID``), so a behavior can act per operation from its first
///   hook; ``OperationOptions`` add behaviors to, or leave client behaviors out of, the
///   operations you name, without wrapping any call.
/// - **Middlewares** you pass to the generated `Client` keep working: they run first, once per
///   call, then this transport hands the request to Conveyor, whose behaviors run around every
///   attempt. A retry or a token refresh never runs a middleware again.
/// - **Statuses:** every response reaches the generated client, whose documented cases and
///   `undocumented(statusCode:_:)` handle it; an error status is not thrown. Behaviors still see a
///   status outside the client's acceptable ones as a failure, so a 401 is refreshed and a 503
///   retried before the final response is handed over.
/// - **Errors:** what fails without a response (a timeout, a lost connection, cancellation)
///   throws the ``Conveyor/NetworkError``, which the generated client wraps in a `ClientError`
///   whose `underlyingError` it is.
/// - **Bodies:** a request body the generated client can iterate more than once and whose
///   length is at most ``bufferedRequestLimit`` is sent from memory, so a retry can resend it;
///   any other is streamed, read once (a failed attempt that read it is not retried). A response
///   is buffered or streamed as ``OperationOptions/ResponseBody`` says; by default, a response to
///   an operation that accepts JSON or text is buffered (the cache and de-duplication keep only
///   whole bodies) and any other, such as `application/octet-stream`, is streamed in bounded
///   memory.
/// - **Secrets:** the generated client renders a `ClientError` with the response's headers. The
///   response headers the client's ``Conveyor/SensitiveHeaders`` name (`Set-Cookie` among them)
///   are removed before the generated client sees them, unless you name them in
///   `revealingResponseHeaders`. Credentials Conveyor's behaviors add are never part of the request
///   the generated client renders.
public struct ConveyorTransport: ClientTransport {
    /// The client every operation is sent through.
    public let client: NetworkClient
    /// Options for the operations they are keyed by (the generated `Operations.<name>.id`).
    public let operations: [String: OperationOptions]
    /// Sensitive response headers the generated client receives anyway.
    public let revealingResponseHeaders: Set<String>

    /// The largest request body sent from memory (and so resent on a retry): 4 MiB.
    public static let bufferedRequestLimit = 4 * 1024 * 1024

    /// Creates a transport that sends through `client`.
    /// - Parameters:
    ///   - client: The client whose behaviors every operation runs through. Give the generated
    ///     `Client` a `serverURL` on its base URL's origin: credential behaviors add their headers
    ///     only there.
    ///   - operations: Options per operation id.
    ///   - revealingResponseHeaders: Sensitive response header names (any case) the generated
    ///     client should still receive, for an operation that documents one.
    public init(
        client: NetworkClient, operations: [String: OperationOptions] = [:], revealingResponseHeaders: Set<String> = []
    ) {
        self.client = client
        self.operations = operations
        self.revealingResponseHeaders = Set(revealingResponseHeaders.map { $0.lowercased() })
    }

    /// Sends one operation's request through the client.
    /// - Parameters:
    ///   - request: The request the generated client built (its path holds the query).
    ///   - body: Its body, if any.
    ///   - baseURL: The server URL the generated client was made with.
    ///   - operationID: The operation's id.
    /// - Returns: The final response and its body.
    /// - Throws: ``Conveyor/NetworkError`` when no response arrived.
    public func send(
        _ request: HTTPTypes.HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String
    ) async throws -> (HTTPTypes.HTTPResponse, HTTPBody?) {
        let options = operations[operationID]
        let conveyorRequest = try await makeRequest(request, body: body, baseURL: baseURL, operationID: operationID, options: options)
        let streams: Bool
        switch options?.responseBody ?? .automatic {
        case .buffered: streams = false
        case .streamed: streams = true
        case .automatic: streams = !Self.acceptsTextual(request.headerFields[.accept])
        }
        do throws(NetworkError) {
            if streams {
                let streamed = try await client.stream(conveyorRequest)
                let length = Self.knownLength(of: streamed.response)
                let body = HTTPBody(
                    streamed.body.map { ArraySlice($0) }, length: length.map { .known($0) } ?? .unknown,
                    iterationBehavior: .single)
                return (response(from: streamed.response), body)
            }
            let response = try await client.send(conveyorRequest)
            return (self.response(from: response), Self.body(of: response, method: request.method))
        } catch {
            // An error status reached the end of the chain: the generated client decides what it means.
            guard error.status != nil, let response = error.response else { throw error }
            return (self.response(from: response), Self.body(of: response, method: request.method))
        }
    }

    /// The Conveyor request for a generated one: the same method, URL, headers and body, with the
    /// operation's id in its context and the operation's options applied.
    func makeRequest(
        _ request: HTTPTypes.HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String, options: OperationOptions?
    ) async throws -> Request<Conveyor.HTTPResponse> {
        // On the client's own base URL (the usual case) the path is relative: nothing to parse.
        var base = ""
        if baseURL != client.baseURL {
            base = baseURL.absoluteString
            while base.hasSuffix("/") { base.removeLast() }
        }
        var fields: [HTTPHeaders.Field] = []
        fields.reserveCapacity(request.headerFields.count)
        for field in request.headerFields { fields.append(.init(name: field.name.rawName, value: field.value)) }
        let headers = HTTPHeaders(fields)
        var conveyorRequest = Request<Conveyor.HTTPResponse>(
            method: HTTPMethod(rawValue: request.method.rawValue), path: base + (request.path ?? ""), headers: headers,
            body: try await Self.requestBody(body), timeout: options?.timeout, behaviors: options?.behaviors ?? [])
        conveyorRequest.exclusions = options?.exclusions ?? []
        return conveyorRequest.setting(OpenAPIOperationKey.self, to: operationID)
    }

    /// `body` as Conveyor sends it: bytes when it can be read twice and is small, else a one-shot stream.
    static func requestBody(_ body: HTTPBody?) async throws -> RequestBody {
        guard let body else { return .none }
        var length: Int64?
        if case .known(let known) = body.length { length = known }
        if body.iterationBehavior == .multiple, let length, length <= Int64(bufferedRequestLimit) {
            return .data(try await Data(collecting: body, upTo: Int(length)), contentType: nil)
        }
        return .stream(HTTPBodyStream(body.map { Data($0) }, length: length), contentType: nil)
    }

    /// The generated client's response: status and headers, the sensitive ones removed.
    func response(from response: Conveyor.HTTPResponse) -> HTTPTypes.HTTPResponse {
        var fields = HTTPFields()
        fields.reserveCapacity(response.headers.count)
        let sensitive = client.configuration.sensitiveHeaders
        for field in response.headers {
            guard let name = HTTPField.Name(field.name) else { continue }
            if sensitive.contains(field.name) && !revealingResponseHeaders.contains(field.name.lowercased()) { continue }
            fields.append(HTTPField(name: name, value: field.value))
        }
        return HTTPTypes.HTTPResponse(status: .init(code: response.status), headerFields: fields)
    }

    /// A buffered response's body: `nil` for a response that has none (to `HEAD`, 204, 304).
    static func body(of response: Conveyor.HTTPResponse, method: HTTPTypes.HTTPRequest.Method) -> HTTPBody? {
        if method == .head || response.status == 204 || response.status == 304 { return nil }
        return HTTPBody(response.body)
    }

    /// The declared length of a streamed body, when the bytes delivered will match it (no
    /// content coding the transport may have undone).
    static func knownLength(of response: Conveyor.HTTPResponse) -> Int64? {
        guard response.headers["Content-Encoding"] == nil, let value = response.headers["Content-Length"] else { return nil }
        return Int64(value).flatMap { $0 >= 0 ? $0 : nil }
    }

    /// Whether an `Accept` value names JSON or text only (responses worth keeping whole), an
    /// event stream aside (it may never end); `nil` (no `Accept`) counts as textual. Reads the
    /// bytes in place: it runs for every operation.
    static func acceptsTextual(_ accept: String?) -> Bool {
        guard var accept else { return true }
        return accept.withUTF8 { bytes in
            var start = 0
            while start < bytes.count {
                var end = start
                while end < bytes.count, bytes[end] != UInt8(ascii: ",") { end += 1 }
                // The media type: up to its parameters, without the spaces around it.
                var typeEnd = start
                while typeEnd < end, bytes[typeEnd] != UInt8(ascii: ";") { typeEnd += 1 }
                var typeStart = start
                while typeStart < typeEnd, bytes[typeStart] == 0x20 || bytes[typeStart] == 0x09 { typeStart += 1 }
                while typeEnd > typeStart, bytes[typeEnd - 1] == 0x20 || bytes[typeEnd - 1] == 0x09 { typeEnd -= 1 }
                let type = UnsafeBufferPointer(rebasing: bytes[typeStart..<typeEnd])
                let textual =
                    type.isEmpty || equal(type, "application/json") || ends(type, with: "+json")
                    || (starts(type, with: "text/") && !equal(type, "text/event-stream"))
                    || equal(type, "application/x-www-form-urlencoded")
                if !textual { return false }
                start = end + 1
            }
            return true
        }
    }

    /// Whether `bytes`, in ASCII lowercase, equal `lowercase`.
    private static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercase: StaticString) -> Bool {
        bytes.count == lowercase.utf8CodeUnitCount && starts(bytes, with: lowercase)
    }

    /// Whether `bytes`, in ASCII lowercase, start with `lowercase`.
    private static func starts(_ bytes: UnsafeBufferPointer<UInt8>, with lowercase: StaticString) -> Bool {
        let count = lowercase.utf8CodeUnitCount
        guard bytes.count >= count else { return false }
        let expected = lowercase.utf8Start
        for index in 0..<count where asciiLowercase(bytes[index]) != expected[index] { return false }
        return true
    }

    /// Whether `bytes`, in ASCII lowercase, end with `lowercase`.
    private static func ends(_ bytes: UnsafeBufferPointer<UInt8>, with lowercase: StaticString) -> Bool {
        let count = lowercase.utf8CodeUnitCount
        guard bytes.count >= count else { return false }
        let expected = lowercase.utf8Start
        let offset = bytes.count - count
        for index in 0..<count where asciiLowercase(bytes[offset + index]) != expected[index] { return false }
        return true
    }

    private static func asciiLowercase(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}

/// What one generated operation adds to, or leaves out of, the client's behaviors.
///
/// ```swift
/// ConveyorTransport(client: conveyor, operations: [
///     Operations.login.id: .excluding(.type(AuthTokenBehavior.self)),
///     Operations.uploadVideo.id: OperationOptions(timeout: .seconds(600), responseBody: .buffered),
/// ])
/// ```
public struct OperationOptions: Sendable {
    /// How a response body reaches the generated client.
    public enum ResponseBody: Sendable {
        /// Buffered for an operation that accepts only JSON, form data or text (but not
        /// `text/event-stream`), streamed for any other.
        case automatic
        /// Read whole first, under the client's `maxResponseSize`; the cache and de-duplication
        /// apply, and the behaviors' ending hook has run when the generated call returns.
        case buffered
        /// Handed over as it arrives, in bounded memory; the behaviors' ending hook runs when
        /// the body ends or is abandoned.
        case streamed
    }

    /// Behaviors for this operation only; they run after (inside) the client's.
    public var behaviors: [any RequestBehavior]
    /// Client behaviors this operation leaves out.
    public var exclusions: [BehaviorExclusion]
    /// The per-attempt timeout; `nil` uses the client's.
    public var timeout: Duration?
    /// How the response body is handed over.
    public var responseBody: ResponseBody

    /// Creates options.
    /// - Parameters:
    ///   - behaviors: Behaviors for this operation only.
    ///   - exclusions: Client behaviors it leaves out.
    ///   - timeout: The per-attempt timeout; `nil` uses the client's.
    ///   - responseBody: How the response body is handed over.
    public init(
        behaviors: [any RequestBehavior] = [], exclusions: [BehaviorExclusion] = [], timeout: Duration? = nil,
        responseBody: ResponseBody = .automatic
    ) {
        self.behaviors = behaviors
        self.exclusions = exclusions
        self.timeout = timeout
        self.responseBody = responseBody
    }

    /// Options that add behaviors to the operation.
    /// - Parameter behaviors: The behaviors.
    public static func adding(_ behaviors: any RequestBehavior...) -> OperationOptions {
        OperationOptions(behaviors: behaviors)
    }

    /// Options that leave client behaviors out of the operation.
    /// - Parameter exclusions: For example `.type(AuthTokenBehavior.self)`.
    public static func excluding(_ exclusions: BehaviorExclusion...) -> OperationOptions {
        OperationOptions(exclusions: exclusions)
    }
}

/// The key under which a request's context holds its OpenAPI operation id.
enum OpenAPIOperationKey: RequestContextKey {
    static let defaultValue: String? = nil
}

extension RequestContext {
    /// The id of the generated OpenAPI operation this request is (`nil` for a request not sent
    /// by ``ConveyorTransport``), set before any behavior's first hook.
    ///
    /// ```swift
    /// struct ReadOnlyRetries: RetryDeciding {
    ///     func retryDecision(after failure: NetworkError, response: HTTPResponse?, context: RequestContext) async
    ///         -> RetryDecision
    ///     {
    ///         context.openAPIOperationID?.hasPrefix("get") == true ? .retry(after: .seconds(1)) : .doNotRetry
    ///     }
    /// }
    /// ```
    public var openAPIOperationID: String? { self[OpenAPIOperationKey.self] }
}
