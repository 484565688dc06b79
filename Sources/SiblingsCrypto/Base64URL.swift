import Foundation

extension Data {
    /// Decodes base64url without padding (RFC 4648 §5): WebAuthn's encoding (WebAuthn L3 §3) and that of every
    /// byte field in Pixie's JSON.
    /// Returns nil for any other alphabet, for padding, for whitespace and for a length no encoding has.
    public init?(base64URLEncoded text: some StringProtocol) {
        var standard = ""
        standard.reserveCapacity(text.utf8.count + 3)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "A"..."Z", "a"..."z", "0"..."9": standard.unicodeScalars.append(scalar)
            case "-": standard.append("+")
            case "_": standard.append("/")
            default: return nil
            }
        }
        switch standard.utf8.count % 4 {
        case 0: break
        case 2: standard += "=="
        case 3: standard += "="
        default: return nil
        }
        guard let decoded = Data(base64Encoded: standard) else { return nil }
        // Refuse non-canonical encodings (unused low bits set), so each byte string has one spelling.
        guard decoded.base64URLEncodedString() == String(text) else { return nil }
        self = decoded
    }

    /// base64url without padding (RFC 4648 §5).
    public func base64URLEncodedString() -> String {
        var text = base64EncodedString()
        while text.last == "=" { text.removeLast() }
        return String(
            text.map { character -> Character in
                switch character {
                case "+": return "-"
                case "/": return "_"
                default: return character
                }
            })
    }
}
