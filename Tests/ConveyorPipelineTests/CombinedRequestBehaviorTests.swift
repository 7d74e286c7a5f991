import ConveyorPipeline
import ConveyorTesting
import Foundation
import Testing

@Suite struct CombinedRequestBehaviorTests {
    struct Named: SendObserving {
        var name: String
        func beforeSend(_ request: HTTPRequest, context: RequestContext) async {}
    }

    @Test func flattensNestedChains() {
        let inner = CombinedRequestBehavior([Named(name: "b"), Named(name: "c")])
        let chain = CombinedRequestBehavior([Named(name: "a"), inner, CombinedRequestBehavior([Named(name: "d")])])
        #expect(chain.behaviors.map(\.name) == ["a", "b", "c", "d"])
    }

    @Test func resultBuilderSupportsConditionsAndLoops() {
        let verbose = false
        let chain = CombinedRequestBehavior {
            Named(name: "first")
            if verbose { Named(name: "never") }
            if !verbose { Named(name: "then") } else { Named(name: "else") }
            for index in 1...2 { Named(name: "loop\(index)") }
            [Named(name: "x"), Named(name: "y")] as [any RequestBehavior]
        }
        #expect(chain.behaviors.map(\.name) == ["first", "then", "loop1", "loop2", "x", "y"])
    }

    @Test func removingByTypeAndByName() {
        let recorder = HookRecorder()
        let chain = CombinedRequestBehavior([
            Named(name: "keep"), RecordingBehavior("spy", recorder: recorder), Named(name: "drop"),
        ])
        #expect(chain.removing([.type(RecordingBehavior.self)]).behaviors.map(\.name) == ["keep", "drop"])
        #expect(chain.removing([.named("drop")]).behaviors.map(\.name) == ["keep", "spy"])
        #expect(chain.removing([]).behaviors.count == 3)
    }

    @Test func firstRetryWinsAndLaterBehaviorsAreNotAsked() async {
        let recorder = HookRecorder()
        let chain = CombinedRequestBehavior {
            RecordingBehavior("a", recorder: recorder)
            RecordingBehavior("b", recorder: recorder, retry: { _, _ in .retry(after: .seconds(2)) })
            RecordingBehavior("c", recorder: recorder, retry: { _, _ in .retry(after: .seconds(9)) })
        }
        let request = HTTPRequest(url: URL(string: "http://127.0.0.1/x")!)
        let decision = await chain.retryDecision(after: .timedOut, response: nil, context: RequestContext(request: request))
        #expect(decision == .retry(after: .seconds(2)))
        #expect(recorder.trace == ["a.retryDecision", "b.retryDecision"])
    }

    @Test func aThrowingHookIsNamedInTheError() async {
        let recorder = HookRecorder()
        let chain = CombinedRequestBehavior {
            RecordingBehavior("fine", recorder: recorder)
            RecordingBehavior("broken", recorder: recorder, failing: [.modify])
        }
        var request = HTTPRequest(url: URL(string: "http://127.0.0.1/x")!)
        do {
            try await chain.modify(&request, context: RequestContext(request: request))
            Issue.record("modify should have thrown")
        } catch let error as NetworkError {
            guard case .behaviorFailed = error, let behavior = error.behavior, let hook = error.hook, let underlying = error.underlying else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(behavior == "broken")
            #expect(hook == .modify)
            #expect(underlying as? RecordingBehavior.Failure == .init(label: "broken", hook: .modify))
            #expect(error.description.contains("broken"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
