import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("HPKE with X-Wing")
struct HPKETests {
    static let suites: [(HPKE.Ciphersuite, String)] = [
        (.XWingMLKEM768X25519_SHA256_ChachaPoly, "chacha20-poly1305"),
        (.XWingMLKEM768X25519_SHA256_AES_GCM_256, "aes-256-gcm"),
    ]

    @Test("pyca/cryptography's HPKE (MLKEM768-X25519) opens what we seal and we open what it seals")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for round in 0..<crossCheckRounds {
            let (suite, name) = Self.suites[round % 2]
            let key = XWing.PrivateKey()
            let components = key.expandedComponents
            let info = randomBytes(randomLength(0...40))
            let aad = randomBytes(randomLength(0...40))
            let plaintext = randomBytes(randomLength(0...500))
            let keyArgs: [String: any Sendable] = [
                "mlkem_seed": components.mlkemSeed, "x25519": components.x25519, "aead": name, "info": info, "aad": aad,
            ]

            var sender = try HPKE.Sender(recipientKey: key.publicKey, ciphersuite: suite, info: info)
            let sealed = try sender.seal(plaintext, authenticating: aad)
            var arguments = keyArgs
            arguments["sealed"] = sender.encapsulatedKey + sealed
            #expect(try oracle.bytes("hpke_open", arguments) == plaintext)

            arguments = keyArgs
            arguments["plaintext"] = plaintext
            let theirs = try oracle.bytes("hpke_seal", arguments)
            var recipient = try HPKE.Recipient(
                privateKey: key, ciphersuite: suite, info: info,
                encapsulatedKey: theirs.prefix(XWing.ciphertextByteCount))
            #expect(try recipient.open(theirs.dropFirst(XWing.ciphertextByteCount), authenticating: aad) == plaintext)
        }
    }

    @Test("a context's messages open in order only; exports agree; tampering and wrong info are refused")
    func contexts() throws {
        let key = XWing.PrivateKey()
        var sender = try HPKE.Sender(
            recipientKey: key.publicKey, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: Data("info".utf8))
        let first = try sender.seal(Data("one".utf8))
        let second = try sender.seal(Data("two".utf8))
        var recipient = try HPKE.Recipient(
            privateKey: key, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: Data("info".utf8),
            encapsulatedKey: sender.encapsulatedKey)
        #expect(
            try sender.exportSecret(context: Data("x".utf8), outputByteCount: 48)
                == recipient.exportSecret(context: Data("x".utf8), outputByteCount: 48))
        expectCryptoError(.authenticationFailure) { try recipient.open(second) }
        #expect(try recipient.open(first) == Data("one".utf8))
        var altered = second
        altered[0] ^= 1
        expectCryptoError(.authenticationFailure) { try recipient.open(altered) }
        #expect(try recipient.open(second) == Data("two".utf8))

        var wrongInfo = try HPKE.Recipient(
            privateKey: key, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: Data("other".utf8),
            encapsulatedKey: sender.encapsulatedKey)
        expectCryptoError(.authenticationFailure) { try wrongInfo.open(first) }
        var wrongSuite = try HPKE.Recipient(
            privateKey: key, ciphersuite: .XWingMLKEM768X25519_SHA256_AES_GCM_256, info: Data("info".utf8),
            encapsulatedKey: sender.encapsulatedKey)
        expectCryptoError(.authenticationFailure) { try wrongSuite.open(first) }
        expectCryptoError(.authenticationFailure) { try recipient.open(Data(count: 15)) }
    }
}
