import Foundation
@_spi(Testing) import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("X-Wing")
struct XWingTests {
    struct Vector: Decodable {
        let seed: String
        let sk: String
        let pk: String
        let eseed: String
        let ct: String
        let ss: String
    }

    static func data(_ key: SymmetricKey) -> Data { key.withUnsafeBytes { Data($0) } }

    @Test("the draft's 3 test vectors: keys from the seed, derandomized encapsulation, decapsulation")
    func vectors() throws {
        let vectors = try Vectors.json([Vector].self, "xwing/test-vectors.json")
        #expect(vectors.count == 3)
        for vector in vectors {
            let key = try XWing.PrivateKey(seedRepresentation: try #require(Data(hex: vector.seed)))
            #expect(key.seedRepresentation == Data(hex: vector.sk))
            #expect(key.publicKey.rawRepresentation == Data(hex: vector.pk))
            let result = try key.publicKey.encapsulate(randomness: try #require(Data(hex: vector.eseed)))
            #expect(result.encapsulated == Data(hex: vector.ct))
            #expect(Self.data(result.sharedSecret) == Data(hex: vector.ss))
            #expect(Self.data(try key.decapsulate(try #require(Data(hex: vector.ct)))) == Data(hex: vector.ss))
            #expect(try XWing.PublicKey(rawRepresentation: try #require(Data(hex: vector.pk))) == key.publicKey)
        }
    }

    @Test("xwing-kem (PyPI, on pyca's ML-KEM and X25519) decapsulates ours and we decapsulate its")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<crossCheckRounds {
            let key = XWing.PrivateKey()
            let components = key.expandedComponents
            let ours = try key.publicKey.encapsulate()
            #expect(
                try oracle.bytes(
                    "xwing_decapsulate",
                    ["ciphertext": ours.encapsulated, "mlkem_seed": components.mlkemSeed, "x25519": components.x25519])
                    == Self.data(ours.sharedSecret))
            let theirs = try oracle.call("xwing_encapsulate", ["public": key.publicKey.rawRepresentation])
            let ciphertext = try #require(Data(hex: theirs["ciphertext"] as! String))
            #expect(Self.data(try key.decapsulate(ciphertext)) == Data(hex: theirs["secret"] as! String))
        }
    }

    @Test("malformed keys and ciphertexts are typed errors")
    func malformed() throws {
        expectCryptoError(.incorrectKeySize) { try XWing.PrivateKey(seedRepresentation: Data(count: 31)) }
        expectCryptoError(.incorrectKeySize) { try XWing.PublicKey(rawRepresentation: Data(count: 1215)) }
        let key = XWing.PrivateKey()
        expectCryptoError(.incorrectParameterSize) { try key.decapsulate(Data(count: 1119)) }
        expectCryptoError(.incorrectParameterSize) { try key.publicKey.encapsulate(randomness: Data(count: 32)) }
        // An ML-KEM part that fails the modulus check.
        var bad = key.publicKey.rawRepresentation
        bad[0] = 0xff
        bad[1] |= 0x0f
        expectCryptoError(.invalidEncoding) { try XWing.PublicKey(rawRepresentation: bad) }
        // A low-order X25519 ciphertext part: the all-zero X25519 secret is refused.
        let ciphertext = try key.publicKey.encapsulate().encapsulated
        expectCryptoError(.invalidSharedSecret) { try key.decapsulate(ciphertext.prefix(1088) + Data(count: 32)) }
        // A corrupted ML-KEM part still yields a key (implicit rejection), and a different one.
        var corrupted = ciphertext
        corrupted[10] ^= 1
        #expect(Self.data(try key.decapsulate(corrupted)) != Self.data(try key.decapsulate(ciphertext)))
    }
}
