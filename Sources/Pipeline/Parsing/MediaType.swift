/// A `Content-Type` value (RFC 9110 §8.3.1): `type/subtype` and its parameters, read over bytes,
/// total and linear. Type, subtype and parameter names are lowercased (ASCII); a parameter value
/// may be quoted (with `\` escapes). A value without `type/subtype` is `nil`.
package struct MediaType: Sendable, Hashable {
    /// The top-level type, lowercased: `application`.
    package var type: String
    /// The subtype, lowercased: `json`, `vnd.api+json`.
    package var subtype: String
    /// The parameters in order, names lowercased: `[("charset", "utf-8")]`.
    package var parameters: [Parameter]

    /// One `name=value` parameter.
    package struct Parameter: Sendable, Hashable {
        package var name: String
        package var value: String
    }

    /// Reads a header value.
    package init?(_ value: String) {
        guard let parsed = Self.parse(Array(value.utf8)[...]) else { return nil }
        self = parsed
    }

    private init(type: String, subtype: String, parameters: [Parameter]) {
        self.type = type
        self.subtype = subtype
        self.parameters = parameters
    }

    /// The value of the first parameter named `name` (lowercase).
    package func parameter(_ name: String) -> String? { parameters.first { $0.name == name }?.value }

    /// `application/json` or any `+json` subtype.
    package var isJSON: Bool { (type == "application" && subtype == "json") || subtype.hasSuffix("+json") }

    /// `application/x-www-form-urlencoded`.
    package var isFormURLEncoded: Bool { type == "application" && subtype == "x-www-form-urlencoded" }

    private static func lowered(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.map(HeaderBytes.lower), as: UTF8.self)
    }

    private static func parse(_ bytes: ArraySlice<UInt8>) -> MediaType? {
        let semicolon = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.endIndex
        let essence = HeaderBytes.trimmed(bytes[bytes.startIndex..<semicolon])
        guard let slash = essence.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let type = essence[essence.startIndex..<slash]
        let subtype = essence[(slash + 1)...]
        guard !type.isEmpty, !subtype.isEmpty, type.allSatisfy(isTokenByte), subtype.allSatisfy(isTokenByte) else { return nil }
        var parameters: [Parameter] = []
        var index = semicolon
        while index < bytes.endIndex {
            // `index` is at a `;`: the parameter runs to the next `;` outside a quoted string.
            var end = index + 1
            var quoted = false
            var escaped = false
            while end < bytes.endIndex {
                let byte = bytes[end]
                if escaped {
                    escaped = false
                } else if quoted, byte == 0x5C {
                    escaped = true
                } else if byte == 0x22 {
                    quoted.toggle()
                } else if byte == UInt8(ascii: ";"), !quoted {
                    break
                }
                end += 1
            }
            let parameter = HeaderBytes.trimmed(bytes[(index + 1)..<end])
            if let equals = parameter.firstIndex(of: UInt8(ascii: "=")) {
                let name = HeaderBytes.trimmed(parameter[parameter.startIndex..<equals])
                let value = HeaderBytes.unquoted(HeaderBytes.trimmed(parameter[(equals + 1)...]))
                if !name.isEmpty, name.allSatisfy(isTokenByte) {
                    parameters.append(Parameter(name: lowered(name), value: String(decoding: value, as: UTF8.self)))
                }
            }
            index = end
        }
        return MediaType(type: lowered(type), subtype: lowered(subtype), parameters: parameters)
    }

    /// tchar (RFC 9110 §5.6.2).
    @inline(__always)
    private static func isTokenByte(_ byte: UInt8) -> Bool { HTTPHeaders.isTokenByte(byte) }
}
