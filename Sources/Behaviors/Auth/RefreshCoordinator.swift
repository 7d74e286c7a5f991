import ConveyorPipeline

/// Runs at most one token refresh at a time: callers that arrive while one is running wait for
/// it and share its result. This is coordination state shared by all requests (like a lock),
/// not per-request state.
actor RefreshCoordinator {
    private var inFlight: Task<String, any Error>?
    private(set) var refreshCount = 0

    /// Joins the running refresh, or starts one.
    func refresh(replacing expired: String?, using refresher: any TokenRefresher) async throws -> String {
        if let inFlight { return try await inFlight.value }
        refreshCount += 1
        let task = Task { try await refresher.refreshToken(replacing: expired) }
        inFlight = task
        defer { inFlight = nil }
        return try await task.value
    }
}
