import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("HKDF")
struct HKDFTests {
    @Test("RFC 5869 test cases (SHA-256): PRK and OKM")
    func rfc5869() throws {
        let records = try Vectors.records("classic/rfc-5869-HKDF-SHA256.txt")
        #expect(records.count == 3)
        for record in records {
            let ikm = SymmetricKey(data: try record.bytes("IKM"))
            let salt = try record.bytes("salt")
            let info = try record.bytes("info")
            let length = try record.int("L")
            let okm = try HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: info, outputByteCount: length)
            #expect(okm.withUnsafeBytes { Data($0) } == (try record.bytes("OKM")), "\(record)")
            let prk = try HKDF<SHA256>.extract(inputKeyMaterial: ikm, salt: salt)
            #expect(prk.withUnsafeBytes { Data($0) } == (try record.bytes("PRK")), "\(record)")
            let expanded = try HKDF<SHA256>.expand(pseudoRandomKey: prk, info: info, outputByteCount: length)
            #expect(expanded == okm)
        }
    }

    @Test("agrees with pyca/cryptography on random inputs, SHA-256/384/512")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<crossCheckRounds {
            let ikm = randomBytes(randomLength(1...80))
            let salt = randomBytes(randomLength(0...80))
            let info = randomBytes(randomLength(0...80))
            let length = randomLength(1...255 * 32)
            let ours = try HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: ikm), salt: salt, info: info, outputByteCount: length)
            let theirs = try oracle.bytes(
                "hkdf", ["hash": "sha256", "ikm": ikm, "salt": salt, "info": info, "length": length])
            #expect(ours.withUnsafeBytes { Data($0) } == theirs)
            let ours512 = try HKDF<SHA512>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: ikm), salt: salt, info: info, outputByteCount: 64)
            #expect(
                ours512.withUnsafeBytes { Data($0) }
                    == (try oracle.bytes(
                        "hkdf", ["hash": "sha512", "ikm": ikm, "salt": salt, "info": info, "length": 64])))
        }
    }

    @Test("output lengths outside 1...255·HashLen are refused")
    func outputLength() {
        let ikm = SymmetricKey(size: .bits256)
        expectCryptoError(.invalidParameter) {
            try HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, info: Data(), outputByteCount: 255 * 32 + 1)
        }
        expectCryptoError(.invalidParameter) {
            try HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, info: Data(), outputByteCount: 0)
        }
        expectCryptoError(.incorrectKeySize) {
            try HKDF<SHA256>.expand(
                pseudoRandomKey: SymmetricKey(data: Data(count: 16)), info: Data(), outputByteCount: 32)
        }
    }
}
