import Foundation
@_spi(Testing) import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("ML-KEM-768")
struct MLKEM768Tests {
    static func data(_ key: SymmetricKey) -> Data { key.withUnsafeBytes { Data($0) } }

    @Test("1000 NIST-style KATs: keygen from d ‖ z, derandomized encapsulation, decapsulation, implicit rejection")
    func kat() throws {
        let records = try Vectors.records("ml-kem/kat_MLKEM_768.rsp")
        #expect(records.count == 1000)
        for record in records {
            let key = try MLKEM768.PrivateKey(seedRepresentation: try record.bytes("d") + record.bytes("z"))
            #expect(key.publicKey.rawRepresentation == (try record.bytes("pk")), "\(record)")
            #expect(key.expandedRepresentation == (try record.bytes("sk")), "\(record)")
            let result = try key.publicKey.encapsulate(randomness: try record.bytes("msg"))
            #expect(result.encapsulated == (try record.bytes("ct")), "\(record)")
            #expect(Self.data(result.sharedSecret) == (try record.bytes("ss")), "\(record)")
            #expect(Self.data(try key.decapsulate(try record.bytes("ct"))) == (try record.bytes("ss")))
            // ct_n is an invalid ciphertext: decapsulation yields the implicit-rejection key J(z ‖ c).
            #expect(Self.data(try key.decapsulate(try record.bytes("ct_n"))) == (try record.bytes("ss_n")), "\(record)")
        }
    }

    @Test("the expanded key decodes to the same key, and its checks refuse a corrupted one")
    func expandedKeys() throws {
        let record = try #require(try Vectors.records("ml-kem/kat_MLKEM_768.rsp").first)
        let expanded = try record.bytes("sk")
        let key = try MLKEM768.ExpandedPrivateKey(expandedRepresentation: expanded)
        #expect(key.expandedRepresentation == expanded)
        #expect(Self.data(try key.decapsulate(try record.bytes("ct"))) == (try record.bytes("ss")))
        var badHash = expanded
        badHash[2340] ^= 1
        expectCryptoError(.invalidEncoding) { try MLKEM768.ExpandedPrivateKey(expandedRepresentation: badHash) }
        var badModulus = expanded
        badModulus[1152] = 0xff
        badModulus[1153] |= 0x0f
        expectCryptoError(.invalidEncoding) { try MLKEM768.ExpandedPrivateKey(expandedRepresentation: badModulus) }
        expectCryptoError(.incorrectKeySize) {
            try MLKEM768.ExpandedPrivateKey(expandedRepresentation: expanded.dropLast())
        }
    }

    /// The CCTV intermediate and unlucky-sample files were made before FIPS 203 was final: their
    /// K-PKE.KeyGen computes G(d) without the final standard's domain-separating k byte, so their ek
    /// does not follow from their d. Encapsulation and decapsulation are unchanged in the final
    /// standard, so those are checked from the files' own ek and dk (kyber-py agrees on both counts).
    @Test("CCTV intermediate-values, unlucky-sample and strcmp vectors")
    func cctv() throws {
        for file in ["ml-kem/cctv-intermediate-ML-KEM-768.txt", "ml-kem/cctv-unluckysample-ML-KEM-768.txt"] {
            let records = try Vectors.records(file, startKey: nil)
            #expect(records.count == 1, "\(file)")
            for record in records {
                let publicKey = try MLKEM768.PublicKey(rawRepresentation: try record.bytes("ek"))
                let result = try publicKey.encapsulate(randomness: try record.bytes("m"))
                #expect(result.encapsulated == (try record.bytes("c")), "\(file)")
                #expect(Self.data(result.sharedSecret) == (try record.bytes("K")), "\(file)")
                let key = try MLKEM768.ExpandedPrivateKey(expandedRepresentation: try record.bytes("dk"))
                #expect(key.publicKey == publicKey)
                #expect(Self.data(try key.decapsulate(result.encapsulated)) == (try record.bytes("K")), "\(file)")
            }
        }
        // A ciphertext whose re-encryption differs only after a zero byte: strcmp would accept it.
        let strcmp = try Vectors.records("ml-kem/cctv-strcmp-ML-KEM-768.txt", startKey: nil)
        #expect(strcmp.count == 1)
        for record in strcmp {
            let key = try MLKEM768.ExpandedPrivateKey(expandedRepresentation: try record.bytes("dk"))
            #expect(Self.data(try key.decapsulate(try record.bytes("c"))) == (try record.bytes("K")))
        }
    }

