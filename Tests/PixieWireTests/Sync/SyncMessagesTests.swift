import Foundation
import PixieWire
import SiblingsCrypto
import Testing

@Suite("Onboarding sync messages: request, preparing, offer, ack, failure, cancel")
struct SyncMessagesTests {
    let requestID = SecureRandom.bytes(count: 16)

    func expectMalformed(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            try body()
            Issue.record("expected a malformed message", sourceLocation: sourceLocation)
        } catch let error as PixieWireError {
            #expect(error.code == .malformed, sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
    }

    /// Every cut and every extra byte is refused: a decoder that stopped early or ignored a tail would pass.
    func expectExact<Message>(_ bytes: Data, _ decode: (Data) throws -> Message) {
        for count in [0, 1, 15, 16, bytes.count - 1] where count < bytes.count {
            expectMalformed { _ = try decode(bytes.prefix(count)) }
        }
        expectMalformed { _ = try decode(bytes + Data([0])) }
    }

    @Test("a request carries its id, the reply inbox and key, and the time, at the documented offsets")
    func request() throws {
        let key = XWing.PrivateKey().publicKey
        let subject = RelaySubjectKey().subject
        let request = SyncRequest(
            requestID: requestID, replySubject: subject, replyPubkey: key,
            timestamp: Date(timeIntervalSince1970: 1_800_000_123))
        let bytes = try request.encoded
        #expect(bytes.count == 16 + 32 + 1216 + 8)
        #expect(bytes.prefix(16) == requestID)
        #expect(bytes.dropFirst(16).prefix(32) == subject.rawRepresentation)
        #expect(bytes.dropFirst(48).prefix(1216) == key.rawRepresentation)
        #expect(bytes.suffix(8) == Data([0, 0, 0, 0, 0x6b, 0x49, 0xd2, 0x7b]))  // 1,800,000,123
        #expect(try SyncRequest(decoding: bytes) == request)
        expectExact(bytes) { try SyncRequest(decoding: $0) }
        expectMalformed {
            _ = try SyncRequest(
                requestID: Data(count: 15), replySubject: subject, replyPubkey: key, timestamp: Date()
            ).encoded
        }
    }

    @Test("a progress report never claims more done than estimated")
    func preparing() throws {
        let report = SyncPreparing(requestID: requestID, estimatedBytes: 1 << 33, doneBytes: 12_345)
        let bytes = try report.encoded
        #expect(bytes.count == 32)
        #expect(try SyncPreparing(decoding: bytes) == report)
        expectExact(bytes) { try SyncPreparing(decoding: $0) }
        expectMalformed { _ = try SyncPreparing(requestID: requestID, estimatedBytes: 5, doneBytes: 6).encoded }
        let overdone = requestID + Data([0, 0, 0, 0, 0, 0, 0, 5]) + Data([0, 0, 0, 0, 0, 0, 0, 6])
        expectMalformed { _ = try SyncPreparing(decoding: overdone) }
    }

    @Test("an offer carries blob, format, key, nonce, hash and size; an unknown format says to update")
    func offer() throws {
        let offer = SyncOffer(
            requestID: requestID, blobID: SecureRandom.bytes(count: 16), key: SecureRandom.bytes(count: 32),
            nonce: SecureRandom.bytes(count: 12), sha256: Data(SHA256.hash(data: Data("x".utf8))),
            sizeBytes: 1 << 30)
        let bytes = try offer.encoded
        #expect(bytes.count == 16 + 16 + 1 + 32 + 12 + 32 + 8)
        #expect(bytes[32] == 1)
        #expect(bytes.dropFirst(33).prefix(32) == offer.key)
        #expect(bytes.dropFirst(65).prefix(12) == offer.nonce)
        #expect(bytes.dropFirst(77).prefix(32) == offer.sha256)
        #expect(try SyncOffer(decoding: bytes) == offer)
        #expect(offer.blobName == offer.blobID.base64URLEncodedString() && offer.blobName.count == 22)
        expectExact(bytes) { try SyncOffer(decoding: $0) }

        var future = bytes
        future[32] = 2
        do {
            _ = try SyncOffer(decoding: future)
            Issue.record("a format-2 offer was read as format 1")
        } catch {
            #expect(error.code == .malformed && error.reason.contains("update pixie"))
        }
        var short = offer
        short.nonce = Data(count: 8)
        expectMalformed { _ = try short.encoded }
    }

    @Test("an ack is ok or not, with a reason of at most 256 bytes")
    func ack() throws {
        for ack in [
            SyncAck(requestID: requestID, ok: true),
            SyncAck(requestID: requestID, ok: false, reason: "the snapshot's SHA-256 is not the offer's"),
        ] {
            let bytes = try ack.encoded
            #expect(try SyncAck(decoding: bytes) == ack)
            expectExact(bytes) { try SyncAck(decoding: $0) }
        }
        var flag = try SyncAck(requestID: requestID, ok: true).encoded
        flag[16] = 2
        expectMalformed { _ = try SyncAck(decoding: flag) }
        expectMalformed {
            _ = try SyncAck(requestID: requestID, ok: false, reason: String(repeating: "é", count: 129)).encoded
        }
        #expect(
            try SyncAck(requestID: requestID, ok: false, reason: String(repeating: "é", count: 128)).encoded.count == 19
                + 256)
    }

    @Test("a failure says which: declined, export failed, upload failed; an unknown kind is refused")
    func failure() throws {
        for kind in SyncFailure.Kind.allCases {
            let failure = SyncFailure(requestID: requestID, kind: kind, reason: "blob-svc answered 507")
            let bytes = try failure.encoded
            #expect(bytes[16] == kind.rawValue)
            #expect(try SyncFailure(decoding: bytes) == failure)
            expectExact(bytes) { try SyncFailure(decoding: $0) }
        }
        var unknown = try SyncFailure(requestID: requestID, kind: .declined, reason: "").encoded
        unknown[16] = 0
        expectMalformed { _ = try SyncFailure(decoding: unknown) }
    }

    @Test("a cancel is the request_id alone")
    func cancel() throws {
        let bytes = try SyncCancel(requestID: requestID).encoded
        #expect(bytes == requestID)
        #expect(try SyncCancel(decoding: bytes).requestID == requestID)
        expectMalformed { _ = try SyncCancel(decoding: bytes.dropLast()) }
        expectMalformed { _ = try SyncCancel(decoding: bytes + Data([1])) }
    }

    @Test("the sync frames beyond the seed are Silent, like every frame but the request")
    func wakeClasses() {
        for type in [PayloadType.syncPreparing, .syncFailed, .syncCancel, .syncOffer, .syncAck] {
            #expect(type.wakeClass == .silent)
        }
        #expect(PayloadType.syncRequest.wakeClass == .sync)
        #expect(PayloadType(rawValue: 0x14)?.description == "sync_preparing")
        #expect(PayloadType(rawValue: 0x17) == nil)
    }
}
