import Foundation
import SiblingsCrypto
import Testing

/// CryptoKit's key representations (Sources/SiblingsCrypto/KEM.swift and the key types): the seed with the
/// public key it must give, and the integrity-checked form, seed ‖ SHA3-256(public key).
@Suite("Seed and integrity-checked key representations")
struct KEMTests {
    @Test("ML-KEM-768, X-Wing and ML-DSA-65: round trips, and a wrong public key or hash is refused")
    func integrityChecked() throws {
        let kem = MLKEM768.PrivateKey()
        let xwing = XWing.PrivateKey()
        let dsa = MLDSA65.PrivateKey()
        // seed ‖ SHA3-256(public key).
        #expect(
            kem.integrityCheckedRepresentation
                == kem.seedRepresentation + SHA3_256.hash(data: kem.publicKey.rawRepresentation).rawRepresentation)
        #expect(
            xwing.integrityCheckedRepresentation
                == xwing.seedRepresentation + SHA3_256.hash(data: xwing.publicKey.rawRepresentation).rawRepresentation)
        #expect(
            dsa.integrityCheckedRepresentation
                == dsa.seedRepresentation + SHA3_256.hash(data: dsa.publicKey.rawRepresentation).rawRepresentation)

        let kemAgain = try MLKEM768.PrivateKey(integrityCheckedRepresentation: kem.integrityCheckedRepresentation)
        #expect(kemAgain.publicKey == kem.publicKey)
        let xwingAgain = try XWing.PrivateKey(integrityCheckedRepresentation: xwing.integrityCheckedRepresentation)
        #expect(xwingAgain.publicKey == xwing.publicKey)
        let dsaAgain = try MLDSA65.PrivateKey(integrityCheckedRepresentation: dsa.integrityCheckedRepresentation)
        #expect(dsaAgain.publicKey == dsa.publicKey)

        // A flipped bit in the seed or in the hash: the seed no longer gives the hashed key.
        for index in [0, kem.integrityCheckedRepresentation.count - 1] {
            var bad = kem.integrityCheckedRepresentation
            bad[index] ^= 1
            expectCryptoError(.publicKeyMismatch) { try MLKEM768.PrivateKey(integrityCheckedRepresentation: bad) }
        }
        for index in [0, 63] {
            var badX = xwing.integrityCheckedRepresentation
            badX[index] ^= 1
            expectCryptoError(.publicKeyMismatch) { try XWing.PrivateKey(integrityCheckedRepresentation: badX) }
            var badD = dsa.integrityCheckedRepresentation
            badD[index] ^= 1
            expectCryptoError(.publicKeyMismatch) { try MLDSA65.PrivateKey(integrityCheckedRepresentation: badD) }
        }
        expectCryptoError(.incorrectKeySize) {
            try MLKEM768.PrivateKey(integrityCheckedRepresentation: Data(count: 64))
        }
        expectCryptoError(.incorrectKeySize) { try XWing.PrivateKey(integrityCheckedRepresentation: Data(count: 32)) }
        expectCryptoError(.incorrectKeySize) { try MLDSA65.PrivateKey(integrityCheckedRepresentation: Data(count: 65)) }
    }

    @Test("a seed given with another key's public key is refused; with its own, accepted")
    func seedWithPublicKey() throws {
        let kem = MLKEM768.PrivateKey()
        let other = MLKEM768.PrivateKey()
        #expect(
            try MLKEM768.PrivateKey(seedRepresentation: kem.seedRepresentation, publicKey: kem.publicKey).publicKey
                == kem.publicKey)
        expectCryptoError(.publicKeyMismatch) {
            try MLKEM768.PrivateKey(seedRepresentation: kem.seedRepresentation, publicKey: other.publicKey)
        }
        let xwing = XWing.PrivateKey()
        expectCryptoError(.publicKeyMismatch) {
            try XWing.PrivateKey(seedRepresentation: xwing.seedRepresentation, publicKey: XWing.PrivateKey().publicKey)
        }
        let dsa = MLDSA65.PrivateKey()
        expectCryptoError(.publicKeyMismatch) {
            try MLDSA65.PrivateKey(
                seedRepresentation: dsa.seedRepresentation, publicKey: MLDSA65.PrivateKey().publicKey)
        }
    }

    @Test("KEM.EncapsulationResult is what every KEM's encapsulate() returns, and HPKE's suites are CryptoKit's")
    func shapes() throws {
        let results: [KEM.EncapsulationResult] = [
            try MLKEM768.PrivateKey().publicKey.encapsulate(),
            try XWingMLKEM768X25519.PrivateKey().publicKey.encapsulate(),
        ]
        #expect(results.map(\.encapsulated.count) == [MLKEM768.ciphertextByteCount, XWing.ciphertextByteCount])
        let suite = HPKE.Ciphersuite.XWingMLKEM768X25519_SHA256_AES_GCM_256
        #expect(suite == HPKE.Ciphersuite(kem: .XWingMLKEM768X25519, kdf: .HKDF_SHA256, aead: .AES_GCM_256))
        #expect(HPKE.KEM.XWingMLKEM768X25519.rawValue == 0x647a && HPKE.AEAD.chaChaPoly.rawValue == 0x0003)
    }
}
