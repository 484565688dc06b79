import Foundation
import PixieWire
import Testing

@Suite("base64url and E.164")
struct WireEncodingTests {
    @Test func base64URLRoundTripsEveryLength() {
        for length in 0..<70 {
            let data = Data((0..<length).map { UInt8(($0 * 37 + 11) & 0xFF) })
            let text = data.base64URLEncodedString()
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Data(base64URLEncoded: text) == data)
        }
    }

    @Test func base64URLKnownValues() {
        // RFC 4648 §10 test vectors, without padding and in the URL alphabet.
        for (plain, encoded) in [("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE")]
        {
            #expect(Data(plain.utf8).base64URLEncodedString() == encoded)
        }
        #expect(Data([0xFB, 0xFF]).base64URLEncodedString() == "-_8")
    }

    @Test func base64URLRefusesOtherSpellings() {
        for bad in ["Zg==", "Zm9v+", "Zm9v/", "Z", "Zm9vY", " Zg", "Zg\n", "Zh", "Zm9=v"] {
            #expect(Data(base64URLEncoded: bad) == nil, "\(bad)")
        }
    }

    @Test func base64URLBytesInJSON() throws {
        struct Box: Codable { let bytes: Base64URLBytes }
        let decoded = try JSONDecoder().decode(Box.self, from: Data(#"{"bytes":"-_8"}"#.utf8))
        #expect(decoded.bytes.data == Data([0xFB, 0xFF]))
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(Box.self, from: Data(#"{"bytes":"+/8="}"#.utf8))
        }
        let encoded = try JSONEncoder().encode(decoded)
        #expect(String(decoding: encoded, as: UTF8.self) == #"{"bytes":"-_8"}"#)
    }

    @Test func phoneNumbersNormalize() throws {
        #expect(try PhoneNumber("+1 (415) 555-0123").e164 == "+14155550123")
        #expect(try PhoneNumber(" +44 20 7946 0958 ").e164 == "+442079460958")
        #expect(try PhoneNumber("+14155550123").redacted == "+•••••••••23")
    }

    @Test func phoneNumbersRefuseWhatIsNotE164() {
        for bad in [
            "14155550123", "+0123456789", "+12345", "+1234567890123456", "+1415555012a", "", "+", "++14155550123",
        ] {
            #expect(throws: PixieWireError.self, "\(bad)") { try PhoneNumber(bad) }
        }
    }

    /// Issue 14: a Swift Character is a grapheme cluster, so "5" plus a combining mark or a zero-width
    /// joiner once matched "0"..."9" and each variant became a number of its own, with its own phone_id.
    @Test func phoneNumbersAreASCIIDigitsOnly() {
        for bad in [
            "+1415555\u{200D}0123",  // zero-width joiner
            "+14155550123\u{0301}",  // combining acute accent on the last digit
            "+1415\u{20E3}5550123",  // combining enclosing keycap
            "+\u{FF11}4155550123",  // full-width 1
            "+1\u{0664}155550123",  // Arabic-Indic 4
            "+1\u{096A}155550123",  // Devanagari 4
            "+1\u{1D7DC}155550123",  // mathematical double-struck 4
            "+1415555\u{00A0}0123",  // no-break space
            "+1415555\u{2011}0123",  // non-breaking hyphen
            "\u{FF0B}14155550123",  // full-width plus
            "+1415555\u{200B}0123",  // zero-width space
        ] {
            #expect(throws: PixieWireError.self, "\(bad.unicodeScalars.map { String($0.value, radix: 16) })") {
                try PhoneNumber(bad)
            }
        }
        // What is still accepted: ASCII separators and surrounding blanks.
        #expect((try? PhoneNumber("\t+1 415.555-0123 ")).map(\.e164) == "+14155550123")
    }
}
