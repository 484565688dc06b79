import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("SHA-2")
struct DigestsTests {
    @Test("SHA-256, SHA-384 and SHA-512 agree with pyca/cryptography on random inputs")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for round in 0..<crossCheckRounds {
            let message = randomBytes(randomLength(0...300))
            #expect(
                SHA256.hash(data: message).rawRepresentation
                    == (try oracle.bytes("digest", ["hash": "sha256", "message": message])), "round \(round)")
            #expect(
                SHA384.hash(data: message).rawRepresentation
                    == (try oracle.bytes("digest", ["hash": "sha384", "message": message])))
            #expect(
                SHA512.hash(data: message).rawRepresentation
                    == (try oracle.bytes("digest", ["hash": "sha512", "message": message])))
        }
    }

    @Test("incremental hashing equals one-shot, and a copied hasher continues on its own")
    func incrementalAndCopies() {
        let message = randomBytes(10_000)
        var hasher = SHA256()
        hasher.update(data: message.prefix(3000))
        var copy = hasher
        hasher.update(data: message.dropFirst(3000))
        #expect(hasher.finalize() == SHA256.hash(data: message))
        #expect(hasher.finalize() == hasher.finalize())
        copy.update(data: Data("other".utf8))
        #expect(copy.finalize() == SHA256.hash(data: message.prefix(3000) + Data("other".utf8)))
        #expect(copy.finalize() != hasher.finalize())
    }

    @Test("digest sizes")
    func sizes() {
        #expect(SHA256.hash(data: Data()).rawRepresentation.count == 32)
        #expect(SHA384.hash(data: Data()).rawRepresentation.count == 48)
        #expect(SHA512.hash(data: Data()).rawRepresentation.count == 64)
    }
}

@Suite("Insecure.SHA1")
struct InsecureSHA1Tests {
    @Test("FIPS 180-4 examples: \"abc\" and the 448-bit message, one-shot and incremental")
    func knownAnswers() {
        #expect(Insecure.SHA1.hash(data: Data("abc".utf8)).description == "a9993e364706816aba3e25717850c26c9cd0d89d")
        var hasher = Insecure.SHA1()
        hasher.update(data: Data("abcdbcdecdefdefgefghfghighij".utf8))
        hasher.update(data: Data("hijkijkljklmklmnlmnomnopnopq".utf8))
        #expect(hasher.finalize().description == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }
}
