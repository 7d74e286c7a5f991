public import Foundation

/// One event of a `text/event-stream` body, as the WHATWG HTML standard's "server-sent events"
/// rules dispatch it.
///
/// ```swift
/// for try await event in client.events(Request<Data>(path: "/scores/live")) {
///     if event.event == "goal" { show(event.data) }
/// }
/// ```
///
/// Its ``description`` names the event and the size of its data, never the data itself, so a
/// log line or an error that mentions an event cannot leak what the server sent.
public struct ServerSentEvent: Sendable, Hashable, CustomStringConvertible {
    /// The event's type: the last `event:` field of its block, `"message"` when there was none.
    public var event: String
    /// The `data:` fields of its block, joined by line feeds.
    public var data: String
    /// The last event ID when the event was dispatched (the most recent `id:` field, from this
    /// event or an earlier one); `nil` while the server has set none or set it to empty. It is
    /// what a reconnect sends as `Last-Event-ID`.
    public var id: String?
    /// The reconnection delay a `retry:` field in this event's block asked for, if any.
    public var retry: Duration?

    /// Creates an event.
    /// - Parameters:
    ///   - event: The type; `"message"` by default.
    ///   - data: The data.
    ///   - id: The last event ID, if any.
    ///   - retry: The reconnection delay its block asked for, if any.
    public init(event: String = "message", data: String, id: String? = nil, retry: Duration? = nil) {
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry
    }

    /// `ServerSentEvent(message, id: 7, 42 bytes of data)`: the data's size, never the data.
    public var description: String {
        "ServerSentEvent(\(event.utf8.count <= 64 ? event : "\(event.utf8.count)-byte type")"
            + "\(id.map { ", id of \($0.utf8.count) bytes" } ?? ""), \(data.utf8.count) bytes of data)"
    }
}

/// Why an event stream ended that reconnecting cannot fix; the ``NetworkError`` that ends it
/// keeps this as its ``NetworkError/underlying`` error.
public enum EventStreamError: Error, Sendable, Hashable, SafelyDescribable {
    /// The response was not `text/event-stream` (its media type, without parameters, or
    /// `nil` when it had no `Content-Type`). Ends the stream as
    /// ``NetworkError/decodingFailed(_:underlying:)``.
    case notAnEventStream(contentType: String?)
    /// A line was longer than ``EventStreamOptions/maxLineLength`` bytes. Ends the stream as
    /// ``NetworkError/responseTooLarge(limit:)``'s underlying reason.
    case lineTooLong(limit: Int)
    /// One event's data and type were longer than ``EventStreamOptions/maxEventSize`` bytes.
    case eventTooLarge(limit: Int)
    /// The server ended the response (cleanly or not) while the stream was open: the reason a
    /// reconnect happens, and the final error when reconnects are used up.
    case serverEndedStream

    /// A short explanation with no data from the stream.
    public var description: String {
        switch self {
        case .notAnEventStream(let type):
            let shown = type.map { $0.utf8.count <= 100 ? "'\($0.filter { $0.isASCII && !$0.isNewline })'" : "a long type" }
            return "the response is not text/event-stream (Content-Type: \(shown ?? "none"))"
        case .lineTooLong(let limit): return "a line of the event stream is longer than \(limit) bytes"
        case .eventTooLarge(let limit): return "an event of the stream is larger than \(limit) bytes"
        case .serverEndedStream: return "the server ended the event stream"
        }
    }
}

