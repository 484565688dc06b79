import Foundation
import PixieWire
import SiblingsCrypto
import Testing

@Suite("Sealed-sender envelopes and the inner MAC")
struct SealedSenderEnvelopeTests {
    let recipientKey = XWing.PrivateKey()
    let inbox = RelaySubjectKey().subject
    let cert = SecureRandom.bytes(count: 150)
    let seed = SecureRandom.bytes(count: 32)

    @Test("a sibling's frame opens with the inbox's key and authenticates under the sibling channel key")
    func roundTrip() throws {
        let channel = try InnerMAC.siblingChannelKey(accountSeed: seed)
        let payload = Data("sync request".utf8)
        let envelope = try SealedSenderEnvelope.seal(
            .syncRequest, payload, senderCert: cert, channelKey: channel, to: recipientKey.publicKey, recipient: inbox)
        // Nothing outside names the sender: the cert is not in the clear.
        #expect(envelope.range(of: cert) == nil)
        let opened = try SealedSenderEnvelope.open(envelope, with: recipientKey, recipient: inbox)
        #expect(opened.senderCert == cert)
        #expect(opened.type == .syncRequest)
        #expect(try opened.authenticate(channelKey: try InnerMAC.siblingChannelKey(accountSeed: seed)) == payload)
    }

    @Test("under another account's channel key the MAC fails; on another inbox the envelope does not open")
    func refusals() throws {
        let ours = try InnerMAC.siblingChannelKey(accountSeed: seed)
        let theirs = try InnerMAC.siblingChannelKey(accountSeed: SecureRandom.bytes(count: 32))
        // Someone who can seal to our inbox (its sealing key is public) but holds another account's seed.
        let envelope = try SealedSenderEnvelope.seal(
            .syncDelta, Data([1, 2, 3]), senderCert: cert, channelKey: theirs, to: recipientKey.publicKey,
            recipient: inbox)
        let opened = try SealedSenderEnvelope.open(envelope, with: recipientKey, recipient: inbox)
        let error = try #require(throws: PixieWireError.self) { try opened.authenticate(channelKey: ours) }
        #expect(error.code == .badSignature)

        // A relay that delivers a frame to another inbox of the same device key: the subject is authenticated.
        let good = try SealedSenderEnvelope.seal(
            .syncDelta, Data([1]), senderCert: cert, channelKey: ours, to: recipientKey.publicKey, recipient: inbox)
        #expect(throws: PixieWireError.self) {
            try SealedSenderEnvelope.open(good, with: recipientKey, recipient: RelaySubjectKey().subject)
        }
        #expect(throws: PixieWireError.self) {
            try SealedSenderEnvelope.open(good, with: XWing.PrivateKey(), recipient: inbox)
        }
        var altered = good
        altered[altered.count - 20] ^= 1
        #expect(throws: PixieWireError.self) {
            try SealedSenderEnvelope.open(altered, with: recipientKey, recipient: inbox)
        }
    }

    @Test("the sibling channel key is a function of the account seed alone")
    func siblingChannelKey() throws {
        let one = try InnerMAC.siblingChannelKey(accountSeed: seed)
        let two = try InnerMAC.siblingChannelKey(accountSeed: seed)
        let other = try InnerMAC.siblingChannelKey(accountSeed: SecureRandom.bytes(count: 32))
        #expect(one.withUnsafeBytes { Data($0) } == two.withUnsafeBytes { Data($0) })
        #expect(one.withUnsafeBytes { Data($0) } != other.withUnsafeBytes { Data($0) })
        #expect(throws: PixieWireError.self) { try InnerMAC.siblingChannelKey(accountSeed: Data(count: 16)) }
    }
}
