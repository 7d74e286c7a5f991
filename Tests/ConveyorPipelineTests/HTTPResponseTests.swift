import ConveyorPipeline
import Foundation
import Testing

/// A transport may hand over headers still in its own form; they are converted once, on first
/// read, and the response behaves exactly like one built with its headers up front.
@Suite struct HTTPResponseTests {
    let request = HTTPRequest(method: .get, url: URL(string: "http://127.0.0.1:9/movies")!)
    let fields: HTTPHeaders = ["Content-Type": "application/json", "Retry-After": "3"]

    func deferred(counting conversions: Locked<Int>) -> HTTPResponse {
        let fields = self.fields
        return HTTPResponse(
            status: 503,
            deferredHeaders: {
                conversions.withLock { $0 += 1 }
                return fields
            }, body: Data("{}".utf8), request: request)
    }

    @Test func deferredHeadersAreConvertedOnceOnFirstReadAndSharedByCopies() {
        let conversions = Locked(0)
        let response = deferred(counting: conversions)
        let copy = response
        #expect(conversions.withLock { $0 } == 0)
        #expect(response.headers["retry-after"] == "3")
        #expect(copy.headers["Content-Type"] == "application/json")
        #expect(response.headers == fields)
        #expect(conversions.withLock { $0 } == 1)
    }

    @Test func aResponseWithDeferredHeadersEqualsOneBuiltWithThem() {
        let eager = HTTPResponse(status: 503, headers: fields, body: Data("{}".utf8), request: request)
        let lazy = deferred(counting: Locked(0))
        #expect(lazy == eager)
        #expect(lazy.hashValue == eager.hashValue)
        var other = lazy
        other.headers["Retry-After"] = "4"
        #expect(other != eager)
    }

    @Test func settingHeadersReplacesTheDeferredOnesWithoutConvertingThem() {
        let conversions = Locked(0)
        var response = deferred(counting: conversions)
        response.headers = ["X-New": "1"]
        #expect(response.headers == ["X-New": "1"])
        #expect(conversions.withLock { $0 } == 0)
    }

    @Test func concurrentFirstReadsConvertOnce() async {
        let conversions = Locked(0)
        let response = deferred(counting: conversions)
        await withTaskGroup(of: String?.self) { group in
            for _ in 0..<16 { group.addTask { response.headers["Retry-After"] } }
            for await value in group { #expect(value == "3") }
        }
        #expect(conversions.withLock { $0 } == 1)
    }

    @Test func timingsAndHeadersAreKeptWhicheverIsSetFirst() {
        let conversions = Locked(0)
        let timings = TransferTimings(firstByte: .milliseconds(3), complete: .milliseconds(5), requestBodyBytes: 1, responseBodyBytes: 2)
        var response = deferred(counting: conversions)
        #expect(response.timings == nil)
        response.timings = timings
        #expect(conversions.withLock { $0 } == 0)  // still deferred
        #expect(response.headers["Retry-After"] == "3")
        #expect(response.timings == timings)
        response.headers["X-New"] = "1"
        #expect(response.timings == timings && response.headers["X-New"] == "1" && response.headers["Retry-After"] == "3")
        response.timings = nil
        #expect(response.timings == nil && response.headers["X-New"] == "1")
    }

    @Test func timingsAreNotPartOfEquality() {
        var measured = HTTPResponse(status: 200, headers: ["A": "1"], request: request)
        measured.timings = TransferTimings(complete: .seconds(1), requestBodyBytes: 0, responseBodyBytes: 0)
        let plain = HTTPResponse(status: 200, headers: ["A": "1"], request: request)
        #expect(measured == plain && measured.hashValue == plain.hashValue)
    }
}