/// Turns the bytes of a `text/event-stream` body into events, by the WHATWG HTML standard's
/// rules, in chunks split anywhere (inside a line, a CRLF or a UTF-8 character).
///
/// ```swift
/// var parser = ServerSentEventParser()
/// var events: [ServerSentEvent] = []
/// try parser.parse(Data("data: 1\n\ndata: 2\n".utf8), into: &events)   // one event
/// try parser.parse(Data("\n".utf8), into: &events)                       // the second
/// ```
///
/// - UTF-8, with one byte-order mark skipped at the start; malformed bytes become U+FFFD.
/// - CR, LF and CRLF end lines; a line starting with `:` is a comment; `field: value` loses one
///   space after the colon; a line without a colon is a field with an empty value.
/// - `data` lines join with LF; an event is dispatched at a blank line, and only if it has data;
///   `event` sets its type (`message` otherwise); `id` sets the last event ID (kept across events
///   and across ``reset()``) unless it contains NUL; `retry` counts only when all ASCII digits.
/// - Bytes after the last blank line (an event the server did not finish) are dropped at the
///   end of a response: they are never dispatched.
/// - A line longer than `maxLineLength` or an event larger than `maxEventSize` throws, so a
///   server that never ends a line cannot grow memory.
public struct ServerSentEventParser: Sendable {
    /// The longest line accepted, in bytes.
    let maxLineLength: Int
    /// The largest event accepted: its data and type, in bytes as received (a malformed byte
    /// becomes U+FFFD, three bytes, in the event's strings).
    let maxEventSize: Int
    /// The last valid `retry:` delay, if the server sent one (in milliseconds, saturating).
    public private(set) var reconnectionTime: Duration?
    /// The last event ID as of the last blank line (an `id:` of an event the server did not
    /// finish does not count): what a reconnect sends as `Last-Event-ID`; `nil` when empty.
    public var lastEventID: String? { lastIDString }
    /// How many lines (fields, comments and blank lines) were parsed since the parser was made:
    /// a sign of life from a server that only sends comments.
    package private(set) var linesParsed = 0
    /// How many events were dispatched since the parser was made: what a connection delivered.
    package private(set) var eventsDispatched = 0

    /// Bytes of a line that began in an earlier chunk.
    private var pending: [UInt8] = []
    /// The data buffer: `data` values, each followed by LF.
    private var dataBuffer = ByteScratch()
    private var typeBuffer = ByteScratch()
    private var idBuffer = ByteScratch()
    /// The last event ID string, set from ``idBuffer`` at every blank line; made only when the
    /// buffer changed (a string per event would cost an allocation).
    private var lastIDString: String?
    private var lastIDStringMatches = true
    /// A `retry:` field in the current event's block.
    private var blockRetry: Duration?
    /// The previous chunk ended with CR: an LF starting this one belongs to it.
    private var skipLF = false
    /// Bytes of the stream seen so far, up to 3: the byte-order mark check.
    private var startBytes = 0
    private var startBuffer: [UInt8] = []

    /// Creates a parser.
    /// - Parameters:
    ///   - maxLineLength: The longest line accepted, in bytes (64 KiB by default).
    ///   - maxEventSize: The largest event accepted, in bytes (1 MiB by default).
    public init(maxLineLength: Int = 64 * 1024, maxEventSize: Int = 1024 * 1024) {
        self.maxLineLength = max(1, maxLineLength)
        self.maxEventSize = max(1, maxEventSize)
    }

    /// Parses the next bytes of the stream, appending the events they complete.
    /// - Parameters:
    ///   - bytes: The next bytes, split anywhere.
    ///   - events: Where dispatched events are appended.
    /// - Throws: ``EventStreamError/lineTooLong(limit:)`` or ``EventStreamError/eventTooLarge(limit:)``.
    public mutating func parse(_ bytes: Data, into events: inout [ServerSentEvent]) throws(EventStreamError) {
        let result = bytes.withUnsafeBytes { buffer -> EventStreamError? in
            do throws(EventStreamError) {
                try parse(buffer, into: &events)
                return nil
            } catch {
                return error
            }
        }
        if let result { throw result }
    }

