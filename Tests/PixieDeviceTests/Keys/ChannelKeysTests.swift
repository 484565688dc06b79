import Foundation
import PixieDevice
import PixieWire
import SiblingsCrypto
import Testing

@Suite("ChannelKeys.resolve: sibling frames under the account seed, contacts under their row's key, else rejected")
struct ChannelKeysTests {
    static let credential = HybridSignature.PrivateKey()
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let ourHash = SenderCert.computeUserIDHash("account-1")
    let contactHash = SenderCert.computeUserIDHash("account-2")
    let seed = SecureRandom.bytes(count: 32)
    let inboxKey = XWing.PrivateKey()
    let inbox = RelaySubjectKey().subject
    var verifier: SenderCert.Verifier { SenderCert.Verifier(pinnedKeys: [Self.credential.publicKey]) }

    func senderCert(_ userIDHash: Data) throws -> SenderCert {
        try SenderCert(
            userIDHash: userIDHash, deviceKey: SecureRandom.bytes(count: 32), issuedAt: now.addingTimeInterval(-10),
            expiresAt: now.addingTimeInterval(3600), signedBy: Self.credential)
    }

    @Test("a sibling's frame resolves to InnerMAC.siblingChannelKey and nothing else")
    func siblings() throws {
        let contactKey = SymmetricKey(size: .bits256)
        // The contact lookup would answer for our own hash too; it must never be asked.
        let keys = try ChannelKeys(ownUserIDHash: ourHash, accountSeed: seed) { _ in contactKey }
        let sibling = try ChannelKeys(ownUserIDHash: ourHash, accountSeed: seed) { _ in nil }
        let frame = try sibling.seal(
            .syncDelta, Data("row".utf8), senderCert: try senderCert(ourHash), to: ourHash,
            recipientKey: inboxKey.publicKey, recipient: inbox)
        let opened = try keys.open(frame, sealingKey: inboxKey, inbox: inbox, senderCerts: verifier, now: now)
        #expect(opened.payload == Data("row".utf8))
        #expect(opened.sender.userIDHash == ourHash)
        let resolved = try keys.resolve(userIDHash: ourHash)
        let expected = try InnerMAC.siblingChannelKey(accountSeed: seed)
        #expect(resolved.withUnsafeBytes { Data($0) } == expected.withUnsafeBytes { Data($0) })
    }

    @Test("an envelope whose MAC is under another account's channel key is rejected on receive")
    func anotherAccount() throws {
        let keys = try ChannelKeys(ownUserIDHash: ourHash, accountSeed: seed) { _ in nil }
        // Another account's device, with a valid SenderCert that claims our userIDHash, MACs under its own seed.
        let impostor = try ChannelKeys(ownUserIDHash: ourHash, accountSeed: SecureRandom.bytes(count: 32)) { _ in nil }
        let frame = try impostor.seal(
            .syncDelta, Data([1]), senderCert: try senderCert(ourHash), to: ourHash, recipientKey: inboxKey.publicKey,
            recipient: inbox)
        let error = try #require(throws: PixieWireError.self) {
            try keys.open(frame, sealingKey: inboxKey, inbox: inbox, senderCerts: verifier, now: now)
        }
        #expect(error.code == .badSignature)
    }

    @Test("a contact's frame resolves to its row's key; an unknown sender, or no seed, is refused both ways")
    func contactsAndFailures() throws {
        let contactKey = SymmetricKey(size: .bits256)
        let keys = try ChannelKeys(ownUserIDHash: ourHash, accountSeed: seed) { [contactHash] hash in
            hash == contactHash ? contactKey : nil
        }
        let contact = try ChannelKeys(ownUserIDHash: contactHash, accountSeed: nil) { _ in contactKey }
        let frame = try contact.seal(
            .syncDelta, Data([7]), senderCert: try senderCert(contactHash), to: ourHash,
            recipientKey: inboxKey.publicKey, recipient: inbox)
        #expect(
            try keys.open(frame, sealingKey: inboxKey, inbox: inbox, senderCerts: verifier, now: now).payload
                == Data([7]))

        let stranger = SenderCert.computeUserIDHash("account-3")
        #expect(throws: ChannelKeys.Failure.unknownSender) { try keys.resolve(userIDHash: stranger) }
        let strangerKeys = try ChannelKeys(ownUserIDHash: stranger, accountSeed: nil) { _ in contactKey }
        let unknown = try strangerKeys.seal(
            .syncDelta, Data([7]), senderCert: try senderCert(stranger), to: ourHash,
            recipientKey: inboxKey.publicKey, recipient: inbox)
        #expect(throws: ChannelKeys.Failure.unknownSender) {
            try keys.open(unknown, sealingKey: inboxKey, inbox: inbox, senderCerts: verifier, now: now)
        }
        // Before approval there is no sibling key: sending a sibling frame throws.
        let unapproved = try ChannelKeys(ownUserIDHash: ourHash, accountSeed: nil) { _ in contactKey }
        #expect(throws: ChannelKeys.Failure.noAccountSeed) {
            try unapproved.seal(
                .syncRequest, Data(), senderCert: try senderCert(ourHash), to: ourHash,
                recipientKey: inboxKey.publicKey, recipient: inbox)
        }
        // A sender cert from a key that is not pinned.
        let forged = try SenderCert(
            userIDHash: ourHash, deviceKey: Data([1]), issuedAt: now, expiresAt: now.addingTimeInterval(60),
            signedBy: HybridSignature.PrivateKey())
        let frameWithForgedCert = try keys.seal(
            .syncDelta, Data(), senderCert: forged, to: ourHash, recipientKey: inboxKey.publicKey, recipient: inbox)
        #expect(throws: ChannelKeys.Failure.senderCertRefused(.unknownSigner)) {
            try keys.open(frameWithForgedCert, sealingKey: inboxKey, inbox: inbox, senderCerts: verifier, now: now)
        }
    }
}
