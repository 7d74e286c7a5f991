import Conveyor
import Foundation
import ConveyorTestSupport
import Testing

/// The event-stream parser against the WHATWG HTML standard's examples and rules, and against a
/// reference model written from the standard's text, on generated streams cut at random places.
@Suite struct ServerSentEventParserTests {
    /// Parses `text` in one piece and then byte by byte; both must agree.
    func parse(_ bytes: [UInt8]) throws -> [ServerSentEvent] {
        var whole = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        try whole.parse(Data(bytes), into: &events)
        var split = ServerSentEventParser()
        var byByte: [ServerSentEvent] = []
        for byte in bytes { try split.parse(Data([byte]), into: &byByte) }
        #expect(events == byByte)
        return events
    }

    func parse(_ text: String) throws -> [ServerSentEvent] { try parse(Array(text.utf8)) }

    @Test func theStandardsExamples() throws {
        #expect(try parse("data: YHOO\ndata: +2\ndata: 10\n\n") == [ServerSentEvent(data: "YHOO\n+2\n10")])
        #expect(
            try parse(": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n") == [
                ServerSentEvent(data: "first event", id: "1"),
                ServerSentEvent(data: "second event", id: nil),
                ServerSentEvent(data: " third event", id: nil),
            ])
        #expect(try parse("data\n\ndata\ndata\n\ndata:") == [ServerSentEvent(data: ""), ServerSentEvent(data: "\n")])
        #expect(try parse("data:test\n\ndata: test\n\n") == [ServerSentEvent(data: "test"), ServerSentEvent(data: "test")])
        #expect(
            try parse("event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n").map(\.event)
                == ["add", "remove", "add"])
    }

    @Test func lineEndsOfEveryKindAndABOM() throws {
        let expected = [ServerSentEvent(data: "a\nb", id: "7"), ServerSentEvent(event: "x", data: "c", id: "7")]
        for end in ["\n", "\r", "\r\n"] {
            let text = ["id: 7", "data: a", "data: b", "", "event: x", "data: c", "", ""].joined(separator: end)
            #expect(try parse(text) == expected, "line end \(end.debugDescription)")
            #expect(try parse([0xEF, 0xBB, 0xBF] + Array(text.utf8)) == expected, "with a BOM")
            // Only one BOM is skipped: a second one is part of the first field's name.
            #expect(try parse([0xEF, 0xBB, 0xBF, 0xEF, 0xBB, 0xBF] + Array(text.utf8)).count == 2)
        }
        // CR then LF in the next chunk is one line end, not two (which would dispatch "a" early).
        var parser = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        try parser.parse(Data("data: a\r".utf8), into: &events)
        try parser.parse(Data("\ndata: b\r\n\r\n".utf8), into: &events)
        #expect(events == [ServerSentEvent(data: "a\nb")])
    }

    @Test func fieldsRetryAndIDRules() throws {
        let events = try parse(
            "retry: 1500\ndata: a\n\nretry: 15x\nretry: -1\nretry:\ndata: b\n\nid: x\u{0}y\ndata: c\n\nid: 9\nfoo: bar\ndata\n\n")
        #expect(events.map(\.retry) == [.milliseconds(1500), nil, nil, nil])
        #expect(events.map(\.id) == [nil, nil, nil, "9"])
        // The last event ID is kept across events until the server sets it again.
        #expect(try parse("id: 3\ndata: a\n\ndata: b\n\nid\ndata: c\n\n").map(\.id) == ["3", "3", nil])
        // A huge retry saturates instead of trapping.
        var parser = ServerSentEventParser()
        var none: [ServerSentEvent] = []
        try parser.parse(Data(("retry: " + String(repeating: "9", count: 500) + "\n").utf8), into: &none)
        #expect(parser.reconnectionTime == .seconds(3_155_760_000))
    }

    @Test func anUnfinishedEventIsNeverDispatchedAndResetKeepsTheID() throws {
        var parser = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        try parser.parse(Data("id: 1\ndata: one\n\nid: 2\ndata: half".utf8), into: &events)
        #expect(events.map(\.data) == ["one"])
        #expect(parser.lastEventID == "1", "an id of an event the server did not finish does not count")
        parser.reset()
        try parser.parse(Data("\ndata: two\n\n".utf8), into: &events)
        #expect(events.map(\.data) == ["one", "two"])
        #expect(events.last?.id == "1")
    }

    @Test func limitsThrowInsteadOfGrowing() throws {
        var parser = ServerSentEventParser(maxLineLength: 100, maxEventSize: 1000)
        var events: [ServerSentEvent] = []
        var failure: EventStreamError?
        do {
            for _ in 0..<10 { try parser.parse(Data(repeating: UInt8(ascii: "a"), count: 30), into: &events) }
        } catch {
            failure = error
        }
        #expect(failure == .lineTooLong(limit: 100))
        var large = ServerSentEventParser(maxLineLength: 100, maxEventSize: 1000)
        failure = nil
        do {
            for _ in 0..<20 { try large.parse(Data(("data: " + String(repeating: "b", count: 90) + "\n").utf8), into: &events) }
        } catch {
            failure = error
        }
        #expect(failure == .eventTooLarge(limit: 1000))
        #expect(events.isEmpty)
    }

    @Test func descriptionsNeverShowData() {
        let event = ServerSentEvent(data: "secret-token-123", id: "session-42")
        #expect(!event.description.contains("secret-token-123"))
        #expect(!event.description.contains("session-42"))
        #expect(event.description.contains("16 bytes"))
    }

    /// Random streams from a small alphabet that hits every rule (line ends of each kind, colons,
    /// spaces, field names, NUL, digits, a BOM, invalid UTF-8), cut at random places, must give
    /// what the reference model gives for the whole stream.
    @Test func matchesTheReferenceModelOnGeneratedStreams() throws {
        let pieces: [[UInt8]] = [
            Array("data".utf8), Array("event".utf8), Array("id".utf8), Array("retry".utf8), Array("dat".utf8),
            Array(":".utf8), Array(" ".utf8), Array("\n".utf8), Array("\r".utf8), Array("\r\n".utf8),
            Array("\n\n".utf8), Array("7".utf8), Array("42".utf8), Array("x".utf8), [0], [0xEF, 0xBB, 0xBF],
            [0xC3, 0xA9], [0xE2, 0x82], [0xFF], Array("é".utf8),
        ]
        for seed in UInt64(1)...3000 {
            var random = SplitMix64(state: seed)
            var stream: [UInt8] = random.next() % 4 == 0 ? [0xEF, 0xBB, 0xBF] : []
            for _ in 0..<Int(random.next() % 60) { stream += pieces[Int(random.next() % UInt64(pieces.count))] }
            let expected = ReferenceModel.events(stream)
            var parser = ServerSentEventParser()
            var events: [ServerSentEvent] = []
            var index = 0
            while index < stream.count {
                let length = Int(random.next() % 7)
                let end = min(stream.count, index + length)
                try parser.parse(Data(stream[index..<end]), into: &events)
                index = end
            }
            #expect(events == expected, "seed \(seed): \(stream)")
            if events != expected { return }
        }
    }
}