    @Test("every CCTV bad-modulus encapsulation key is refused")
    func badModulus() throws {
        let lines = String(decoding: try Vectors.data("ml-kem/cctv-modulus-ML-KEM-768.txt.gz"), as: UTF8.self)
            .split(separator: "\n")
        #expect(lines.count == 780)
        for line in lines {
            let key = try #require(Data(hex: String(line)))
            expectCryptoError(.invalidEncoding) { try MLKEM768.PublicKey(rawRepresentation: key) }
        }
    }

    @Test("malformed sizes are typed errors")
    func sizes() throws {
        expectCryptoError(.incorrectKeySize) { try MLKEM768.PublicKey(rawRepresentation: Data(count: 1183)) }
        expectCryptoError(.incorrectKeySize) { try MLKEM768.PrivateKey(seedRepresentation: Data(count: 32)) }
        let key = MLKEM768.PrivateKey()
        expectCryptoError(.incorrectParameterSize) { try key.decapsulate(Data(count: 1087)) }
        expectCryptoError(.incorrectParameterSize) { try key.publicKey.encapsulate(randomness: Data(count: 31)) }
        // Any 1088 bytes decapsulate (to the rejection key), never crash.
        for _ in 0..<20 {
            #expect(Self.data(try key.decapsulate(randomBytes(1088))).count == 32)
        }
        let round = try key.publicKey.encapsulate()
        #expect(Self.data(try key.decapsulate(round.encapsulated)) == Self.data(round.sharedSecret))
    }

    @Test("pyca/cryptography (OpenSSL 4.0): same public key from a seed; encapsulation both ways")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<crossCheckRounds {
            let seed = randomBytes(64)
            let key = try MLKEM768.PrivateKey(seedRepresentation: seed)
            #expect(key.publicKey.rawRepresentation == (try oracle.bytes("mlkem768_public", ["seed": seed])))
            // pyca encapsulates to our key; we decapsulate.
            let theirs = try oracle.call("mlkem768_encapsulate", ["public": key.publicKey.rawRepresentation])
            let ciphertext = try #require(Data(hex: theirs["ciphertext"] as! String))
            let secret = try #require(Data(hex: theirs["secret"] as! String))
            #expect(Self.data(try key.decapsulate(ciphertext)) == secret)
            // We encapsulate to pyca's key; it decapsulates.
            let theirSeed = randomBytes(64)
            let theirPublic = try MLKEM768.PublicKey(
                rawRepresentation: try oracle.bytes("mlkem768_public", ["seed": theirSeed]))
            let ours = try theirPublic.encapsulate()
            #expect(
                try oracle.bytes("mlkem768_decapsulate", ["seed": theirSeed, "ciphertext": ours.encapsulated])
                    == Self.data(ours.sharedSecret))
        }
    }

    @Test("kyber-py: derandomized encapsulation agrees byte for byte")
    func kyberPy() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<20 {
            let seed = randomBytes(64)
            let m = randomBytes(32)
            let key = try MLKEM768.PrivateKey(seedRepresentation: seed)
            let result = try oracle.call("kyberpy_encaps", ["seed": seed, "m": m])
            let ours = try key.publicKey.encapsulate(randomness: m)
            #expect(ours.encapsulated == Data(hex: result["ciphertext"] as! String))
            #expect(Self.data(ours.sharedSecret) == Data(hex: result["secret"] as! String))
            #expect(key.expandedRepresentation == Data(hex: result["dk"] as! String))
        }
    }
}
