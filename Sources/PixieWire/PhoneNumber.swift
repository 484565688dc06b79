import Foundation

/// A phone number in E.164 form (ITU-T E.164: `+`, a country code, at most 15 digits in all).
///
/// Parsing is forgiving of the separators people type (spaces, `-`, `.`, parentheses) and strict about the
/// rest, so that one number has one spelling before it is hashed into a phone_id.
public struct PhoneNumber: Sendable, Hashable, CustomStringConvertible {
    /// `+` and 7 to 15 digits, the first not 0.
    public let e164: String

    /// Parses `text`, which may use ASCII spaces, `-`, `.` and parentheses between the digits. Only the
    /// ASCII digits 0–9 count, as E.164 requires: the string is read scalar by scalar, not by Swift
    /// `Character` (a grapheme cluster), so a digit followed by a combining mark or a zero-width joiner, a
    /// full-width digit or another script's digit is refused, never read as a digit. Otherwise one number
    /// would have many spellings, each with its own phone_id.
    public init(_ text: String) throws(PixieWireError) {
        var digits = ""
        var sawPlus = false
        var first = true
        for scalar in text.unicodeScalars.drop(while: { $0 == " " || $0 == "\t" }).reversed()
            .drop(while: { $0 == " " || $0 == "\t" }).reversed()
        {
            defer { first = false }
            switch scalar.value {
            case 0x2B where first: sawPlus = true  // "+"
            case 0x20, 0x2D, 0x2E, 0x28, 0x29: continue  // " ", "-", ".", "(", ")"
            case 0x30...0x39: digits.unicodeScalars.append(scalar)
            default:
                let shown =
                    scalar.isASCII && scalar.properties.isAlphabetic
                    ? "'\(Character(scalar))'" : "U+\(String(scalar.value, radix: 16, uppercase: true))"
                throw PixieWireError(
                    .malformed,
                    "the phone number has \(shown) in it; send it in E.164 form with ASCII digits, like +14155550123")
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
