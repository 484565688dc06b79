import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("Hybrid signature (Ed25519 + ML-DSA-65)")
struct HybridSignatureTests {
    static let domain = Data("siblings/hybrid-signature/v1".utf8)

    static func representative(_ message: Data, _ context: Data) -> Data {
        domain + Data([0, UInt8(context.count)]) + context + message
    }

    @Test("round trip; the seed fixes the key; either half broken, swapped or re-contexted fails")
    func roundTrip() throws {
        let key = HybridSignature.PrivateKey()
        let message = Data("PhoneOwnershipCert".utf8)
        let context = Data("pixie/phone-ownership-cert".utf8)
        let signature = try key.signature(for: message, context: context)
        #expect(signature.rawRepresentation.count == HybridSignature.signatureByteCount)
        #expect(key.publicKey.isValidSignature(signature, for: message, context: context))
        #expect(!key.publicKey.isValidSignature(signature, for: message + Data([0]), context: context))
        #expect(!key.publicKey.isValidSignature(signature, for: message, context: Data("pixie/sender-cert".utf8)))

        let again = try HybridSignature.PrivateKey(seedRepresentation: key.seedRepresentation)
        #expect(again.publicKey == key.publicKey)
        #expect(try HybridSignature.PublicKey(rawRepresentation: key.publicKey.rawRepresentation) == key.publicKey)

        // Break the Ed25519 half only, then the ML-DSA half only: each alone makes the whole invalid.
        for index in [10, 64 + 100] {
            var raw = signature.rawRepresentation
            raw[index] ^= 0x01
            #expect(!key.publicKey.isValidSignature(try .init(rawRepresentation: raw), for: message, context: context))
        }
        // Halves from two different valid signatures do not combine across messages.
        let other = try key.signature(for: Data("other".utf8), context: context)
        let mixed = signature.rawRepresentation.prefix(64) + other.rawRepresentation.dropFirst(64)
        #expect(!key.publicKey.isValidSignature(try .init(rawRepresentation: mixed), for: message, context: context))
    }

    @Test("the halves are the documented Ed25519 and ML-DSA-65 signatures, checked by pyca/cryptography")
    func encodingMatchesDocs() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<10 {
            let key = HybridSignature.PrivateKey()
            let message = randomBytes(randomLength(0...200))
            let context = randomBytes(randomLength(0...255))
            let signature = try key.signature(for: message, context: context)
            let representative = Self.representative(message, context)
            let publicKey = key.publicKey.rawRepresentation
            #expect(
                try oracle.bool(
                    "ed25519_verify",
                    [
                        "public": publicKey.prefix(32), "message": representative,
                        "signature": signature.rawRepresentation.prefix(64),
                    ]))
            #expect(
                try oracle.bool(
                    "mldsa65_verify",
                    [
                        "public": publicKey.dropFirst(32), "message": representative, "context": Self.domain,
                        "signature": signature.rawRepresentation.dropFirst(64),
                    ]))
            // Neither half verifies as a plain signature of the message itself.
            #expect(
                !(try oracle.bool(
                    "ed25519_verify",
                    [
                        "public": publicKey.prefix(32), "message": message,
                        "signature": signature.rawRepresentation.prefix(64),
                    ])))
        }
    }

    @Test("malformed keys, signatures and contexts are refused")
    func malformed() throws {
        expectCryptoError(.incorrectKeySize) { try HybridSignature.PrivateKey(seedRepresentation: Data(count: 31)) }
        expectCryptoError(.incorrectKeySize) { try HybridSignature.PublicKey(rawRepresentation: Data(count: 1983)) }
        expectCryptoError(.incorrectParameterSize) {
            try HybridSignature.Signature(rawRepresentation: Data(count: 3372))
        }
        let key = HybridSignature.PrivateKey()
        expectCryptoError(.invalidParameter) { try key.signature(for: Data(), context: Data(count: 256)) }
        let garbage = try HybridSignature.Signature(rawRepresentation: randomBytes(HybridSignature.signatureByteCount))
        #expect(!key.publicKey.isValidSignature(garbage, for: Data(), context: Data()))
        // A low-order Ed25519 half makes the public key undecodable.
        var weak = key.publicKey.rawRepresentation
        weak.replaceSubrange(0..<32, with: Data([1]) + Data(count: 31))
        expectCryptoError(.invalidEncoding) { try HybridSignature.PublicKey(rawRepresentation: weak) }
    }
}
