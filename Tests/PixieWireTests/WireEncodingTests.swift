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
}
