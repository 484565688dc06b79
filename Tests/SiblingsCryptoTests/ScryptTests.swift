import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("scrypt")
struct ScryptTests {
    @Test("RFC 7914 section 12 vectors, including N = 2^20 (1 GiB)")
    func rfc7914() throws {
        let records = try Vectors.records("classic/scrypt-rfc7914.txt")
        #expect(records.count == 4)
        for record in records {
            let key = try Scrypt.deriveKey(
                password: Data(try record.string("PASSWORD").utf8),
                salt: Data(try record.string("SALT").utf8), cost: UInt64(try record.int("N")),
                blockSize: UInt32(try record.int("r")), parallelism: UInt32(try record.int("p")),
                outputByteCount: try record.int("LENGTH"))
            #expect(key.withUnsafeBytes { Data($0) } == (try record.bytes("DERIVED_KEY")), "\(record)")
        }
    }

    @Test("bad parameters are refused with a reason, and the memory limit holds")
    func parameters() {
        expectCryptoError(.invalidParameter) {
            try Scrypt.deriveKey(password: Data(), salt: Data(), cost: 1000, outputByteCount: 32)
        }
        expectCryptoError(.invalidParameter) {
            try Scrypt.deriveKey(password: Data(), salt: Data(), cost: 1, outputByteCount: 32)
        }
        expectCryptoError(.invalidParameter) {
            try Scrypt.deriveKey(password: Data(), salt: Data(), cost: 16, blockSize: 0, outputByteCount: 32)
        }
        expectCryptoError(.invalidParameter) {
            try Scrypt.deriveKey(password: Data(), salt: Data(), cost: 16, outputByteCount: 0)
        }
        expectCryptoError(.invalidParameter) {
            try Scrypt.deriveKey(
                password: Data(), salt: Data(), cost: 1 << 22, outputByteCount: 32, memoryLimit: 256 << 20)
        }
    }
}
