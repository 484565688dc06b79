import Foundation

/// The base64 the age spec allows: the standard alphabet, canonical only (no stray bits in the last
/// character), unpadded in the header and padded in the armor.
enum StrictBase64 {
    /// Unpadded standard base64, as in stanza arguments, bodies and the header MAC.
    static func encodeUnpadded(_ data: some DataProtocol) -> String {
        var text = Data(data).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// Decodes canonical unpadded base64, or returns nil.
    static func decodeUnpadded(_ text: some StringProtocol) -> Data? {
        let text = String(text)
        guard text.utf8.count % 4 != 1 else { return nil }
        guard !text.contains("=") else { return nil }
        let padded = text + String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: padded), encodeUnpadded(data) == text else { return nil }
        return data
    }

    /// Decodes canonical padded base64, or returns nil.
    static func decodePadded(_ text: some StringProtocol) -> Data? {
        let text = String(text)
        guard text.utf8.count % 4 == 0, let data = Data(base64Encoded: text),
            data.base64EncodedString() == text
        else { return nil }
        return data
    }
}
