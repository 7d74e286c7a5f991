public import ConveyorPipeline

/// A decoded value together with the response it came from and the attempts it took: what
/// ``NetworkClient/response(for:)`` returns.
public struct Response<Value> {
    /// The decoded output.
    public var value: Value
    /// The final response: status, headers and body.
    public var response: HTTPResponse
    /// How many attempts the request took (1 when it was not retried).
    public var attempts: Int

    /// Creates a response.
    /// - Parameters:
    ///   - value: The decoded output.
    ///   - response: The response it was decoded from.
    ///   - attempts: How many attempts the request took.
    package init(value: Value, response: HTTPResponse, attempts: Int) {
        self.value = value
        self.response = response
        self.attempts = attempts
    }
}

extension Response: Sendable where Value: Sendable {}
