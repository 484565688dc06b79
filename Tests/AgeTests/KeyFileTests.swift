import Age
import Foundation
import Testing

@Suite struct KeyFileTests {
    @Test func roundTrip() throws {
        let identity = X25519Identity()
        let text = AgeKeyFile.encode(identity)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("# created: "))
        #expect(lines[1] == "# public key: \(identity.recipient)")
        let parsed = try AgeKeyFile.identities(from: text)
        #expect(parsed.count == 1)
        #expect((parsed[0] as? X25519Identity)?.recipient == identity.recipient)
        let hybrid = HybridIdentity()
        let both = try AgeKeyFile.identities(from: text + "\r\n\n" + AgeKeyFile.encode(hybrid))
        #expect(both.count == 2)
        #expect((both[1] as? HybridIdentity)?.recipient == hybrid.recipient)
        expectAgeError(.invalidIdentity) { try AgeKeyFile.identities(from: "# nothing\n") }
        expectAgeError(.invalidIdentity) { try AgeKeyFile.identities(from: "\(identity.recipient)\n") }
        let recipients = try AgeKeyFile.recipients(from: "# comment\n\(identity.recipient)\n\(hybrid.recipient)\n")
        #expect(recipients.count == 2)
    }

    @Test("lines end in \\n or \\r\\n; Unicode white space around a key is trimmed, as Foundation's set trims it")
    func lineEndingsAndWhiteSpace() throws {
        let identity = X25519Identity()
        let padded = "# comment\r\n \t\u{00A0}\(identity.string)\u{2003}\u{3000}\r\n\u{2028}\n"
        let parsed = try AgeKeyFile.identities(from: padded)
        #expect(parsed.count == 1)
        #expect((parsed[0] as? X25519Identity)?.recipient == identity.recipient)
        // What is not white space stays: a key with a no-break space inside is not a key.
        expectAgeError(.invalidIdentity) { try AgeKeyFile.identities(from: "AGE-SECRET\u{00A0}KEY-1\n") }
    }

    @Test func passphraseEncrypted() throws {
        let identity = X25519Identity()
        let encrypted = try AgeKeyFile.encrypt(AgeKeyFile.encode(identity), passphrase: "hunter2", workFactor: 10)
        #expect(String(decoding: encrypted, as: UTF8.self).hasPrefix("-----BEGIN AGE ENCRYPTED FILE-----"))
        let parsed = try AgeKeyFile.identities(from: encrypted) { "hunter2" }
        #expect((parsed[0] as? X25519Identity)?.recipient == identity.recipient)
        expectAgeError(.noMatchingIdentity) { try AgeKeyFile.identities(from: encrypted) { "wrong" } }
        let plain = try AgeKeyFile.identities(from: Data(AgeKeyFile.encode(identity).utf8)) {
            Issue.record("asked for a passphrase for a plain key file")
            return ""
        }
        #expect(plain.count == 1)
    }
}
