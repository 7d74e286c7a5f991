import ConveyorTesting
import Foundation
import Testing

@testable import Conveyor

/// The client's cache of URLs built for relative paths: a hit must give exactly the URL that
/// building would, and nothing that building rejects may ever come from it.
@Suite struct PathURLCacheTests {
    let client = NetworkClient(baseURL: URL(string: "http://127.0.0.1:8080/api/v1")!, transport: MockTransport())

    func url(_ path: String, query: QueryParameters = [:]) throws -> String {
        try client.makeHTTPRequest(Request<Data>(path: path, query: query)).url.absoluteString
    }

    @Test func aRepeatedPathGivesTheSameURLFromOneEntry() throws {
        let first = try url("/movies/popular")
        let second = try url("/movies/popular")
        #expect(first == "http://127.0.0.1:8080/api/v1/movies/popular")
        #expect(second == first)
        #expect(client.urlCache.count == 1)
    }

    @Test func theQueryIsPartOfTheKey() throws {
        #expect(try url("/movies", query: ["page": 1]) == "http://127.0.0.1:8080/api/v1/movies?page=1")
        #expect(try url("/movies", query: ["page": 2]) == "http://127.0.0.1:8080/api/v1/movies?page=2")
        #expect(try url("/movies") == "http://127.0.0.1:8080/api/v1/movies")
        #expect(try url("/movies", query: ["page": 1]) == "http://127.0.0.1:8080/api/v1/movies?page=1")
        #expect(client.urlCache.count == 3)
    }

    @Test func aPathWithAQueryOfItsOwnKeepsItOnEveryHit() throws {
        for _ in 0..<3 {
            #expect(
                try url("/movies?sort=desc", query: ["page": 2])
                    == "http://127.0.0.1:8080/api/v1/movies?sort=desc&page=2")
        }
        #expect(client.urlCache.count == 1)
    }

    @Test func canonicallyEquivalentPathsAreDifferentKeys() throws {
        // Equal as Swift strings, different bytes: each must keep its own percent-encoding.
        #expect(try url("/caf\u{E9}") == "http://127.0.0.1:8080/api/v1/caf%C3%A9")
        #expect(try url("/cafe\u{301}") == "http://127.0.0.1:8080/api/v1/cafe%CC%81")
        #expect(try url("/caf\u{E9}") == "http://127.0.0.1:8080/api/v1/caf%C3%A9")
        #expect(client.urlCache.count == 2)
    }

    @Test func rejectedPathsAreNeverCached() throws {
        for _ in 0..<3 {
            #expect(throws: NetworkError.self) { try url("/movies/../admin") }
            #expect(throws: NetworkError.self) { try url("/movies/%2e%2e/admin") }
        }
        #expect(client.urlCache.count == 0)
    }

    @Test func absoluteURLsAreNotCachedAndCannotVouchForARelativePath() throws {
        // The absolute URL may contain a dot segment (it names its own origin); the relative path
        // that joins to the same string must still be rejected.
        #expect(try url("http://127.0.0.1:8080/api/v1/a/../b") == "http://127.0.0.1:8080/api/v1/a/../b")
        #expect(throws: NetworkError.self) { try url("/a/../b") }
        #expect(client.urlCache.count == 0)
    }

    @Test func theCacheNeverHoldsMoreThanItsCapacity() throws {
        let total = PathURLCache.capacity * 3 + 7
        for id in 0..<total {
            #expect(try url("/movies/\(id)") == "http://127.0.0.1:8080/api/v1/movies/\(id)")
            #expect(client.urlCache.count <= PathURLCache.capacity)
        }
        // A path used all the time is back in the cache after its next request.
        _ = try url("/me")
        _ = try url("/me")
        #expect(
            client.urlCache.url(for: .init(path: "/me", query: ""))?.absoluteString == "http://127.0.0.1:8080/api/v1/me"
        )
    }

    @Test func concurrentRequestsForManyPathsEachGetTheirOwnURL() async throws {
        let client = self.client
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for round in 0..<200 {
                        let id = (task * 31 + round) % 300  // overlapping paths, more than the capacity
                        let url = try client.makeHTTPRequest(Request<Data>(path: "/movies/\(id)", query: ["t": task]))
                            .url.absoluteString
                        #expect(url == "http://127.0.0.1:8080/api/v1/movies/\(id)?t=\(task)")
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(client.urlCache.count <= PathURLCache.capacity)
    }
}
