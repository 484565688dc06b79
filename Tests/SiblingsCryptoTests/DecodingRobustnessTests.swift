import Foundation
@_spi(Testing) import SiblingsCrypto
import Testing

/// Every public decoding initializer, fed random bytes of every length around the right one: it
/// either decodes or throws a `CryptoError`, never crashes or throws anything else.
@Suite("Decoders refuse garbage with typed errors")
struct DecodingRobustnessTests {
    static let decoders: [(String, Int, @Sendable (Data) throws -> Any)] = [
        ("X25519 public", 32, { try Curve25519.KeyAgreement.PublicKey(rawRepresentation: $0) }),
        ("X25519 private", 32, { try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: $0) }),
        ("Ed25519 public", 32, { try Curve25519.Signing.PublicKey(rawRepresentation: $0) }),
        ("Ed25519 private", 32, { try Curve25519.Signing.PrivateKey(rawRepresentation: $0) }),
        ("P-256 x9.63", 65, { try P256.Signing.PublicKey(x963Representation: $0) }),
        ("P-256 raw", 64, { try P256.Signing.PublicKey(rawRepresentation: $0) }),
        ("P-256 compressed", 33, { try P256.Signing.PublicKey(compressedRepresentation: $0) }),
        ("P-256 private", 32, { try P256.Signing.PrivateKey(rawRepresentation: $0) }),
        ("ECDSA DER", 70, { try P256.Signing.ECDSASignature(derRepresentation: $0) }),
        ("ECDSA raw", 64, { try P256.Signing.ECDSASignature(rawRepresentation: $0) }),
        ("AES-GCM box", 40, { try AES.GCM.SealedBox(combined: $0) }),
        ("ChaChaPoly box", 40, { try ChaChaPoly.SealedBox(combined: $0) }),
        ("ML-KEM-768 public", 1184, { try MLKEM768.PublicKey(rawRepresentation: $0) }),
        ("ML-KEM-768 seed", 64, { try MLKEM768.PrivateKey(seedRepresentation: $0) }),
        ("ML-KEM-768 expanded", 2400, { try MLKEM768.ExpandedPrivateKey(expandedRepresentation: $0) }),
        ("X-Wing public", 1216, { try XWing.PublicKey(rawRepresentation: $0) }),
        ("X-Wing seed", 32, { try XWing.PrivateKey(seedRepresentation: $0) }),
        ("ML-KEM-768 integrity-checked", 96, { try MLKEM768.PrivateKey(integrityCheckedRepresentation: $0) }),
        ("X-Wing integrity-checked", 64, { try XWing.PrivateKey(integrityCheckedRepresentation: $0) }),
        ("ML-DSA-65 public", 1952, { try MLDSA65.PublicKey(rawRepresentation: $0) }),
        ("ML-DSA-65 seed", 32, { try MLDSA65.PrivateKey(seedRepresentation: $0) }),
        ("ML-DSA-65 integrity-checked", 64, { try MLDSA65.PrivateKey(integrityCheckedRepresentation: $0) }),
        ("hybrid public", 1984, { try HybridSignature.PublicKey(rawRepresentation: $0) }),
        ("hybrid seed", 32, { try HybridSignature.PrivateKey(seedRepresentation: $0) }),
        ("hybrid signature", 3373, { try HybridSignature.Signature(rawRepresentation: $0) }),
    ]

    /// ML-DSA-65 and hybrid verification of garbage of every length around a signature's: false, never a
    /// crash (sigDecode's hint checks run on random bytes).
    @Test("signature verifiers return false for random bytes of every length around a signature's")
    func signatureGarbage() throws {
        let mldsa = MLDSA65.PrivateKey().publicKey
        let hybrid = HybridSignature.PrivateKey().publicKey
        let message = Data("m".utf8)
        for length in [0, 1, 3308, 3309, 3310, 6618] {
            for _ in 0..<20 {
                #expect(!mldsa.isValidSignature(randomBytes(length), for: message))
            }
        }
        for _ in 0..<20 {
            let signature = try HybridSignature.Signature(rawRepresentation: randomBytes(3373))
            #expect(!hybrid.isValidSignature(signature, for: message, context: Data()))
        }
    }

    @Test("random bytes at, around and far from each expected length")
    func garbage() {
        for (name, length, decode) in Self.decoders {
            for candidate in [0, 1, length - 1, length, length + 1, 2 * length] {
                for _ in 0..<20 {
                    let bytes = randomBytes(max(0, candidate))
                    do {
                        _ = try decode(bytes)
                    } catch is CryptoError {
                        // refused with a reason: fine
                    } catch {
                        Issue.record("\(name) threw a non-CryptoError for \(bytes.count) bytes: \(error)")
                    }
                }
            }
            // All-zero and all-ones at the right length.
            for fill in [UInt8(0), 0xff] {
                do { _ = try decode(Data(repeating: fill, count: length)) } catch is CryptoError {} catch {
                    Issue.record("\(name) threw a non-CryptoError: \(error)")
                }
            }
        }
    }
}