    /// Parses the next bytes of the stream, appending the events they complete.
    /// - Parameters:
    ///   - bytes: The next bytes, split anywhere.
    ///   - events: Where dispatched events are appended.
    /// - Throws: ``EventStreamError/lineTooLong(limit:)`` or ``EventStreamError/eventTooLarge(limit:)``.
    package mutating func parse(_ bytes: UnsafeRawBufferPointer, into events: inout [ServerSentEvent])
        throws(EventStreamError)
    {
        guard !bytes.isEmpty else { return }
        if events.capacity - events.count < 16 { events.reserveCapacity(events.count + max(16, bytes.count / 64)) }
        if startBytes < 3 {
            // The byte-order mark check: hold the first bytes until three are known.
            let take = min(3 - startBytes, bytes.count)
            startBuffer.append(contentsOf: bytes[0..<take])
            startBytes += take
            let rest = UnsafeRawBufferPointer(rebasing: bytes[take...])
            let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
            if startBuffer.count < 3 && startBuffer == Array(bom[0..<startBuffer.count]) { return }
            let held = startBuffer
            startBuffer = []
            startBytes = 3
            if held != bom {
                var failure: EventStreamError?
                held.withUnsafeBytes { held in
                    do throws(EventStreamError) { try scan(held, into: &events) } catch { failure = error }
                }
                if let failure { throw failure }
            }
            try scan(rest, into: &events)
            return
        }
        try scan(bytes, into: &events)
    }

    /// Ends the response: drops a line or an event the server did not finish, and gets ready for
    /// the next response (a reconnect). Keeps the last event ID (the next response starts with
    /// it) and the reconnection time.
    public mutating func reset() {
        pending.removeAll(keepingCapacity: true)
        idBuffer.removeAll()
        if let lastIDString { idBuffer.append(Array(lastIDString.utf8)) }
        lastIDStringMatches = true
        dataBuffer.removeAll()
        typeBuffer.removeAll()
        blockRetry = nil
        skipLF = false
        startBytes = 0
        startBuffer = []
    }

    private mutating func scan(_ bytes: UnsafeRawBufferPointer, into events: inout [ServerSentEvent])
        throws(EventStreamError)
    {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        var index = 0
        if skipLF {
            skipLF = false
            if base[0] == 0x0A { index = 1 }
        }
        var lineStart = index
        let raw = UnsafeRawPointer(base)
        while index < count {
            // Eight bytes at a time while none of them can end a line (none is below 0x0E).
            while index + 8 <= count {
                let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                if (word &- 0x0E0E_0E0E_0E0E_0E0E) & ~word & 0x8080_8080_8080_8080 != 0 { break }
                index += 8
            }
            guard index < count else { break }
            let byte = base[index]
            if byte > 0x0D || (byte != 0x0A && byte != 0x0D) {
                index += 1
                continue
            }
            // A line ends at `index`.
            if pending.isEmpty {
                if index - lineStart > maxLineLength { throw .lineTooLong(limit: maxLineLength) }
                try line(UnsafeBufferPointer(start: base + lineStart, count: index - lineStart), into: &events)
            } else {
                if pending.count + index - lineStart > maxLineLength { throw .lineTooLong(limit: maxLineLength) }
                pending.append(contentsOf: UnsafeBufferPointer(start: base + lineStart, count: index - lineStart))
                // Swapped out, so the line is read while `self` changes, with no copy.
                var whole: [UInt8] = []
                swap(&whole, &pending)
                var failure: EventStreamError?
                whole.withUnsafeBufferPointer { line in
                    do throws(EventStreamError) { try self.line(line, into: &events) } catch { failure = error }
                }
                whole.removeAll(keepingCapacity: true)
                swap(&whole, &pending)
                if let failure { throw failure }
            }
            if byte == 0x0D {
                if index + 1 < count {
                    if base[index + 1] == 0x0A { index += 1 }
                } else {
                    skipLF = true
                }
            }
            index += 1
            lineStart = index
        }
        if lineStart < count {
            if pending.count + count - lineStart > maxLineLength { throw .lineTooLong(limit: maxLineLength) }
            pending.append(contentsOf: UnsafeBufferPointer(start: base + lineStart, count: count - lineStart))
        }
    }

