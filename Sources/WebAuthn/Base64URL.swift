import Foundation

/// Base64url without padding (RFC 4648 §5), which WebAuthn L3 §3 ("Base64url Encoding") uses for
/// challenges in clientDataJSON and for every binary field of the JSON serialization (§5.1.8, §5.1.9).
public enum Base64URL {
    /// The unpadded base64url text of `data`.
    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes of unpadded base64url `text`; nil for padding, `+`, `/`, whitespace or any other
    /// character outside the base64url alphabet, or an impossible length.
    public static func decode(_ text: some StringProtocol) -> Data? {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        guard text.utf8.allSatisfy(alphabet.contains), text.utf8.count % 4 != 1 else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard)
    }
}
