import Foundation
import PixieWire
import SiblingsCrypto

/// The checks a sibling makes on a sync frame before anything else, as pure functions of the frame and the
/// device's own state (000_e422bd9a7c930342.txt, "guard isSameAccount(senderUserIDHash) else { return }").
///
/// - ``isSameAccount(_:)``, on every sync frame, after the envelope opened and its SenderCert verified: this
///   device's own userIDHash is 32 bytes and equals the one in the cert. A device that does not know its own
///   account refuses everything.
/// - ``check(_:now:)``, on a SyncRequest: its timestamp is inside the freshness window, so that an old request a
///   relay plays again starts no export.
///
/// The one check that needs the network (the reply key is a device of the logged roster, so a removed device
/// whose SenderCert has not expired yet gets nothing) comes after these, in ``SyncService``.
@_spi(Testing) public struct SyncRequestCheck: Sendable {
    public let ownUserIDHash: Data?
    /// How far a request's timestamp may be from this device's clock, either way.
    public let freshness: TimeInterval

    public init(ownUserIDHash: Data?, freshness: TimeInterval) {
        self.ownUserIDHash = ownUserIDHash
        self.freshness = freshness
    }

    /// The seed's isSameAccount.
    public func isSameAccount(_ senderUserIDHash: Data) -> Bool {
        guard let own = ownUserIDHash, own.count == 32, senderUserIDHash.count == 32 else { return false }
        return safeCompare(own, senderUserIDHash)
    }

    /// Nil if `request`, received at `now`, may go on; otherwise why it is dropped (for this device's log).
    public func check(_ request: SyncRequest, now: Date) -> String? {
        guard abs(request.timestamp.timeIntervalSince(now)) <= freshness else {
            return "a sync request stamped \(request.timestamp), too far from this device's clock"
        }
        return nil
    }
}
