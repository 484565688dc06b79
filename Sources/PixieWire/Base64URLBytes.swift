import Foundation
import SiblingsCrypto

/// A byte string carried in JSON as base64url without padding; decoding anything else fails with a message
/// naming the encoding, which the HTTP layer turns into a 400 naming the field.
public struct Base64URLBytes: Codable, Sendable, Hashable {
    public var data: Data

    public init(_ data: Data) { self.data = data }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let data = Data(base64URLEncoded: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "must be base64url without padding (RFC 4648 §5)")
        }
        self.data = data
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data.base64URLEncodedString())
    }
}