    /// One line, without its line end.
    private mutating func line(_ line: UnsafeBufferPointer<UInt8>, into events: inout [ServerSentEvent])
        throws(EventStreamError)
    {
        linesParsed &+= 1
        guard let first = line.first else { return dispatch(into: &events) }
        if first == 0x3A { return }  // ':' a comment
        var colon = 0
        while colon < line.count && line[colon] != 0x3A { colon += 1 }
        let name = UnsafeBufferPointer(rebasing: line[0..<colon])
        var valueStart = min(colon + 1, line.count)
        if valueStart < line.count && line[valueStart] == 0x20 { valueStart += 1 }
        let value = UnsafeBufferPointer(rebasing: line[valueStart...])
        switch name.count {
        case 4 where name[0] == 0x64 && name[1] == 0x61 && name[2] == 0x74 && name[3] == 0x61:  // data
            if dataBuffer.count + value.count + 1 + typeBuffer.count > maxEventSize { throw .eventTooLarge(limit: maxEventSize) }
            dataBuffer.append(value)
            dataBuffer.append(0x0A)
        case 5 where name[0] == 0x65 && name[1] == 0x76 && name[2] == 0x65 && name[3] == 0x6E && name[4] == 0x74:  // event
            if dataBuffer.count + value.count > maxEventSize { throw .eventTooLarge(limit: maxEventSize) }
            typeBuffer.removeAll()
            typeBuffer.append(value)
        case 2 where name[0] == 0x69 && name[1] == 0x64:  // id
            if value.contains(0) { return }
            if value.count > maxEventSize { throw .eventTooLarge(limit: maxEventSize) }
            if !idBuffer.equals(value) {
                idBuffer.removeAll()
                idBuffer.append(value)
                lastIDStringMatches = false
            }
        case 5 where name[0] == 0x72 && name[1] == 0x65 && name[2] == 0x74 && name[3] == 0x72 && name[4] == 0x79:  // retry
            guard !value.isEmpty else { return }
            var milliseconds: Int64 = 0
            for digit in value {
                guard digit >= 0x30 && digit <= 0x39 else { return }
                // Saturates: a hostile `retry:` of a thousand digits never traps.
                let (times, overflow1) = milliseconds.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times.addingReportingOverflow(Int64(digit - 0x30))
                milliseconds = overflow1 || overflow2 ? Int64.max : sum
            }
            let delay = milliseconds >= Int64.max / 1_000_000 ? Duration.conveyorMaximum : Duration.milliseconds(milliseconds)
            reconnectionTime = delay.clampedForConveyor
            blockRetry = reconnectionTime
        default:
            return
        }
    }

    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        let retry = blockRetry
        blockRetry = nil
        if !lastIDStringMatches {
            lastIDString = idBuffer.isEmpty ? nil : idBuffer.string(droppingLast: 0)
            lastIDStringMatches = true
        }
        guard !dataBuffer.isEmpty else {
            typeBuffer.removeAll()
            return
        }
        let data = dataBuffer.string(droppingLast: 1)
        let type = typeBuffer.isEmpty ? "message" : typeBuffer.string(droppingLast: 0)
        events.append(ServerSentEvent(event: type, data: data, id: lastIDString, retry: retry))
        eventsDispatched &+= 1
        dataBuffer.removeAll()
        typeBuffer.removeAll()
    }
}

/// Bytes gathered for one field, in storage kept from event to event: emptying it only resets a
/// count (an array's `removeAll(keepingCapacity:)` costs a pass through `replaceSubrange`).
struct ByteScratch: Sendable {
    private var storage: [UInt8] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    mutating func removeAll() { count = 0 }

    mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(count + bytes.count)
        let start = count
        storage.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            (base + start).update(from: source, count: bytes.count)
        }
        count += bytes.count
    }

    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { append($0) }
    }

    mutating func append(_ byte: UInt8) {
        reserve(count + 1)
        storage[count] = byte
        count += 1
    }

    /// Whether it holds exactly `bytes`.
    func equals(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == count else { return false }
        guard let other = bytes.baseAddress, count > 0 else { return true }
        return storage.withUnsafeBufferPointer { mine in
            guard let base = mine.baseAddress else { return false }
            return memcmp(base, other, count) == 0
        }
    }

    /// The bytes but the last `dropped`, decoded as UTF-8 (malformed bytes become U+FFFD).
    func string(droppingLast dropped: Int) -> String {
        storage.withUnsafeBufferPointer { String(decoding: $0[0..<max(0, count - dropped)], as: UTF8.self) }
    }

    private mutating func reserve(_ needed: Int) {
        guard needed > storage.count else { return }
        storage.append(contentsOf: repeatElement(0, count: max(needed - storage.count, storage.count, 64)))
    }
}
