import Foundation
import SiblingsTestSupport
import Testing

@Suite("The vector loader")
struct VectorsTests {
    @Test("a missing vectors folder is an error that says what to do, never a skip")
    func missingFolder() throws {
        let error = #expect(throws: VectorError.self) {
            try Vectors.root(environment: ["SIBLINGS_VECTORS": "/nonexistent/siblings-vectors"])
        }
        #expect(error?.description.contains("/nonexistent/siblings-vectors") == true)
        #expect(error?.description.contains("SIBLINGS_VECTORS") == true)
    }

    @Test("the default folder is ../shared/vectors beside the package")
    func defaultFolder() throws {
        let root = try Vectors.root(environment: [:])
        #expect(root.path.hasSuffix("/shared/vectors"))
    }

    @Test("key = value, key= value and key=value; sections; bare flags; quoted strings")
    func parsesEveryLineShape() throws {
        let gcm = try Vectors.records("classic/gcmDecrypt256.rsp")
        #expect(gcm.count == 7875)
        let failing = gcm.filter { $0.has("FAIL") }
        #expect(!failing.isEmpty && failing.count < gcm.count)
        #expect(try gcm[0].int("Keylen") == 256)
        #expect(try gcm[0].bytes("PT").isEmpty)

        let boring = try Vectors.records("classic/chacha20poly1305-boringssl.txt")
        #expect(boring.count == 66)
        #expect(try boring[0].bytes("NONCE").count == 12)
        #expect(String(decoding: try boring[0].bytes("IN"), as: UTF8.self).hasPrefix("Ladies and Gentlemen"))

        let hkdf = try Vectors.records("classic/rfc-5869-HKDF-SHA256.txt")
        #expect(hkdf.count == 3)
        #expect(try hkdf[2].bytes("salt").isEmpty)
        #expect(try hkdf[1].int("L") == 82)

        // Records not separated by blank lines, split at their `count` line.
        let kem = try Vectors.records("ml-kem/kat_MLKEM_768.rsp")
        #expect(kem.count == 1000)
        #expect(try kem[999].int("count") == 999)
    }

    @Test("an unknown field is an error naming the record")
    func missingField() throws {
        let record = try #require(try Vectors.records("classic/x25519-rfc7748.txt").first)
        let error = #expect(throws: VectorError.self) { try record.bytes("NO_SUCH_FIELD") }
        #expect(error?.description.contains("x25519-rfc7748.txt") == true)
    }

    @Test("all 143 CCTV age vectors load, the zlib-compressed ones inflated")
    func ageVectors() throws {
        let vectors = try Vectors.ageVectors()
        #expect(vectors.count == 143)
        let compressed = vectors.filter { $0.value("compressed") == "zlib" }
        #expect(!compressed.isEmpty)
        for vector in compressed {
            let start =
                vector.value("armored") == "yes" ? "-----BEGIN AGE ENCRYPTED FILE-----" : "age-encryption.org/v1\n"
            #expect(vector.file.starts(with: Data(start.utf8)), "\(vector.name)")
        }
        #expect(vectors.allSatisfy { $0.value("expect") != nil })
    }

    @Test("gzip vector files are inflated")
    func gzipFiles() throws {
        let text = String(decoding: try Vectors.data("ml-kem/cctv-modulus-ML-KEM-768.txt.gz"), as: UTF8.self)
        #expect(text.split(separator: "\n").count > 100)
    }
}
