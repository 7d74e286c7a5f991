import Foundation

/// HTTP dates for the cache (`Date`, `Expires`, `Last-Modified`).
enum HTTPDate {
    /// Parses an HTTP-date. IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, what servers send) is
    /// read by hand, because a `DateFormatter` costs tens of microseconds to make; the obsolete
    /// RFC 850 and asctime forms fall back to ``RetryAfter``'s formatters.
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        if bytes.count == 29, let date = parseIMFFixdate(bytes) { return date }
        return RetryAfter.parseHTTPDate(text.trimmingCharacters(in: .whitespaces))
    }

    private static let months: [[UInt8]] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        .map { Array($0.utf8) }

    private static func parseIMFFixdate(_ b: [UInt8]) -> Date? {
        // "Sun, 06 Nov 1994 08:49:37 GMT"
        //  0123456789012345678901234567 8
        guard b[3] == UInt8(ascii: ","), b[4] == 32, b[7] == 32, b[11] == 32, b[16] == 32, b[19] == UInt8(ascii: ":"),
            b[22] == UInt8(ascii: ":"), b[25] == 32, Array(b[26..<29]) == Array("GMT".utf8),
            let day = number(b[5..<7]), let year = number(b[12..<16]), let hour = number(b[17..<19]),
            let minute = number(b[20..<22]), let second = number(b[23..<25]),
            let monthIndex = months.firstIndex(of: Array(b[8..<11])),
            (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
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
}
