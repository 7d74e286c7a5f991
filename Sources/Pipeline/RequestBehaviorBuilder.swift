/// Builds a list of behaviors from a block, so a client reads as a list:
///
/// ```swift
/// let client = NetworkClient(baseURL: api) {
///     AuthTokenBehavior(tokens: keychain)
///     if verbose { LoggingBehavior(sink: PrintLogSink()) }
///     for header in extraHeaders { HeadersBehavior(header) }
/// }
/// ```
@resultBuilder
public enum RequestBehaviorBuilder {
    /// One behavior.
    public static func buildExpression(_ behavior: any RequestBehavior) -> [any RequestBehavior] { [behavior] }
    /// A list of behaviors.
    public static func buildExpression(_ behaviors: [any RequestBehavior]) -> [any RequestBehavior] { behaviors }
    /// Statements in order.
    public static func buildBlock(_ parts: [any RequestBehavior]...) -> [any RequestBehavior] { parts.flatMap { $0 } }
    /// An `if` without `else`.
    public static func buildOptional(_ part: [any RequestBehavior]?) -> [any RequestBehavior] { part ?? [] }
    /// The first branch of an `if`/`else` or `switch`.
    public static func buildEither(first part: [any RequestBehavior]) -> [any RequestBehavior] { part }
    /// The second branch of an `if`/`else` or `switch`.
    public static func buildEither(second part: [any RequestBehavior]) -> [any RequestBehavior] { part }
    /// A `for` loop.
    public static func buildArray(_ parts: [[any RequestBehavior]]) -> [any RequestBehavior] { parts.flatMap { $0 } }
    /// An `if #available` block.
    public static func buildLimitedAvailability(_ part: [any RequestBehavior]) -> [any RequestBehavior] { part }
}
