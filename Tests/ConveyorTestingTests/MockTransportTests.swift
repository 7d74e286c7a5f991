import ConveyorTesting
import Foundation
import Testing

@Suite struct MockTransportTests {
    let url = URL(string: "http://127.0.0.1:1/api/movies?page=2")!

    @Test func queuedRepliesComeFirstInOrderThenStubs() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/api/movies", reply: .status(200))
        mock.enqueue(.status(503), .status(502))
        let request = HTTPRequest(url: url)
        var statuses: [Int] = []
        for _ in 0..<3 { statuses.append(try await mock.send(request).status) }
        #expect(statuses == [503, 502, 200])
        #expect(mock.requests.count == 3)
    }

    @Test func stubsMatchMethodPathAndQueryAndTheLatestWins() async throws {
        let mock = MockTransport()
        mock.stub(.get, "/api/movies", reply: .status(201))
        mock.stub(.get, "/api/movies", query: ["page": "2"], reply: .status(202))
        mock.stub(.post, "/api/movies", reply: .status(203))
        #expect(try await mock.send(HTTPRequest(url: url)).status == 202)
        #expect(try await mock.send(HTTPRequest(url: URL(string: "http://h/api/movies?page=3")!)).status == 201)
        #expect(try await mock.send(HTTPRequest(method: .post, url: url)).status == 203)
    }

    @Test func anUnexpectedRequestThrowsAClearError() async {
        let mock = MockTransport()
        mock.stub(.get, "/api/other", reply: .status(200))
        do {
            _ = try await mock.send(HTTPRequest(method: .delete, url: url))
            Issue.record("expected UnexpectedRequest")
        } catch let error as MockTransport.UnexpectedRequest {
            #expect(error.description == "MockTransport: unexpected request DELETE /api/movies; expected: GET /api/other")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func jsonRepliesEncodeAndSetContentType() async throws {
        let mock = MockTransport()
        mock.enqueue(.json(["a": 1]))
        let response = try await mock.send(HTTPRequest(url: url))
        #expect(response.headers["content-type"] == "application/json")
        #expect(try JSONDecoder().decode([String: Int].self, from: response.body) == ["a": 1])
    }

    @Test func delayedRepliesWaitOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let mock = MockTransport(clock: clock)
        mock.enqueue(.delayed(.seconds(3), .status(200)))
        let task = Task { try await mock.send(HTTPRequest(url: url)).status }
        await clock.waitForSleepers(1)
        #expect(clock.sleeps == [.seconds(3)])
        clock.advance(by: .seconds(3))
        #expect(try await task.value == 200)
    }

    @Test func aHangingReplyEndsWhenCancelled() async {
        let mock = MockTransport()
        mock.enqueue(.hang)
        let task = Task { try await mock.send(HTTPRequest(url: url)) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func isSafeUnderConcurrentUse() async throws {
        let mock = MockTransport()
        mock.stub(nil, "/api/movies", reply: .status(200))
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<500 { group.addTask { try await mock.send(HTTPRequest(url: url)).status } }
            for try await status in group { #expect(status == 200) }
        }
        #expect(mock.requests.count == 500)
    }
}

@Suite struct ClockTests {
    @Test func immediateClockRecordsSleepsAndAdvances() async throws {
        let clock = ImmediateClock()
        try await clock.sleep(for: .seconds(1))
        try await clock.sleep(for: .milliseconds(1500))
        #expect(clock.sleeps == [.seconds(1), .milliseconds(1500)])
        #expect(clock.now.offset == .milliseconds(2500))
    }

    @Test func immediateClockThrowsWhenCancelled() async {
        let clock = ImmediateClock()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func manualClockWakesSleepersOnlyWhenAdvancedPastTheirDeadline() async throws {
        let clock = ManualClock()
        let woke = Locked<[Int]>([])
        let first = Task { try await clock.sleep(for: .seconds(2)); woke.withLock { $0.append(2) } }
        let second = Task { try await clock.sleep(for: .seconds(5)); woke.withLock { $0.append(5) } }
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(1))
        #expect(clock.sleeperCount == 2)
        clock.advance(by: .seconds(1))
        try await first.value
        #expect(woke.withLock { $0 } == [2])
        #expect(clock.sleeperCount == 1)
        #expect(clock.advanceToNextDeadline())
        try await second.value
        #expect(woke.withLock { $0 } == [2, 5])
        #expect(!clock.advanceToNextDeadline())
    }

    @Test func manualClockSleeperThrowsAtOnceWhenCancelled() async {
        let clock = ManualClock()
        let task = Task { try await clock.sleep(for: .seconds(3600)) }
        await clock.waitForSleepers(1)
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.sleeperCount == 0)
    }
}

@Suite struct FixtureTests {
    @Test func aMissingFixtureNamesWhatWasSearched() {
        do {
            _ = try Fixture.data("nope.json", in: Bundle.main)
            Issue.record("expected NotFound")
        } catch let error as Fixture.NotFound {
            #expect(error.name == "nope.json")
            #expect(error.description.contains("nope.json"))
            #expect(error.searchedPaths.count == 3)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func loadsAFixtureFromABundleDirectory() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("conveyor-fixture-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("Fixtures"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(#"[{"id":1}]"#.utf8).write(to: folder.appendingPathComponent("Fixtures/movies.json"))
        let bundle = try #require(Bundle(path: folder.path))
        #expect(try Fixture.data("movies.json", in: bundle) == Data(#"[{"id":1}]"#.utf8))
        guard case .response(let status, let headers, _) = try MockTransport.Reply.fixture("movies.json", in: bundle) else {
            Issue.record("expected a response reply")
            return
        }
        #expect(status == 200 && headers["Content-Type"] == "application/json")
    }
}
