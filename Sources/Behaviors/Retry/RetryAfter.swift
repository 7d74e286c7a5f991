import ConveyorPipeline
public import Foundation

/// Parses the `Retry-After` header: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
public enum RetryAfter {
    /// The wait a `Retry-After` value asks for.
    /// - Parameters:
    ///   - value: The header value, e.g. `"120"` or `"Wed, 21 Oct 2026 07:28:00 GMT"`.
    ///   - now: The current time, for HTTP-dates.
    /// - Returns: The wait (zero for a date in the past, at most 100 years), or `nil` for a
    ///   negative or unparsable value.
    public static func delay(from value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            // Digits only; anything too long for Int is "very long": the longest wait there is.
            return Int(trimmed).map { Duration.seconds($0).clampedForConveyor } ?? .conveyorMaximum
        }
        guard let date = parseHTTPDate(trimmed) else { return nil }
        return .clampedSeconds(date.timeIntervalSince(now))
    }

    /// IMF-fixdate, and the obsolete RFC 850 and asctime forms.
    static func parseHTTPDate(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
