import ConveyorPipeline
import ConveyorTestSupport
import Foundation
import Testing

/// The parsers of header values a server sends (contract rule 17): HTTP dates, `Content-Range`,
/// `Content-Type`. Each is checked against the RFC's examples, against a reference where one
/// exists (valid input only: the reference itself traps on hostile input on Linux), and with
/// generated hostile bytes, which must give `nil` or a sane value, never a trap.
@Suite struct HeaderParsingTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)  // 2026-09-21

    /// A reference formatter, used only on the valid ASCII text the test generates.
    static func reference(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = format
        return formatter
    }

    @Test func theRFCsThreeExamplesNameTheSameInstant() {
        // RFC 9110 §5.6.7.
        let expected = Date(timeIntervalSince1970: 784_111_777)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: Self.now) == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: Self.now) == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994", now: Self.now) == expected)
        #expect(HTTPDate.parse(" \tSun, 06 Nov 1994 08:49:37 GMT  ", now: Self.now) == expected)
        #expect(HTTPDate.format(expected) == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test func aTwoDigitYearMoreThanFiftyYearsAheadIsInThePast() {
        // RFC 9110 §5.6.7: now is 2026, so 76 is 2076 (50 years on) and 77 is 1977.
        #expect(HTTPDate.parse("Monday, 01-Jan-76 00:00:00 GMT", now: Self.now) == HTTPDate.parse("Thu, 01 Jan 2076 00:00:00 GMT"))
        #expect(HTTPDate.parse("Monday, 01-Jan-77 00:00:00 GMT", now: Self.now) == HTTPDate.parse("Sat, 01 Jan 1977 00:00:00 GMT"))
        #expect(HTTPDate.parse("Monday, 01-Jan-26 00:00:00 GMT", now: Self.now) == HTTPDate.parse("Thu, 01 Jan 2026 00:00:00 GMT"))
    }

    @Test func generatedDatesAgreeWithAReferenceFormatterInAllThreeForms() {
        let imf = Self.reference("EEE, dd MMM yyyy HH:mm:ss 'GMT'")
        let rfc850 = Self.reference("EEEE, dd-MMM-yy HH:mm:ss 'GMT'")
        let asctime = Self.reference("EEE MMM d HH:mm:ss yyyy")
        var random = SplitMix64(state: 30)
        for _ in 0..<3_000 {
            // 1900-01-01 ... 2100-12-31, whole seconds.
            let date = Date(timeIntervalSince1970: Double(Int64(random.next() % 6_311_390_400) - 2_208_988_800))
            let fixdate = imf.string(from: date)
            #expect(HTTPDate.parse(fixdate, now: Self.now) == date, "\(fixdate)")
            #expect(HTTPDate.format(date) == fixdate)
            var old = asctime.string(from: date)
            // asctime pads a one-digit day with a space: "Nov  6".
            if let space = old.utf8.firstIndex(of: 0x20), case let rest = old[old.index(after: space)...],
                let second = rest.firstIndex(of: " "), rest[rest.index(after: second)...].prefix(while: { $0 != " " }).count == 1
            {
                old.insert(" ", at: old.index(after: second))
            }
            #expect(HTTPDate.parse(old, now: Self.now) == date, "\(old)")
            // The two-digit year reads as within 50 years of now: compare only those dates.
            let year = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "GMT")!, from: date).year ?? 0
            if year > 1976, year <= 2076 {
                let short = rfc850.string(from: date)
                #expect(HTTPDate.parse(short, now: Self.now) == date, "\(short)")
            }
        }
    }

    @Test(arguments: [
        "Sun\u{0731}, 06 Nov 1994 08:49:37 GMT",  // the bytes that ended the process through DateFormatter
        "Sun\u{0731}", "Sun, 06 Nov 1994 08:49:37 GMT\u{0000}", "Sun, 06 Nov 1994 08:49:37 gmt", "sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37 +0000", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sundae, 06-Nov-94 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994", "Sun Nov  6 08:49:37 94", "", "0", "-1", "\u{FFFD}\u{FFFD}\u{FFFD}",
        "Sun, ０６ Nov 1994 08:49:37 GMT",  // full-width digits
    ])
    func anythingElseIsNoDate(_ text: String) {
        #expect(HTTPDate.parse(text, now: Self.now) == nil)
    }

    @Test func aLeapDayAndALeapSecondAreDates() {
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 12:00:00 GMT") == Date(timeIntervalSince1970: 1_709_208_000))
        #expect(HTTPDate.parse("Sat, 31 Dec 2016 23:59:60 GMT") == Date(timeIntervalSince1970: 1_483_228_800))
    }

    @Test func generatedHostileBytesGiveNoDateOrAValidOne() {
        var random = SplitMix64(state: 17)
        let alphabet: [UInt8] = Array("SunMonTueWedThuFriSatJanFebNovDecGMT0123456789 ,-:\t".utf8) + [0, 0xC2, 0xA0, 0xDC, 0xB1, 0xFF, 0x80]
        var parsed = 0
        for _ in 0..<50_000 {
            var bytes = Array("Sun, 06 Nov 1994 08:49:37 GMT".utf8)
            for _ in 0..<Int(random.next() % 4) {
                let at = Int(random.next() % UInt64(bytes.count + 1))
                switch random.next() % 3 {
                case 0 where at < bytes.count: bytes[at] = alphabet[Int(random.next() % UInt64(alphabet.count))]
                case 1: bytes.insert(alphabet[Int(random.next() % UInt64(alphabet.count))], at: at)
                default: if at < bytes.count { bytes.remove(at: at) }
                }
            }
            if let date = HTTPDate.parse(bytes: bytes[...], now: Self.now) {
                parsed += 1
                #expect(HTTPDate.parse(HTTPDate.format(date)) == date)
            }
        }
        #expect(parsed > 0 && parsed < 50_000)  // the generator makes both kinds
    }

    @Test func contentRangeReadsTheRFCsFormsAndRefusesTheRest() throws {
        let range = try #require(ContentRange("bytes 21010-47021/47022"))
        #expect(range.first == 21_010 && range.last == 47_021 && range.completeLength == 47_022)
        #expect(ContentRange("Bytes 0-0/*")?.completeLength == nil)
        #expect(ContentRange(" bytes 5-9/10 ")?.first == 5)
        for bad in ["bytes */47022", "bytes 9-5/10", "bytes 5-10/10", "items 0-1/2", "bytes 0-/2", "bytes -5/10", "bytes 0-1",
            "bytes 99999999999999999999-1/2", "bytes 0-9223372036854775807/*", "bytes ٠-1/2", "bytes 0-1/2x", ""]
        {
            #expect(ContentRange(bad) == nil, "\(bad)")
        }
    }

    @Test func contentTypeReadsTypeSubtypeAndQuotedParameters() throws {
        let type = try #require(MediaType(#"Application/Vnd.API+JSON ; Charset="utf-8" ; q="a\"b;c" ; bad name=1"#))
        #expect(type.type == "application" && type.subtype == "vnd.api+json" && type.isJSON)
        #expect(type.parameter("charset") == "utf-8" && type.parameter("q") == #"a"b;c"#)
        #expect(type.parameters.count == 2)
        #expect(MediaType("application/x-www-form-urlencoded;charset=UTF-8")?.isFormURLEncoded == true)
        for bad in ["", "json", "/json", "application/", "appli cation/json", "application/jsön", "text/plain\u{0}"] {
            #expect(MediaType(bad) == nil, "\(bad)")
        }
    }

    @Test func generatedHeaderBytesNeverTrapAndGiveSaneValues() {
        var random = SplitMix64(state: 5)
        let pieces = ["bytes", " ", "-", "/", "*", "0", "9", "99999999999999999999", ";", "=", "\"", "\\", "application", "json",
            "+", "é", "\u{0}", "\r", "\n", "\u{0731}", "\u{FFFD}"]
        for _ in 0..<20_000 {
            let text = (0..<Int(random.next() % 10)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
            if let range = ContentRange(text) {
                #expect(range.first <= range.last && range.completeLength.map { range.last < $0 } ?? true, "\(text)")
            }
            if let type = MediaType(text) { #expect(!type.type.isEmpty && !type.subtype.isEmpty, "\(text)") }
            _ = HTTPDate.parse(text)
            _ = HeaderBytes.deltaSeconds(text)
        }
    }
}