/// The standard's "Interpreting an event stream" as directly as it reads: decode, strip a BOM,
/// split into lines, process each line. Slow and plain, on purpose.
enum ReferenceModel {
    static func events(_ bytes: [UInt8]) -> [ServerSentEvent] {
        var scalars = Array(String(decoding: bytes, as: UTF8.self).unicodeScalars)
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        var lines: [[Unicode.Scalar]] = []
        var current: [Unicode.Scalar] = []
        var index = 0
        var ended = false
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\r" || scalar == "\n" {
                lines.append(current)
                current = []
                if scalar == "\r", index + 1 < scalars.count, scalars[index + 1] == "\n" { index += 1 }
                ended = true
            } else {
                current.append(scalar)
                ended = false
            }
            index += 1
        }
        _ = ended  // a last line without a line end is never processed
        var result: [ServerSentEvent] = []
        var data = ""
        var type = ""
        var idBuffer = ""
        var lastID = ""
        var retry: Duration?
        for line in lines {
            let text = String(String.UnicodeScalarView(line))
            if text.isEmpty {
                lastID = idBuffer
                if data.isEmpty {
                    type = ""
                    retry = nil
                    continue
                }
                if data.hasSuffix("\n") { data.removeLast() }
                result.append(ServerSentEvent(event: type.isEmpty ? "message" : type, data: data, id: lastID.isEmpty ? nil : lastID, retry: retry))
                data = ""
                type = ""
                retry = nil
                continue
            }
            if text.unicodeScalars.first == ":" { continue }
            let name: String
            var value: String
            if let colon = line.firstIndex(of: ":") {
                name = String(String.UnicodeScalarView(line[..<colon]))
                value = String(String.UnicodeScalarView(line[(colon + 1)...]))
                if value.unicodeScalars.first == " " { value = String(String.UnicodeScalarView(value.unicodeScalars.dropFirst())) }
            } else {
                name = text
                value = ""
            }
            switch name {
            case "event": type = value
            case "data": data += value + "\n"
            case "id": if !value.unicodeScalars.contains("\u{0}") { idBuffer = value }
            case "retry":
                if !value.isEmpty, value.unicodeScalars.allSatisfy({ $0.value >= 0x30 && $0.value <= 0x39 }) {
                    retry = min(Int64(value).map { .milliseconds($0) } ?? .seconds(3_155_760_000), .seconds(3_155_760_000))
                }
            default: break
            }
        }
        return result
    }
}
