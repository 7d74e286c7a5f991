/// The framing cases of Tests/Server/server.py (`/framing/<kind>`) and what every transport must
/// make of each (contract rule 17: one framing policy above the transport). `"200"` is a response;
/// anything else is a `NetworkError.name`. Shared by the URLSession tests and the
/// AsyncHTTPClient tests, so both are held to one table.
public enum FramingCases {
    public static let expected: [(kind: String, outcome: String)] = [
        ("two-lengths", "transportFailed"),  // RFC 9112 §6.3
        ("same-lengths", "transportFailed"),  // AsyncHTTPClient refuses any duplicate; so do we
        ("bare-cr", "transportFailed"),  // RFC 9112 §2.2
        ("nul", "transportFailed"),  // RFC 9110 §5.5
        ("latin1", "transportFailed"),  // not UTF-8: FoundationNetworking cannot represent it
        ("utf8", "200"),  // obs-text that is valid UTF-8: kept as it is
        ("plain", "200"),
    ]

    /// The `X-Odd` value the `utf8` case must arrive with.
    public static let utf8Value = "\u{0731} é"
}
