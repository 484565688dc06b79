import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("ECDSA P-256 with SHA-256 (ES256)")
struct P256Tests {
    typealias PrivateKey = P256.Signing.PrivateKey
    typealias PublicKey = P256.Signing.PublicKey
    typealias Signature = P256.Signing.ECDSASignature

    @Test("sign and verify with pyca/cryptography both ways; same public keys from the same scalar")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<crossCheckRounds {
            let message = randomBytes(randomLength(0...300))
            let ours = PrivateKey()
            #expect(
                ours.publicKey.x963Representation
                    == (try oracle.bytes("p256_public", ["private": ours.rawRepresentation])))
            let signature = try ours.signature(for: message)
            #expect(
                try oracle.bool(
                    "p256_verify",
                    [
                        "public": ours.publicKey.x963Representation, "message": message,
                        "der": signature.derRepresentation,
                    ]))
            #expect(
                try oracle.bytes("der_from_raw", ["raw": signature.rawRepresentation]) == signature.derRepresentation)

            let theirs = try oracle.call("p256_generate")
            let theirPrivate = try #require(Data(hex: theirs["private"] as! String))
            let theirPublic = try PublicKey(x963Representation: try #require(Data(hex: theirs["public"] as! String)))
            let signed = try oracle.call("p256_sign", ["private": theirPrivate, "message": message])
            let der = try #require(Data(hex: signed["der"] as! String))
            let raw = try #require(Data(hex: signed["raw"] as! String))
            let fromDER = try Signature(derRepresentation: der)
            #expect(fromDER.rawRepresentation == raw)
            #expect(theirPublic.isValidSignature(fromDER, for: message))
            #expect(theirPublic.isValidSignature(try Signature(rawRepresentation: raw), for: message))
            #expect(!theirPublic.isValidSignature(fromDER, for: message + Data([1])))
            #expect(!ours.publicKey.isValidSignature(fromDER, for: message))
        }
    }

    @Test("public key encodings round-trip: x9.63, raw x ‖ y, compressed")
    func encodings() throws {
        let key = PrivateKey().publicKey
        #expect(try PublicKey(rawRepresentation: key.rawRepresentation) == key)
        #expect(try PublicKey(compressedRepresentation: key.compressedRepresentation) == key)
        #expect(try PublicKey(x963Representation: key.x963Representation) == key)
        #expect(key.compressedRepresentation.count == 33 && key.rawRepresentation.count == 64)
    }

    @Test("points off the curve, out-of-range scalars and non-canonical DER are refused")
    func refusals() throws {
        let key = PrivateKey()
        var offCurve = key.publicKey.x963Representation
        offCurve[64] ^= 0x01
        expectCryptoError(.invalidEncoding) { try PublicKey(x963Representation: offCurve) }
        expectCryptoError(.invalidEncoding) {
            try PublicKey(x963Representation: Data([0x05]) + key.publicKey.rawRepresentation)
        }
        expectCryptoError(.incorrectKeySize) { try PublicKey(rawRepresentation: Data(count: 63)) }
        expectCryptoError(.invalidEncoding) { try PublicKey(compressedRepresentation: Data([0x04]) + Data(count: 32)) }
        expectCryptoError(.invalidEncoding) { try PrivateKey(rawRepresentation: Data(count: 32)) }
        let order = try #require(Data(hex: "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551"))
        expectCryptoError(.invalidEncoding) { try PrivateKey(rawRepresentation: order) }
        expectCryptoError(.invalidEncoding) { try PrivateKey(rawRepresentation: Data(repeating: 0xff, count: 32)) }
        #expect(try PrivateKey(rawRepresentation: key.rawRepresentation).publicKey == key.publicKey)

        let der = try key.signature(for: Data("m".utf8)).derRepresentation
        expectCryptoError(.invalidEncoding) { try Signature(derRepresentation: der + Data([0])) }
        expectCryptoError(.invalidEncoding) { try Signature(derRepresentation: Data([0x30, 0x00])) }
        expectCryptoError(.invalidEncoding) { try Signature(derRepresentation: der.prefix(der.count - 1)) }
        expectCryptoError(.incorrectParameterSize) { try Signature(rawRepresentation: Data(count: 63)) }
        // r = 0 and s = 0 never verify.
        #expect(!key.publicKey.isValidSignature(try Signature(rawRepresentation: Data(count: 64)), for: Data("m".utf8)))
    }
}
