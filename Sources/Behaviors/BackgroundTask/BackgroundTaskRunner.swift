/// Identifies a background task begun by a ``BackgroundTaskRunner``.
public struct BackgroundTaskID: Hashable, Sendable {
    /// The platform's identifier, e.g. `UIBackgroundTaskIdentifier.rawValue`.
    public let rawValue: Int

    /// Creates an identifier.
    /// - Parameter rawValue: The platform's identifier.
    public init(rawValue: Int) { self.rawValue = rawValue }
}

/// Begins and ends background tasks for ``BackgroundTaskBehavior``: on iOS,
/// `UIApplicationBackgroundTaskRunner` (UIKit's `beginBackgroundTask`); in tests, a fake.
public protocol BackgroundTaskRunner: Sendable {
    /// Asks for time to finish work in the background.
    /// - Parameters:
    ///   - name: A name for debugging.
    ///   - onExpiration: Called if the system runs out of time before the task ends.
    /// - Returns: The task's identifier, or `nil` if none could be started.
    func beginTask(named name: String, onExpiration: @escaping @Sendable () -> Void) async -> BackgroundTaskID?

    /// Ends a task. ``BackgroundTaskBehavior`` calls it exactly once for each task it began.
    /// - Parameter id: The identifier `beginTask` returned.
    func endTask(_ id: BackgroundTaskID) async
}
