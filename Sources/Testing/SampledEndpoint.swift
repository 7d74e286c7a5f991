public import Conveyor
import Foundation

/// An endpoint that carries a canned reply, like Moya's `sampleData`: for UI tests and previews,
/// where the app itself answers without the network.
///
/// The production client knows nothing of samples. A ``MockTransport`` answers with them, so the
/// app links `ConveyorTesting` (it needs no test framework) and picks the transport at launch;
/// every behavior still runs:
///
/// ```swift
/// enum CatalogAPI: SampledEndpoint, CaseIterable {
///     case popular
///     var path: String { "/movies/popular" }
///     var sampleReply: MockTransport.Reply? { .rawJSON(#"[{"id": 1, "title": "Alien"}]"#) }
/// }
///
/// let samples = MockTransport(baseURL: api)
/// samples.stubSamples(CatalogAPI.allCases)
/// let uiTesting = ProcessInfo.processInfo.arguments.contains("-ui-testing")
/// let client = uiTesting ? NetworkClient(baseURL: api, transport: samples) : NetworkClient(baseURL: api)
/// ```
///
/// A request for an endpoint with no sample fails with ``Conveyor/NetworkError/transportFailed``,
/// listing the stubbed requests.
public protocol SampledEndpoint: Endpoint {
    /// The reply this endpoint gets from ``MockTransport/stubSamples(_:)``; `nil` for none.
    var sampleReply: MockTransport.Reply? { get }
}

extension MockTransport {
    /// Answers every request for `endpoint` (its method, path and query items) with `reply`.
    /// - Parameters:
    ///   - endpoint: The endpoint, with its parameters (`MovieAPI.popular(page: 2)`).
    ///   - reply: The reply.
    public func stub(_ endpoint: some Endpoint, reply: Reply) {
        var query: [String: String] = [:]
        for item in endpoint.query.items { query[item.name] = item.value }
        let path = URL(string: endpoint.path).flatMap { $0.scheme == nil ? nil : $0.path } ?? endpoint.path
        stub(endpoint.method, path, query: query.isEmpty ? nil : query, reply: reply)
    }

    /// Stubs each endpoint's ``SampledEndpoint/sampleReply`` (those with one), so this transport
    /// answers a client's requests for them: `stubSamples(MovieAPI.allCases)`, or a list of
    /// endpoint values with their parameters.
    /// - Parameter endpoints: The endpoints.
    public func stubSamples<E: SampledEndpoint>(_ endpoints: some Sequence<E>) {
        for endpoint in endpoints {
            if let reply = endpoint.sampleReply { stub(endpoint, reply: reply) }
        }
    }
}
