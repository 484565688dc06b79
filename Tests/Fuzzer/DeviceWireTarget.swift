import Foundation
import PixieWire
import SiblingsCrypto

/// What one device parses from another over the relay (docs/pixie-protocol.md): the sign-in and Sync messages,
/// the logged discovery binding, the settlement digest, and the two sealed formats. An input's first byte picks
/// what its rest is:
/// - 0: the messages and fields, parsed as they are;
/// - 1: a DiscoveryBox's plaintext (phone cert, type, payload), sealed here to a fixed discovery key and opened
///   again, so the inner parser sees it (random bytes never pass the AEAD otherwise);
/// - 2: a sealed-sender envelope's plaintext (sender cert, type, length, payload, inner MAC), the same way;
/// - 3: the rest opened as a box and as an envelope, as a device opens what arrives.
/// Sealing costs an X-Wing encapsulation and decapsulation per input (about 150 µs).
let deviceWireTarget = FuzzTarget(
    name: "device-wire",
    summary: "sign-in and Sync messages, DiscoveryBox and sealed-sender envelopes (PixieWire)",
    maximumLength: 16_384,
    seeds: {
        let subject = RelaySubjectKey().subject
        let sealing = XWing.PrivateKey().publicKey
        let id = Data(repeating: 1, count: 16)
        let stamp = Date(timeIntervalSince1970: 1_800_000_000)
        let messages: [Data] = try [
            SignInRequest(deviceModel: "Pixel", replySubject: subject, sealingKey: sealing, timestamp: stamp).encoded,
            SignInAck(deviceFamily: "phone").encoded,
            SignInApproval.approved(
                .init(
                    grant: "grant", accountSeed: Data(repeating: 2, count: 32), ktHandle: "kt",
                    discoverySeed: Data(repeating: 3, count: 32))
            ).encoded,
            SignInApproval.rejected.encoded,
            SyncRequest(requestID: id, replySubject: subject, replyPubkey: sealing, timestamp: stamp).encoded,
            SyncPreparing(requestID: id, estimatedBytes: 1 << 20, doneBytes: 4096).encoded,
            SyncOffer(
                requestID: id, blobID: Data(repeating: 4, count: 16), key: Data(repeating: 5, count: 32),
                nonce: Data(repeating: 6, count: 12), sha256: Data(repeating: 7, count: 32), sizeBytes: 1 << 20
            ).encoded,
            SyncAck(requestID: id, ok: false, reason: "busy").encoded,
            SyncFailure(requestID: id, kind: .uploadFailed, reason: "budget").encoded,
            SyncCancel(requestID: id).encoded,
        ]
        let cert = Data(repeating: 8, count: PhoneOwnershipCert.byteCount)
        let box = cert + [PayloadType.signInRequest.rawValue] + messages[0]
        var envelope = Data([0, 4]) + Data(repeating: 9, count: 4) + [PayloadType.syncOffer.rawValue]
        envelope += [0, 0, 0, UInt8(messages[6].count)] + messages[6] + Data(repeating: 0, count: 32)
        let (sealedBox, _) = try DiscoveryBox(phoneCert: cert, type: .signInRequest, payload: messages[0]).sealed(
            to: deviceWireKey.publicKey)
        return messages.map { Data([0]) + $0 } + [Data([1]) + box, Data([2]) + envelope, Data([3]) + sealedBox]
    },
    run: { input in
        guard let selector = input.first else { return }
        let rest = input.dropFirst()
        switch selector % 4 {
        case 0:
            _ = try? SignInRequest(decoding: rest)
            _ = try? SignInAck(decoding: rest)
            _ = try? SignInApproval(decoding: rest)
            _ = try? SyncRequest(decoding: rest)
            _ = try? SyncPreparing(decoding: rest)
            _ = try? SyncOffer(decoding: rest)
            _ = try? SyncAck(decoding: rest)
            _ = try? SyncFailure(decoding: rest)
            _ = try? SyncCancel(decoding: rest)
            _ = KeyTransparencyCommitment.DiscoveryBinding(logged: Data(rest))
            _ = SignInSettlement.requestDigest(of: rest)
        case 1:
            guard let box = seal(rest, info: "pixie/discovery-box/v1", subject: nil) else { return }
            _ = try? DiscoveryBox.open(box, with: deviceWireKey)
        case 2:
            guard let envelope = seal(rest, info: "pixie/sealed-sender/v1", subject: deviceWireSubject) else { return }
            _ = try? SealedSenderEnvelope.open(envelope, with: deviceWireKey, recipient: deviceWireSubject)
        default:
            _ = try? DiscoveryBox.open(rest, with: deviceWireKey)
            _ = try? SealedSenderEnvelope.open(rest, with: deviceWireKey, recipient: deviceWireSubject)
        }
    })

/// `plaintext` sealed as the formats seal theirs: version 1, the encapsulated key, then the AEAD under the header
/// (and, for an envelope, the recipient's subject) as associated data.
private func seal(_ plaintext: Data.SubSequence, info: String, subject: RelaySubject?) -> Data? {
    guard
        var sender = try? HPKE.Sender(
            recipientKey: deviceWireKey.publicKey, ciphersuite: .XWingMLKEM768X25519_SHA256_AES_GCM_256,
            info: Data(info.utf8))
    else { return nil }
    let header = Data([1])
    guard let sealed = try? sender.seal(plaintext, authenticating: header + (subject?.rawRepresentation ?? Data()))
    else { return nil }
    return header + sender.encapsulatedKey + sealed
}

/// The fixed X-Wing key the target's boxes and envelopes are sealed to.
let deviceWireKey: XWing.PrivateKey = {
    do {
        return try XWing.PrivateKey(seedRepresentation: Data(repeating: 10, count: 32))
    } catch {
        fatalError("the fuzz target's fixed X-Wing key does not derive: \(error)")
    }
}()

let deviceWireSubject = RelaySubjectKey().subject
