package import Foundation

/// HTTP dates (RFC 9110 §5.6.7), read and written by hand over bytes: the one place that reads a
/// `Date`, `Expires`, `Last-Modified`, `Retry-After` or any other date a server sends.
///
/// No `DateFormatter` and no locale machinery: on Linux, Foundation's formatter traps on a
/// non-ASCII character (`Sun` followed by U+0731 ends the process) and costs tens of
/// microseconds to make. Parsing is total and linear in the input: the three forms below are
/// accepted, everything else is "no date" (`nil`).
///
/// - IMF-fixdate, what servers send: `Sun, 06 Nov 1994 08:49:37 GMT`
/// - the obsolete RFC 850 form: `Sunday, 06-Nov-94 08:49:37 GMT` (a two-digit year more than
///   50 years in the future means the most recent past year with those digits)
/// - the obsolete asctime form: `Sun Nov  6 08:49:37 1994`
///
/// Names of days and months and `GMT` are case-sensitive (as the grammar says); leading and
/// trailing spaces and tabs are ignored; the day name is not checked against the date; the year
/// is 0001–9999 (the fuzz target found that year 0000 could not be written back).
package enum HTTPDate {
    /// The date `text` names, or `nil` when it is not an HTTP-date.
    /// - Parameters:
    ///   - text: A header value.
    ///   - now: The current time, for a two-digit year (RFC 850 form).
    package static func parse(_ text: some StringProtocol, now: Date = Date()) -> Date? {
        parse(bytes: Array(text.utf8)[...], now: now)
    }

    /// The date `bytes` name, or `nil`: see ``parse(_:now:)``.
    package static func parse(bytes: ArraySlice<UInt8>, now: Date = Date()) -> Date? {
        let trimmed = HeaderBytes.trimmed(bytes)
        guard trimmed.count >= 24, trimmed.count <= 33 else { return nil }  // asctime is 24 bytes, RFC 850 at most 33
        let b = Array(trimmed)
        if b[3] == 0x2C { return imfFixdate(b) }
        if b[3] == 0x20 { return asctime(b) }
        return rfc850(b, now: now)
    }

    /// `date` as an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT` (whole seconds, years
    /// 0001–9999; outside them the nearest of those).
    package static func format(_ date: Date) -> String {
        let limit = 253_402_300_799.0  // 9999-12-31 23:59:59
        let first = -62_135_596_800.0  // 0001-01-01 00:00:00
        let raw = date.timeIntervalSince1970
        let seconds = raw.isNaN ? 0 : Int(max(first, min(limit, raw.rounded(.down))))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let inDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let weekday = ((days % 7) + 11) % 7  // 1970-01-01 was a Thursday (index 4 from Sunday)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        var yearText = "\(year)"
        while yearText.utf8.count < 4 { yearText = "0" + yearText }
        return "\(dayNames[weekday]), \(two(day)) \(monthNames[month - 1]) \(yearText) "
            + "\(two(inDay / 3_600)):\(two(inDay / 60 % 60)):\(two(inDay % 60)) GMT"
    }

    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    // "Sun, 06 Nov 1994 08:49:37 GMT"
    //  0123456789012345678901234567 8
    private static func imfFixdate(_ b: [UInt8]) -> Date? {
        guard b.count == 29, isDayName(b[0..<3]), b[4] == 0x20, b[7] == 0x20, b[11] == 0x20, b[16] == 0x20,
            b[25] == 0x20, isGMT(b[26..<29]),
            let day = twoDigits(b[5..<7]), let month = month(b[8..<11]), let year = HeaderBytes.digits(b[12..<16])
        else { return nil }
        return date(year: year, month: month, day: day, time: b[17..<25])
    }

    // "Sunday, 06-Nov-94 08:49:37 GMT"
    private static func rfc850(_ b: [UInt8], now: Date) -> Date? {
        guard let comma = b.firstIndex(of: 0x2C), isLongDayName(b[0..<comma]), b.count == comma + 24 else { return nil }
        let d = comma + 2  // "06-Nov-94 08:49:37 GMT"
        guard b[comma + 1] == 0x20, b[d + 2] == 0x2D, b[d + 6] == 0x2D, b[d + 9] == 0x20, b[d + 18] == 0x20,
            isGMT(b[(d + 19)..<(d + 22)]),
            let day = twoDigits(b[d..<(d + 2)]), let month = month(b[(d + 3)..<(d + 6)]),
            let shortYear = twoDigits(b[(d + 7)..<(d + 9)])
        else { return nil }
        // RFC 9110 §5.6.7: more than 50 years in the future means the most recent past year.
        let nowSeconds = now.timeIntervalSince1970
        let nowDays = nowSeconds.isFinite ? Int(max(-3e6, min(3e6, (nowSeconds / 86_400).rounded(.down)))) : 0
        let (thisYear, _, _) = civil(fromDays: nowDays)
        var year = thisYear - thisYear % 100 + shortYear
        if year > thisYear + 50 { year -= 100 }
        return date(year: year, month: month, day: day, time: b[(d + 10)..<(d + 18)])
    }

    // "Sun Nov  6 08:49:37 1994"
    //  012345678901234567890123
    private static func asctime(_ b: [UInt8]) -> Date? {
        guard b.count == 24, isDayName(b[0..<3]), b[7] == 0x20, b[10] == 0x20, b[19] == 0x20,
            let month = month(b[4..<7]), let year = HeaderBytes.digits(b[20..<24])
        else { return nil }
        let day: Int?
        if b[8] == 0x20 { day = HeaderBytes.digits(b[9..<10]) } else { day = twoDigits(b[8..<10]) }
        guard let day else { return nil }
        return date(year: year, month: month, day: day, time: b[11..<19])
    }

    /// The date of a valid calendar day and an `HH:MM:SS` time (second 60, a leap second, is
    /// allowed and counts as the next second).
    private static func date(year: Int, month: Int, day: Int, time t: ArraySlice<UInt8>) -> Date? {
        let s = t.startIndex
        guard t.count == 8, t[s + 2] == 0x3A, t[s + 5] == 0x3A,
            let hour = twoDigits(t[s..<(s + 2)]), let minute = twoDigits(t[(s + 3)..<(s + 5)]),
            let second = twoDigits(t[(s + 6)..<(s + 8)]),
            hour < 24, minute < 60, second <= 60, year >= 1, day >= 1, day <= daysIn(month: month, year: year)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    private static func twoDigits(_ b: ArraySlice<UInt8>) -> Int? { b.count == 2 ? HeaderBytes.digits(b) : nil }

    private static func isGMT(_ b: ArraySlice<UInt8>) -> Bool { b.elementsEqual("GMT".utf8) }

    private static func isDayName(_ b: ArraySlice<UInt8>) -> Bool { dayNames.contains { b.elementsEqual($0.utf8) } }

    private static func isLongDayName(_ b: ArraySlice<UInt8>) -> Bool {
        longDayNames.contains { b.elementsEqual($0.utf8) }
    }

    private static func month(_ b: ArraySlice<UInt8>) -> Int? {
        monthNames.firstIndex { b.elementsEqual($0.utf8) }.map { $0 + 1 }
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (the inverse of the above).
    private static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
