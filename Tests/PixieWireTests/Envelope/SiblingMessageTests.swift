import Foundation
import PixieWire
import SiblingsCrypto
import Testing

@Suite("SiblingMessage: every sealed message decoded in one place")
struct SiblingMessageTests {
    static let id = Data(repeating: 1, count: 16)
    static let subject = try! RelaySubject(rawRepresentation: Data(repeating: 3, count: 32))
    static let key = XWing.PrivateKey().publicKey
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// One message of every type this build reads.
    static let every: [SiblingMessage] =
        [
            .signInRequest(
                SignInRequest(deviceModel: "Pixel 9", replySubject: subject, sealingKey: key, timestamp: now)),
            .signInAck(SignInAck(deviceFamily: "Phone")),
            .signInApproval(
                .approved(
                    .init(
                        grant: "g", accountSeed: Data(repeating: 4, count: 32), ktHandle: "h",
                        discoverySeed: Data(repeating: 5, count: 32)))),
            .signInApproval(.rejected),
            .signInSettled(.approved),
            .syncRequest(SyncRequest(requestID: id, replySubject: subject, replyPubkey: key, timestamp: now)),
            .syncPreparing(SyncPreparing(requestID: id, estimatedBytes: 10, doneBytes: 2)),
            .syncOffer(
                SyncOffer(
                    requestID: id, blobID: Data(repeating: 6, count: 16), key: Data(repeating: 7, count: 32),
                    nonce: Data(repeating: 8, count: 12), sha256: Data(repeating: 9, count: 32), sizeBytes: 5)),
            .syncAck(SyncAck(requestID: id, ok: false, reason: "hash differs")),
            .syncFailed(SyncFailure(requestID: id, kind: .declined, reason: "no")),
            .syncCancel(SyncCancel(requestID: id)),
        ] + SyncRoundMessagesTests.every

    @Test("each message goes out under its own type and comes back the same", arguments: every)
    func roundTrip(_ message: SiblingMessage) throws {
        #expect(try SiblingMessage(type: message.type, payload: try message.encoded) == message)
    }

    @Test("every type byte but the reserved sync_delta has a message")
    func everyType() {
        let covered = Set(Self.every.map(\.type))
        #expect(covered == Set(PayloadType.allCases).subtracting([.syncDelta]))
    }

    @Test("a payload read under another type is refused, not misread")
    func wrongType() throws {
        let cancel = try SiblingMessage.syncCancel(SyncCancel(requestID: Self.id)).encoded
        // A cancel's 16 bytes are not an ack, an offer or a settlement.
        for type in [PayloadType.syncAck, .syncOffer, .signInSettled, .syncRequest] {
            #expect(throws: PixieWireError.self) { try SiblingMessage(type: type, payload: cancel) }
        }
    }

    @Test("sync_delta, reserved, is refused with a reason that says to update")
    func reserved() {
        #expect {
            try SiblingMessage(type: .syncDelta, payload: Data([1, 2, 3]))
        } throws: { error in
            "\(error)".contains("update pixie")
        }
    }

    @Test("a settlement's outcome is one byte of 0, 1 or 2")
    func settlementOutcome() {
        for byte in UInt8(0)...2 {
            #expect((try? SignInSettlement.Outcome(decoding: Data([byte])))?.rawValue == byte)
        }
        #expect(throws: PixieWireError.self) { try SignInSettlement.Outcome(decoding: Data([3])) }
        #expect(throws: PixieWireError.self) { try SignInSettlement.Outcome(decoding: Data([1, 1])) }
        #expect(throws: PixieWireError.self) { try SignInSettlement.Outcome(decoding: Data()) }
    }
}
