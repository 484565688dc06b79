import Foundation

/// What a sealed payload is, the first byte inside every DiscoveryBox, sign-in reply and sealed-sender envelope
/// (docs/pixie-protocol.md, "Payload types"). The sender puts the matching ``WakeClass`` on the relay's SEND, so
/// the relay learns how urgent a frame is and nothing of what it says.
public enum PayloadType: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A new device asks to join (in a ``DiscoveryBox``): ``SignInRequest``.
    case signInRequest = 0x01
    /// A sibling saw the request and asks its person: ``SignInAck``.
    case signInAck = 0x02
    /// The person's answer: ``SignInApproval``.
    case signInApproval = 0x03
    /// A sign-in was answered or given up, for the other siblings to dismiss its prompt: ``SignInSettlement``.
    case signInSettled = 0x04
    /// A new device asks a sibling for its store: ``SyncRequest``.
    case syncRequest = 0x10
    /// A sibling's answer: where the sealed snapshot is (``SyncOffer``).
    case syncOffer = 0x11
    /// The new device says whether the snapshot was absorbed: ``SyncAck``.
    case syncAck = 0x12
    /// A row-level change between siblings (the digest loop).
    case syncDelta = 0x13
    /// A sibling accepted and is preparing its snapshot: ``SyncPreparing`` (beyond the seed).
    case syncPreparing = 0x14
    /// A sibling declined, or its export or upload failed: ``SyncFailure`` (beyond the seed).
    case syncFailed = 0x15
    /// The new device no longer wants a sibling's snapshot: ``SyncCancel`` (beyond the seed).
    case syncCancel = 0x16
    /// A reconcile round's digests (docs/pixie-sync.md): ``SyncDigests``.
    case syncDigest = 0x20
    /// Coded symbols or items of one category's set: ``SyncSketch``.
    case syncSketch = 0x21
    /// More symbols, some rows, or every row: ``SyncWant``.
    case syncWant = 0x22
    /// Rows: ``SyncRows``.
    case syncRows = 0x23

    /// The frames worth waking a sleeping sibling for, since a new device waits on each: the SyncRequest (the
    /// seed's only one) and, beyond the seed, the SignInRequest on the account's discovery inbox, because sign-in
    /// needs "one awake enough to receive a push and a human to tap Approve" (docs/pixie-protocol.md,
    /// "Differences from the seed"). Everything else reaches live connections only.
    public var wakeClass: WakeClass { self == .syncRequest || self == .signInRequest ? .sync : .silent }

    public var description: String {
        switch self {
        case .signInRequest: "signin_request"
        case .signInAck: "signin_ack"
        case .signInApproval: "signin_approval"
        case .signInSettled: "signin_settled"
        case .syncRequest: "sync_request"
        case .syncOffer: "sync_offer"
        case .syncAck: "sync_ack"
        case .syncDelta: "sync_delta"
        case .syncPreparing: "sync_preparing"
        case .syncFailed: "sync_failed"
        case .syncCancel: "sync_cancel"
        case .syncDigest: "sync_digest"
        case .syncSketch: "sync_sketch"
        case .syncWant: "sync_want"
        case .syncRows: "sync_rows"
        }
    }

    static func decode(_ byte: UInt8?, in what: String) throws(PixieWireError) -> PayloadType {
        guard let byte else { throw PixieWireError(.malformed, "\(what) ends before its payload type") }
        guard let type = PayloadType(rawValue: byte) else {
            throw PixieWireError(
                .malformed, "\(what) carries payload type 0x\(String(byte, radix: 16)), which is unknown")
        }
        return type
    }
}
