import Foundation
import PixieWire
import SiblingsCrypto

/// The fields of pixie-server's JSON bodies (docs/pixie-protocol.md): base64url, which is canonical only (what is
/// accepted encodes back to the same text), the JSON wrapper around it, and E.164 phone numbers (an accepted
/// number is its own canonical form).
let fieldsTarget = FuzzTarget(
    name: "fields",
    summary: "base64url (canonical), Base64URLBytes in JSON, E.164 phone numbers (SiblingsCrypto, PixieWire)",
    maximumLength: 1024,
    seeds: {
        [
            Data(Data("seed bytes".utf8).base64URLEncodedString().utf8), Data("+14155550100".utf8),
            Data(#""AAEC_-8""#.utf8), Data("".utf8),
        ]
    },
    run: { input in
        let text = String(decoding: input, as: UTF8.self)
        if let bytes = Data(base64URLEncoded: text), bytes.base64URLEncodedString() != text {
            finding("base64url accepted text that is not the canonical encoding of what it decodes to")
        }
        expectOnly(DecodingError.self, "Base64URLBytes") {
            let wrapped = try JSONDecoder().decode(Base64URLBytes.self, from: input)
            guard (try JSONDecoder().decode(Base64URLBytes.self, from: JSONEncoder().encode(wrapped))) == wrapped else {
                finding("Base64URLBytes does not survive JSON encoding")
            }
        }
        if let number = try? PhoneNumber(text), (try? PhoneNumber(number.e164))?.e164 != number.e164 {
            finding("an accepted phone number is not accepted again in its E.164 form: \(number.e164)")
        }
    })
