import Foundation

/// A JSON string field with a fixed set of values. Decoding any other string fails with a message that lists
/// the values, which the HTTP layer turns into a 400 naming the field.
public protocol WireChoice: RawRepresentable<String>, CaseIterable, Codable, Sendable, Hashable {}

extension WireChoice {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Self(rawValue: text) else {
            let values = Self.allCases.map { "\"\($0.rawValue)\"" }
            let list = values.count > 1 ? values.dropLast().joined(separator: ", ") + " or " + values.last! : values[0]
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "must be \(list)")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
