#if canImport(UIKit) && !os(watchOS)
    public import UIKit
    import ConveyorPipeline

    /// UIKit's background tasks: `UIApplication.beginBackgroundTask` / `endBackgroundTask`.
    ///
    /// When the system's time runs out, this runner calls the behavior's expiration handler and
    /// ends the task itself right away, as UIKit requires; the behavior's later `endTask` for that
    /// task is then ignored.
    public struct UIApplicationBackgroundTaskRunner: BackgroundTaskRunner {
        /// Tasks ended by expiration, so a later `endTask` does not end them twice.
        private let expired = Locked<Set<Int>>([])

        /// Creates the runner.
        public init() {}

        /// Begins a UIKit background task.
        public func beginTask(named name: String, onExpiration: @escaping @Sendable () -> Void) async
            -> BackgroundTaskID?
        {
            let expired = self.expired
            return await MainActor.run {
                let current = Locked<UIBackgroundTaskIdentifier>(.invalid)
                let identifier = UIApplication.shared.beginBackgroundTask(withName: name) {
                    onExpiration()
                    let id = current.withLock { $0 }
                    guard id != .invalid else { return }
                    expired.withLock { _ = $0.insert(id.rawValue) }
                    MainActor.assumeIsolated { UIApplication.shared.endBackgroundTask(id) }
                }
                current.withLock { $0 = identifier }
                return identifier == .invalid ? nil : BackgroundTaskID(rawValue: identifier.rawValue)
            }
        }

        /// Ends a UIKit background task, unless expiration already ended it.
        public func endTask(_ id: BackgroundTaskID) async {
            let alreadyEnded = expired.withLock { $0.remove(id.rawValue) != nil }
            guard !alreadyEnded else { return }
            await MainActor.run {
                UIApplication.shared.endBackgroundTask(UIBackgroundTaskIdentifier(rawValue: id.rawValue))
            }
        }
    }
#endif
