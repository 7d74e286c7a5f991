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
        let bytes = Array(value.utf8)[...]
        do {
            let trimmed = HeaderBytes.trimmed(bytes)
            if let seconds = HeaderBytes.digits(trimmed, cap: Int(Int64.max)) {
                // Digits only; anything too long for Int is "very long": the longest wait there is.
                return seconds == Int(Int64.max) ? .conveyorMaximum : Duration.seconds(seconds).clampedForConveyor
            }
            // An HTTP-date, read by hand (no DateFormatter: it traps on non-ASCII text on Linux).
            guard let date = HTTPDate.parse(bytes: bytes, now: now) else { return nil }
            return .clampedSeconds(date.timeIntervalSince(now))
        }
    }
}
