import Foundation
import SiblingsCrypto

/// The onboarding sync's messages (000_e422bd9a7c930342.txt, "What do I know?"), each sealed in a
/// ``SealedSenderEnvelope`` between two devices of one account (docs/pixie-protocol.md, "The onboarding sync").
/// Every one starts with the 16-byte `request_id` the new device chose for that sibling, stable across re-sends,
/// so an answer maps back to its request and a repeated request is recognised.
public enum SyncMessage {
    /// The length of a `request_id`.
    public static let requestIDByteCount = 16
    /// The longest reason a ``SyncAck`` or ``SyncFailure`` carries.
    public static let maximumReasonByteCount = 256

    static func reason(_ text: String, in what: String) throws(PixieWireError) -> Data {
        let bytes = Data(text.utf8)
        guard bytes.count <= maximumReasonByteCount else {
            throw PixieWireError(.malformed, "\(what) carries a reason of at most \(maximumReasonByteCount) bytes")
        }
        return bytes
    }

    static func readReason(_ reader: inout WireReader) -> String? {
        guard let bytes = reader.shortField(), bytes.count <= maximumReasonByteCount else { return nil }
        return String(data: bytes, encoding: .utf8)
    }

    static func readRequestID(_ reader: inout WireReader) -> Data? { reader.bytes(requestIDByteCount) }

    static func checkRequestID(_ id: Data, in what: String) throws(PixieWireError) {
        guard id.count == requestIDByteCount else {
            throw PixieWireError(.malformed, "\(what) carries a \(requestIDByteCount)-byte request_id")
        }
    }
}

/// "Please send me your store" (``PayloadType/syncRequest``, the only payload of wake class Sync), from a new
/// device to each sibling. Sealed sender has no return address outside, so the request writes one inside: the
/// inbox and the sealing key the answers go to (the seed's `reply_pubkey`).
///
///     request_id (16)
///     reply_subject (32): the new device's inbox
///     reply_pubkey (1216): its X-Wing sealing key, which answers are sealed to
///     timestamp (8): Unix seconds, big-endian
public struct SyncRequest: Sendable, Equatable {
    public var requestID: Data
    public var replySubject: RelaySubject
    public var replyPubkey: XWing.PublicKey
    public var timestamp: Date

    public init(requestID: Data, replySubject: RelaySubject, replyPubkey: XWing.PublicKey, timestamp: Date) {
        self.requestID = requestID
        self.replySubject = replySubject
        self.replyPubkey = replyPubkey
        self.timestamp = timestamp
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            try SyncMessage.checkRequestID(requestID, in: "a sync request")
            var out = requestID
            out += replySubject.rawRepresentation
            out += replyPubkey.rawRepresentation
            out.appendUInt64(UInt64(max(0, timestamp.timeIntervalSince1970.rounded(.down))))
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let id = SyncMessage.readRequestID(&reader), let subject = reader.bytes(RelaySubject.byteCount),
            let key = reader.bytes(XWing.publicKeyByteCount), let seconds = reader.uint64(), reader.isAtEnd,
            seconds <= UInt64(Int64.max)
        else { throw PixieWireError(.malformed, "not a sync request") }
        do {
            replyPubkey = try XWing.PublicKey(rawRepresentation: key)
        } catch {
            throw PixieWireError(.malformed, "the sync request's reply_pubkey is not an X-Wing public key")
        }
        requestID = id
        replySubject = try RelaySubject(rawRepresentation: subject)
        timestamp = Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}

/// "I accepted, and this is coming" (``PayloadType/syncPreparing``, beyond the seed): sent by a sibling as soon
/// as it accepts a request, and again as its export and upload go on. It stops the new device's re-sends, tells
/// it how much to expect, and lets it cancel the other siblings, so that no second sibling uploads a store for
/// nothing.
///
///     request_id (16)
///     estimated_bytes (8): the sealed snapshot's expected size
///     done_bytes (8): how much of it is sealed and uploaded so far (at most estimated_bytes)
public struct SyncPreparing: Sendable, Equatable {
    public var requestID: Data
    public var estimatedBytes: UInt64
    public var doneBytes: UInt64

    public init(requestID: Data, estimatedBytes: UInt64, doneBytes: UInt64 = 0) {
        self.requestID = requestID
        self.estimatedBytes = estimatedBytes
        self.doneBytes = doneBytes
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            try SyncMessage.checkRequestID(requestID, in: "a sync progress report")
            guard doneBytes <= estimatedBytes else {
                throw PixieWireError(.malformed, "a sync progress report cannot have done more than it estimated")
            }
            var out = requestID
            out.appendUInt64(estimatedBytes)
            out.appendUInt64(doneBytes)
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let id = SyncMessage.readRequestID(&reader), let estimated = reader.uint64(), let done = reader.uint64(),
            reader.isAtEnd, done <= estimated
        else { throw PixieWireError(.malformed, "not a sync progress report") }
        requestID = id
        estimatedBytes = estimated
        doneBytes = done
    }
}

/// "Here is my store" (``PayloadType/syncOffer``): where the sealed snapshot is on blob-svc, and what opens and
/// checks it. The key and the hash travel here, sealed; the bytes travel by blob-svc, which anyone may read who
/// knows the blob_id.
///
///     request_id (16)
///     blob_id (16): the blob's id at blob-svc (its URL form is these bytes in base64url)
///     blob_format (1): 1 = BlobCrypto v1, chunked AES-256-GCM (docs/pixie-protocol.md, "BlobCrypto")
///     key (32): a fresh AES-256 key, used for this blob only
///     nonce (12): a fresh nonce, from which each chunk's nonce is derived
///     sha256 (32): SHA-256 of the whole ciphertext, checked before anything decrypted is kept
///     size_bytes (8): the ciphertext's length
public struct SyncOffer: Sendable, Equatable {
    public static let blobIDByteCount = 16
    /// The only blob format so far.
    public static let blobCryptoV1: UInt8 = 1

