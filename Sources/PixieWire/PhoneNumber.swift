import Foundation

/// A phone number in E.164 form (ITU-T E.164: `+`, a country code, at most 15 digits in all).
///
/// Parsing is forgiving of the separators people type (spaces, `-`, `.`, parentheses) and strict about the
/// rest, so that one number has one spelling before it is hashed into a phone_id.
public struct PhoneNumber: Sendable, Hashable, CustomStringConvertible {
    /// `+` and 7 to 15 digits, the first not 0.
    public let e164: String

    public init(_ text: String) throws(PixieWireError) {
        var digits = ""
        var sawPlus = false
        for (index, character) in text.trimmingCharacters(in: .whitespaces).enumerated() {
            switch character {
            case "+" where index == 0: sawPlus = true
            case " ", "-", ".", "(", ")": continue
            case "0"..."9": digits.append(character)
            default:
                throw PixieWireError(
                    .malformed, "the phone number has '\(character)' in it; send it in E.164 form, like +14155550123")
            }
        }
        guard sawPlus, (7...15).contains(digits.count), digits.first != "0" else {
            throw PixieWireError(
                .malformed,
                "the phone number is not in E.164 form: a '+', the country code and the number, 7 to 15 digits "
                    + "(like +14155550123)")
        }
        e164 = "+" + digits
    }

    public var description: String { e164 }

    /// The number with all but the last two digits masked, for logs.
    public var redacted: String { "+" + String(repeating: "•", count: e164.count - 3) + e164.suffix(2) }
}
