import ConveyorPipeline
import Foundation
import Testing

/// Typed per-request storage: each key type has its own slot and default.
@Suite struct RequestContextTests {
    enum Token: RequestContextKey { static let defaultValue: String? = nil }
    enum OtherToken: RequestContextKey { static let defaultValue: String? = "unset" }
    enum Count: RequestContextKey { static let defaultValue = 0 }
    enum Names: RequestContextKey { static let defaultValue: [String] = [] }

    let context = RequestContext(request: HTTPRequest(url: URL(string: "http://127.0.0.1:9/x")!))

    @Test func keysReadTheirDefaultUntilWrittenAndDoNotShareSlots() {
        #expect(context[Token.self] == nil)
        #expect(context[OtherToken.self] == "unset")
        context[Token.self] = "a"
        #expect(context[Token.self] == "a")
        #expect(context[OtherToken.self] == "unset")  // same value type, different key
        context[OtherToken.self] = nil
        #expect(context[OtherToken.self] == nil)
        context[Token.self] = "b"
        #expect(context[Token.self] == "b")
        context[Names.self] = ["x", "y"]
        context[Count.self] = 3
        #expect(context[Names.self] == ["x", "y"])
        #expect(context[Count.self] == 3)
        #expect(context[Token.self] == "b")
    }

    @Test func updateChangesInPlaceAndReturnsTheBodysResult() {
        let before = context.update(Names.self) { names -> Int in
            names.append("first")
            return names.count
        }
        #expect(before == 1)
        context.update(Names.self) { $0.append("second") }
        #expect(context[Names.self] == ["first", "second"])
    }

    @Test func concurrentUpdatesAreNotLost() async {
        let context = self.context
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask { for _ in 0..<20 { context.update(Count.self) { $0 += 1 } } }
            }
        }
        #expect(context[Count.self] == 1_000)
    }
}
