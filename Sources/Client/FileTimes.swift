import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A file's times from `stat`, whose field names differ by platform (Darwin's `st_mtimespec`,
/// Glibc's `st_mtim`): the one platform-specific line of the upload-copy sweep, kept here.
enum FileTimes {
    /// When the file `info` describes was last modified, to the second.
    static func modified(_ info: stat) -> Date {
        #if canImport(Darwin)
            Date(timeIntervalSince1970: TimeInterval(info.st_mtimespec.tv_sec))
        #else
            Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec))
        #endif
    }
}
