import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("Keccak: SHA3-256, SHA3-512, SHAKE128, SHAKE256")
struct SHA3Tests {
    @Test("agree with pyca/cryptography at every length class around the rates (72, 136, 168)")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        var lengths = [0, 1, 71, 72, 73, 135, 136, 137, 167, 168, 169, 335, 336, 337, 1000]
        lengths += (0..<crossCheckRounds).map { _ in randomLength(0...2000) }
        for length in lengths {
            let message = randomBytes(length)
            #expect(
                SHA3_256.hash(data: message).rawRepresentation
                    == (try oracle.bytes("digest", ["hash": "sha3-256", "message": message])))
            #expect(
                SHA3_512.hash(data: message).rawRepresentation
                    == (try oracle.bytes("digest", ["hash": "sha3-512", "message": message])))
            let outputLength = randomLength(1...600)
            #expect(
                SHAKE128.hash(data: message, outputByteCount: outputLength)
                    == (try oracle.bytes("digest", ["hash": "shake128", "message": message, "length": outputLength])))
            #expect(
                SHAKE256.hash(data: message, outputByteCount: outputLength)
                    == (try oracle.bytes("digest", ["hash": "shake256", "message": message, "length": outputLength])))
        }
    }

    @Test("absorbing and squeezing in random pieces gives the one-shot output")
    func incremental() {
        for _ in 0..<50 {
            let message = randomBytes(randomLength(0...1000))
            let total = randomLength(0...1000)
            var shake = SHAKE128()
            var rest = message[...]
            while !rest.isEmpty {
                let take = min(rest.count, randomLength(1...200))
                shake.absorb(rest.prefix(take))
                rest = rest.dropFirst(take)
            }
            var output = Data()
            while output.count < total {
                output += shake.squeeze(count: min(total - output.count, randomLength(1...300)))
            }
            #expect(output == SHAKE128.hash(data: message, outputByteCount: total))

            var sha = SHA3_256()
            sha.update(data: message.prefix(message.count / 2))
            let copy = sha
            sha.update(data: message.dropFirst(message.count / 2))
            #expect(sha.finalize() == SHA3_256.hash(data: message))
            #expect(copy.finalize() == SHA3_256.hash(data: message.prefix(message.count / 2)))
        }
    }
}
