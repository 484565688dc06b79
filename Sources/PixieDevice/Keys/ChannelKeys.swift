import Foundation
import PixieWire
import SiblingsCrypto

/// ChannelKeys.resolve (000_e422bd9a7c930342.txt): the key an envelope's inner MAC is under, from the verified
/// SenderCert of whoever sent it. For a cert that carries this account's own userIDHash the key is
/// ``InnerMAC/siblingChannelKey(accountSeed:)`` and nothing else; for a contact, the channel key in the
/// contact's row, looked up by userIDHash. Resolution fails closed: no key means the envelope is rejected on
/// receive, and the send throws.
public struct ChannelKeys: Sendable {
    /// A contact's channel key by their userIDHash (the device store's contacts); nil when there is none.
    public typealias ContactLookup = @Sendable (_ userIDHash: Data) throws -> SymmetricKey?

    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// A sibling frame, but this device holds no account seed yet (it has not been approved).
        case noAccountSeed
        /// Nobody this device has a channel key with.
        case unknownSender
        /// The SenderCert does not verify.
        case senderCertRefused(PixieWireError.Code)

        public var description: String {
            switch self {
            case .noAccountSeed:
                "this device holds no account seed yet, so it can neither write nor check a sibling frame; finish "
                    + "signing in first"
            case .unknownSender: "the frame is from nobody this device has a channel key with, so it was rejected"
            case .senderCertRefused(let code): "the frame's sender cert was refused (\(code)), so it was rejected"
            }
        }
    }

    private let ownUserIDHash: Data
    private let siblingKey: SymmetricKey?
    private let contacts: ContactLookup

    /// `accountSeed` is nil until a sibling's approval brought it (or this device created the account).
    public init(ownUserIDHash: Data, accountSeed: Data?, contacts: @escaping ContactLookup) throws {
        self.ownUserIDHash = ownUserIDHash
        self.siblingKey = try accountSeed.map { try InnerMAC.siblingChannelKey(accountSeed: $0) }
        self.contacts = contacts
    }

    /// The channel key for frames to or from the holder of `userIDHash`.
    public func resolve(userIDHash: Data) throws -> SymmetricKey {
        if safeCompare(userIDHash, ownUserIDHash) {
            guard let siblingKey else { throw Failure.noAccountSeed }
            return siblingKey
        }
        guard let key = try contacts(userIDHash) else { throw Failure.unknownSender }
        return key
    }

    /// Seals a frame to the device at `recipient` (sealing key `recipientKey`) of `userIDHash` (this account's
    /// own for a sibling); throws when there is no channel key.
    public func seal(
        _ type: PayloadType, _ payload: Data, senderCert: SenderCert, to userIDHash: Data,
        recipientKey: XWing.PublicKey, recipient: RelaySubject
    ) throws -> Data {
        try SealedSenderEnvelope.seal(
            type, payload, senderCert: senderCert.rawRepresentation, channelKey: try resolve(userIDHash: userIDHash),
            to: recipientKey, recipient: recipient)
    }

    /// Seals `message` to the device at `recipient`, as ``seal(_:_:senderCert:to:recipientKey:recipient:)`` does
    /// its type and bytes.
    public func seal(
        _ message: SiblingMessage, senderCert: SenderCert, to userIDHash: Data, recipientKey: XWing.PublicKey,
        recipient: RelaySubject
    ) throws -> Data {
        try seal(
            message.type, try message.encoded, senderCert: senderCert, to: userIDHash, recipientKey: recipientKey,
            recipient: recipient)
    }

    /// Opens an envelope delivered to this device's `inbox`: the verified sender, the type and the payload, or an
    /// error (the frame is rejected) when the cert does not verify, no key resolves, or the MAC is not under it.
    public func open(
        _ envelope: some DataProtocol, sealingKey: XWing.PrivateKey, inbox: RelaySubject,
        senderCerts: SenderCert.Verifier, now: Date
    ) throws -> (sender: SenderCert, type: PayloadType, payload: Data) {
        let opened = try SealedSenderEnvelope.open(envelope, with: sealingKey, recipient: inbox)
        let sender: SenderCert
        do {
            sender = try senderCerts.verify(opened.senderCert, now: now)
        } catch {
            throw Failure.senderCertRefused(error.code)
        }
        let payload = try opened.authenticate(channelKey: try resolve(userIDHash: sender.userIDHash))
        return (sender, opened.type, payload)
    }
}
