import Age
import Foundation
import SiblingsCrypto
import Testing

/// The code in README.md's "Using ..." sections, as written there, so the README stays true.
@Suite("README examples")
struct ReadmeExamplesTests {
    @Test("Using the crypto core")
    func cryptoCore() throws {
        let key = SymmetricKey(size: .bits256)
        let box = try AES.GCM.seal(Data("hello".utf8), using: key)
        let plain = try AES.GCM.open(box, using: key)

        let signer = Curve25519.Signing.PrivateKey()
        let signature = try signer.signature(for: plain)
        #expect(signer.publicKey.isValidSignature(signature, for: plain))

        let okm = try HKDF<SHA256>.deriveKey(
            inputKeyMaterial: key, salt: Data(), info: Data("ctx".utf8), outputByteCount: 32)
        #expect(okm.bitCount == 256)

        let inbox = XWing.PrivateKey()
        let stored = inbox.integrityCheckedRepresentation
        let again = try XWing.PrivateKey(integrityCheckedRepresentation: stored)
        #expect(again.publicKey == inbox.publicKey)
        var sender = try HPKE.Sender(
            recipientKey: inbox.publicKey, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly,
            info: Data("pixie/sign-in".utf8))
        let sealed = try sender.seal(Data("SignInRequest".utf8))
        var recipient = try HPKE.Recipient(
            privateKey: inbox, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: Data("pixie/sign-in".utf8),
            encapsulatedKey: sender.encapsulatedKey)
        let request = try recipient.open(sealed)
        #expect(request == Data("SignInRequest".utf8))

        let issuer = HybridSignature.PrivateKey()
        let certSignature = try issuer.signature(for: request, context: Data("pixie/phone-ownership-cert".utf8))
        #expect(
            issuer.publicKey.isValidSignature(
                certSignature, for: request, context: Data("pixie/phone-ownership-cert".utf8)))
    }

    @Test("Using age")
    func age() throws {
        let identity = X25519Identity()
        let file = try Age.encrypt(Data("a note".utf8), to: [identity.recipient])
        let note = try Age.decrypt(file, identities: [identity])
        #expect(note == Data("a note".utf8))
    }
}
