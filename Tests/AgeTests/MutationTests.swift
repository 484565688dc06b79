import Age
import Foundation
import SiblingsCrypto
import Testing

/// Random damage to valid files: decryption either succeeds with the original plaintext or throws an
/// ``AgeError``; it never crashes, hangs, leaks another error type, or returns other bytes. (A cheap
/// stand-in for a fuzzing target, which does not exist yet.)
@Suite struct MutationTests {
    static func mutate(_ file: Data) -> Data {
        var bytes = [UInt8](file)
        for _ in 0..<Int.random(in: 1...3) {
            guard !bytes.isEmpty else { break }
            let index = Int.random(in: 0..<bytes.count)
            switch Int.random(in: 0..<5) {
            case 0: bytes[index] ^= UInt8(1 << Int.random(in: 0..<8))
            case 1: bytes.remove(at: index)
            case 2: bytes.insert(UInt8.random(in: 0...255), at: index)
            case 3: bytes.insert([0x0a, 0x0d, 0x20, 0x3d, 0x2d][Int.random(in: 0..<5)], at: index)
            default: bytes.removeLast(Int.random(in: 1...min(20, bytes.count)))
            }
        }
        return Data(bytes)
    }

    @Test func randomDamage() throws {
        let identity = X25519Identity()
        let plaintext = SecureRandom.bytes(count: 70000)
        let files = [
            try Age.encrypt(plaintext, to: [identity.recipient, X25519Identity().recipient]),
            try Age.encrypt(plaintext, to: [identity.recipient], armor: true),
            try Age.encrypt(plaintext, to: [try ScryptRecipient(passphrase: "p", workFactor: 2)], armor: true),
        ]
        let identities: [any AgeIdentity] = [identity, ScryptIdentity(passphrase: "p")]
        var rounds = 0
        for file in files {
            for _ in 0..<500 {
                let damaged = Self.mutate(file)
                do {
                    let result = try Age.decrypt(damaged, identities: identities)
                    #expect(result == plaintext)
                } catch is AgeError {
                } catch {
                    Issue.record("a damaged file threw \(error), not an AgeError")
                }
                rounds += 1
            }
        }
        #expect(rounds == 1500)
    }
}
