import Age
import Foundation
import SiblingsCrypto
import Testing

/// Expects `body` to throw an ``AgeError`` with `code`.
func expectAgeError<R>(
    _ code: AgeError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) {
    do {
        _ = try body()
        Issue.record("expected AgeError.\(code), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as AgeError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(!error.reason.isEmpty, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected AgeError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
}

@Suite struct AgeTests {
    @Test func x25519RoundTrip() throws {
        let identity = X25519Identity()
        for armor in [false, true] {
            for count in [0, 1, 100, 65535, 65536, 65537, 200_000] {
                let plaintext = SecureRandom.bytes(count: count)
                let file = try Age.encrypt(plaintext, to: [identity.recipient], armor: armor)
                #expect(try Age.decrypt(file, identities: [identity]) == plaintext)
            }
        }
    }

    @Test func sizes() throws {
        let identity = X25519Identity()
        // One X25519 stanza: the header is 168 bytes... plus 16 nonce and one 16-byte tag for an empty file.
        #expect(try Age.encrypt(Data(), to: [identity.recipient]).count == 200)
        let armored = try Age.encrypt(Data(), to: [identity.recipient], armor: true)
        let text = String(decoding: armored, as: UTF8.self)
        #expect(text.hasPrefix("-----BEGIN AGE ENCRYPTED FILE-----\n"))
        #expect(text.hasSuffix("\n-----END AGE ENCRYPTED FILE-----\n"))
        #expect(text.split(separator: "\n").allSatisfy { $0.count <= 64 || $0.hasPrefix("-----") })
    }

    @Test func severalRecipients() throws {
        let identities = (0..<3).map { _ in X25519Identity() }
        let plaintext = Data("several recipients".utf8)
        let file = try Age.encrypt(plaintext, to: identities.map(\.recipient))
        for identity in identities {
            #expect(try Age.decrypt(file, identities: [identity]) == plaintext)
        }
        expectAgeError(.noMatchingIdentity) { try Age.decrypt(file, identities: [X25519Identity()]) }
    }

    @Test func scrypt() throws {
        let plaintext = Data("passphrase".utf8)
        let file = try Age.encrypt(plaintext, to: [try ScryptRecipient(passphrase: "correct horse", workFactor: 10)])
        #expect(try Age.decrypt(file, identities: [ScryptIdentity(passphrase: "correct horse")]) == plaintext)
        expectAgeError(.noMatchingIdentity) { try Age.decrypt(file, identities: [ScryptIdentity(passphrase: "wrong")]) }
        expectAgeError(.workFactorTooLarge) {
            try Age.decrypt(file, identities: [ScryptIdentity(passphrase: "correct horse", maxWorkFactor: 9)])
        }
        expectAgeError(.incompatibleRecipients) {
            try Age.encrypt(
                plaintext, to: [try ScryptRecipient(passphrase: "a", workFactor: 10), X25519Identity().recipient])
        }
        expectAgeError(.incompatibleRecipients) {
            try Age.encrypt(
                plaintext,
                to: [
                    try ScryptRecipient(passphrase: "a", workFactor: 10),
                    try ScryptRecipient(passphrase: "a", workFactor: 10),
                ])
        }
    }

    @Test func hybrid() throws {
        let identity = HybridIdentity()
        let parsed = try HybridIdentity(string: identity.string)
        #expect(parsed.recipient == identity.recipient)
        #expect(try HybridRecipient(string: identity.recipient.string) == identity.recipient)
        #expect(identity.recipient.string.hasPrefix("age1pq1"))
        #expect(identity.string.hasPrefix("AGE-SECRET-KEY-PQ-1"))
        let plaintext = SecureRandom.bytes(count: 70000)
        let other = HybridIdentity()
        let file = try Age.encrypt(plaintext, to: [identity.recipient, other.recipient], armor: true)
        #expect(try Age.decrypt(file, identities: [parsed]) == plaintext)
        #expect(try Age.decrypt(file, identities: [X25519Identity(), other]) == plaintext)
        expectAgeError(.incompatibleRecipients) {
            try Age.encrypt(plaintext, to: [identity.recipient, X25519Identity().recipient])
        }
    }

    @Test func keyStrings() throws {
        let identity = X25519Identity()
        #expect(identity.string.hasPrefix("AGE-SECRET-KEY-1"))
        #expect(identity.recipient.string.hasPrefix("age1"))
        #expect(try X25519Identity(string: identity.string).recipient == identity.recipient)
        #expect(try X25519Identity(string: identity.string.lowercased()).recipient == identity.recipient)
        #expect(try X25519Recipient(string: identity.recipient.string.uppercased()) == identity.recipient)
        expectAgeError(.invalidRecipient) { try X25519Recipient(string: identity.string) }
        expectAgeError(.invalidIdentity) { try X25519Identity(string: identity.recipient.string) }
        var mixed = Array(identity.recipient.string)
        let letter = try #require(mixed.indices.dropFirst(4).first { mixed[$0].isLetter })
        mixed[letter] = Character(mixed[letter].uppercased())
        expectAgeError(.invalidRecipient) { try X25519Recipient(string: String(mixed)) }
        var typo = Array(identity.recipient.string)
        typo[10] = typo[10] == "q" ? "p" : "q"
        expectAgeError(.invalidRecipient) { try X25519Recipient(string: String(typo)) }
        // Bech32 without a 90-character limit: the hybrid recipient is ~1950 characters.
        #expect(HybridIdentity().recipient.string.count > 1900)
    }

    @Test func knownKeyPair() throws {
        // From age's own documentation (age-keygen output in the age README).
        let identity = try X25519Identity(
            string: "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX")
        #expect(identity.recipient.string == "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj")
    }

    @Test func tamperedPayload() throws {
        let identity = X25519Identity()
        var file = try Age.encrypt(SecureRandom.bytes(count: 100_000), to: [identity.recipient])
        file[file.count - 5] ^= 1
        var released = 0
        expectAgeError(.payloadFailure) {
            try Age.decrypt(file, identities: [identity]) { released += $0.count }
        }
        #expect(released == 65536)
        expectAgeError(.payloadFailure) {
            try Age.decrypt(file.prefix(file.count - 1), identities: [identity])
        }
    }
}
