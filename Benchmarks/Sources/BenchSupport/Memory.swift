import Foundation

/// This process's memory, from `/proc/self/status`.
public enum Memory {
    /// The resident set size now, in bytes.
    public static var resident: Int { field("VmRSS") }
    /// The peak resident set size since the process started or ``resetPeak()``, in bytes.
    public static var peak: Int { field("VmHWM") }

    /// Resets the peak to the current resident size (writing 5 to `/proc/self/clear_refs`).
    /// - Returns: Whether the kernel allowed it.
    @discardableResult
    public static func resetPeak() -> Bool {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? handle.close() }
        return (try? handle.write(contentsOf: Data("5".utf8))) != nil
    }

    /// A `kB` field of `/proc/self/status` in bytes; 0 where it cannot be read.
    private static func field(_ name: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            let number = line.dropFirst(name.count + 1).split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) }
            return (number ?? 0) * 1024
        }
        return 0
    }
}
