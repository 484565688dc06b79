import Age
import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

/// Interoperability with implementations no one here wrote: Debian's age 1.1.1 (Go) and pyrage (rage,
/// Rust), through Tests/Reference/oracle.py. Neither reads the hybrid stanza; the CCTV vectors cover it.
@Suite struct InteropTests {
    static let sizes = [0, 1, 65536, 100_000]

    static func string(_ result: [String: Any], _ field: String) throws -> String {
        try #require(result[field] as? String)
    }

    @Test func swiftEncryptsToolsDecrypt() throws {
        let oracle = try ReferenceOracle()
        let identities = (0..<3).map { _ in X25519Identity() }
        for count in Self.sizes {
            for armor in [false, true] {
                for recipients in [[identities[0]], identities] {
                    let plaintext = SecureRandom.bytes(count: count)
                    let file = try Age.encrypt(plaintext, to: recipients.map(\.recipient), armor: armor)
                    let last = try #require(recipients.last)
                    let keyFile = Data(AgeKeyFile.encode(last).utf8)
                    #expect(try oracle.bytes("age_decrypt", ["keyfile": keyFile, "file": file]) == plaintext)
                    #expect(
                        try oracle.bytes("pyrage_decrypt", ["identities": [last.string], "file": file]) == plaintext)
                }
            }
        }
    }

    @Test func toolsEncryptSwiftDecrypts() throws {
        let oracle = try ReferenceOracle()
        let ours = X25519Identity()
        let keygen = try Self.string(try oracle.call("age_keygen"), "out")
        let theirs = try AgeKeyFile.identities(from: keygen)
        let theirRecipient = try #require(
            keygen.split(separator: "\n").first { $0.hasPrefix("# public key: ") }?.dropFirst(14))
        #expect((theirs.first as? X25519Identity)?.recipient.string == String(theirRecipient))
        for count in Self.sizes {
            for armor in [false, true] {
                let plaintext = SecureRandom.bytes(count: count)
                let recipients = [ours.recipient.string, String(theirRecipient)]
                let byAge = try oracle.bytes(
                    "age_encrypt", ["recipients": recipients, "plaintext": plaintext, "armor": armor])
                let byRage = try oracle.bytes(
                    "pyrage_encrypt", ["recipients": recipients, "plaintext": plaintext, "armor": armor])
                for file in [byAge, byRage] {
                    #expect(try Age.decrypt(file, identities: [ours]) == plaintext)
                    #expect(try Age.decrypt(file, identities: theirs) == plaintext)
                }
            }
        }
    }

    @Test func passphrases() throws {
        let oracle = try ReferenceOracle()
        let passphrase = "correct-horse-battery-staple"
        for armor in [false, true] {
            let plaintext = SecureRandom.bytes(count: 70000)
            let file = try Age.encrypt(
                plaintext, to: [try ScryptRecipient(passphrase: passphrase, workFactor: 14)], armor: armor)
            #expect(try oracle.bytes("age_decrypt_passphrase", ["file": file, "passphrase": passphrase]) == plaintext)
            #expect(
                try oracle.bytes("pyrage_decrypt_passphrase", ["file": file, "passphrase": passphrase]) == plaintext)

            let byAge = try oracle.bytes(
                "age_encrypt_passphrase", ["plaintext": plaintext, "passphrase": passphrase, "armor": armor])
            let byRage = try oracle.bytes(
                "pyrage_encrypt_passphrase", ["plaintext": plaintext, "passphrase": passphrase, "armor": armor])
            for theirs in [byAge, byRage] {
                #expect(try Age.decrypt(theirs, identities: [ScryptIdentity(passphrase: passphrase)]) == plaintext)
                expectAgeError(.noMatchingIdentity) {
                    try Age.decrypt(theirs, identities: [ScryptIdentity(passphrase: "wrong")])
                }
            }
        }
    }

    @Test func passphraseEncryptedKeyFiles() throws {
        let oracle = try ReferenceOracle()
        let passphrase = "key-file-pass"
        // Ours, read by age -d -i (which asks for the key file's passphrase on the terminal).
        let identity = X25519Identity()
        let keyFile = try AgeKeyFile.encrypt(AgeKeyFile.encode(identity), passphrase: passphrase, workFactor: 14)
        let plaintext = Data("sealed to a key kept in an encrypted key file".utf8)
        let file = try Age.encrypt(plaintext, to: [identity.recipient])
        #expect(
            try oracle.bytes("age_decrypt", ["keyfile": keyFile, "file": file, "passphrase": passphrase]) == plaintext)
        // Theirs: age-keygen's output encrypted by age -p -a, read by us.
        let keygen = try Self.string(try oracle.call("age_keygen"), "out")
        let encrypted = try oracle.bytes(
            "age_encrypt_passphrase", ["plaintext": Data(keygen.utf8), "passphrase": passphrase, "armor": true])
        let theirs = try AgeKeyFile.identities(from: encrypted) { passphrase }
        let recipient = try #require((theirs.first as? X25519Identity)?.recipient)
        #expect(keygen.contains("# public key: \(recipient)"))
    }
}