    public var requestID: Data
    public var blobID: Data
    public var blobFormat: UInt8
    public var key: Data
    public var nonce: Data
    public var sha256: Data
    public var sizeBytes: UInt64

    public init(
        requestID: Data, blobID: Data, blobFormat: UInt8 = SyncOffer.blobCryptoV1, key: Data, nonce: Data,
        sha256: Data, sizeBytes: UInt64
    ) {
        self.requestID = requestID
        self.blobID = blobID
        self.blobFormat = blobFormat
        self.key = key
        self.nonce = nonce
        self.sha256 = sha256
        self.sizeBytes = sizeBytes
    }

    /// The blob's id as blob-svc's URLs carry it.
    public var blobName: String { blobID.base64URLEncodedString() }

    public var encoded: Data {
        get throws(PixieWireError) {
            try SyncMessage.checkRequestID(requestID, in: "a sync offer")
            guard blobID.count == Self.blobIDByteCount, blobFormat == Self.blobCryptoV1, key.count == 32,
                nonce.count == 12, sha256.count == 32
            else {
                throw PixieWireError(
                    .malformed,
                    "a sync offer carries a 16-byte blob_id, blob format 1, a 32-byte key, a 12-byte nonce and a "
                        + "32-byte SHA-256")
            }
            var out = requestID
            out += blobID
            out.append(blobFormat)
            out += key
            out += nonce
            out += sha256
            out.appendUInt64(sizeBytes)
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let id = SyncMessage.readRequestID(&reader), let blob = reader.bytes(Self.blobIDByteCount),
            let format = reader.byte(), let key = reader.bytes(32), let nonce = reader.bytes(12),
            let digest = reader.bytes(32), let size = reader.uint64(), reader.isAtEnd
        else { throw PixieWireError(.malformed, "not a sync offer") }
        guard format == Self.blobCryptoV1 else {
            throw PixieWireError(
                .malformed,
                "the sync offer's blob is in format \(format), which this version cannot open; update pixie")
        }
        requestID = id
        blobID = blob
        blobFormat = format
        self.key = key
        self.nonce = nonce
        sha256 = digest
        sizeBytes = size
    }
}

/// "Absorbed" or "not" (``PayloadType/syncAck``): the new device's answer to an offer. `ok` is true only after the
/// ciphertext's SHA-256 matched, it opened, and it was imported; the sibling treats it as informational.
///
///     request_id (16)
///     ok (1): 1 absorbed, 0 not
///     u16 length ‖ reason (UTF-8, at most 256 bytes; empty when ok)
public struct SyncAck: Sendable, Equatable {
    public var requestID: Data
    public var ok: Bool
    public var reason: String

    public init(requestID: Data, ok: Bool, reason: String = "") {
        self.requestID = requestID
        self.ok = ok
        self.reason = reason
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            try SyncMessage.checkRequestID(requestID, in: "a sync ack")
            var out = requestID
            out.append(ok ? 1 : 0)
            out.appendShortField(try SyncMessage.reason(reason, in: "a sync ack"))
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let id = SyncMessage.readRequestID(&reader), let flag = reader.byte(), flag <= 1,
            let reason = SyncMessage.readReason(&reader), reader.isAtEnd
        else { throw PixieWireError(.malformed, "not a sync ack") }
        requestID = id
        ok = flag == 1
        self.reason = reason
    }
}

/// "I will not", or "I could not" (``PayloadType/syncFailed``, beyond the seed, where a sibling swallows the
/// error and the new device cannot tell "declined" from "broke").
///
///     request_id (16)
///     kind (1): 1 declined, 2 the export failed, 3 the upload failed
///     u16 length ‖ reason (UTF-8, at most 256 bytes): what the sibling's person would be told
public struct SyncFailure: Sendable, Equatable {
    public enum Kind: UInt8, Sendable, CaseIterable {
        /// The sibling will not send its store (for example, it is already sending it to this device).
        case declined = 1
        /// Reading or sealing its store failed.
        case exportFailed = 2
        /// blob-svc refused the upload, or could not be reached.
        case uploadFailed = 3
    }

    public var requestID: Data
    public var kind: Kind
    public var reason: String

    public init(requestID: Data, kind: Kind, reason: String) {
        self.requestID = requestID
        self.kind = kind
        self.reason = reason
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            try SyncMessage.checkRequestID(requestID, in: "a sync failure")
            var out = requestID
            out.append(kind.rawValue)
            out.appendShortField(try SyncMessage.reason(reason, in: "a sync failure"))
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let id = SyncMessage.readRequestID(&reader), let kind = reader.byte().flatMap(Kind.init(rawValue:)),
            let reason = SyncMessage.readReason(&reader), reader.isAtEnd
        else { throw PixieWireError(.malformed, "not a sync failure") }
        requestID = id
        self.kind = kind
        self.reason = reason
    }
}

/// "Stop" (``PayloadType/syncCancel``, beyond the seed): the new device no longer wants this sibling's store,
/// because another sibling is already preparing one, or the person gave up. A sibling that has not uploaded yet
/// stops; one that has deletes its blob.
///
///     request_id (16)
public struct SyncCancel: Sendable, Equatable {
    public var requestID: Data

    public init(requestID: Data) { self.requestID = requestID }

    public var encoded: Data {
        get throws(PixieWireError) {
            try SyncMessage.checkRequestID(requestID, in: "a sync cancel")
            return requestID
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let id = SyncMessage.readRequestID(&reader), reader.isAtEnd else {
            throw PixieWireError(.malformed, "not a sync cancel")
        }
        requestID = id
    }
}
