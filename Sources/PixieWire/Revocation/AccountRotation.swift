import Foundation
import SiblingsCrypto

/// The signed statement that the account's signing key moved to a new one when a device was removed
/// (docs/pixie-protocol.md, "Revoking a device", "What rotates"). Anyone who knew the old account key follows the
/// rotation with it, without trusting the server: it is signed by the old key and by the new one. The device that
/// made it signs it too, with its own roster key, so that a device which held the old account key (the removed
/// one) cannot pass its own rotation off as another device's.
///
///     statement = "pixie/account-rotation/v1" ‖ 0x00 ‖ u16 len ‖ kt_handle ‖ u64 epoch (the new one)
///               ‖ old account pubkey (1984) ‖ new account pubkey (1984) ‖ H(new discovery value) (32)
///               ‖ H(remover's device pubkey) (32) ‖ H(removed device's pubkey) (32) ‖ u64 time
///     value     = statement ‖ remover's device pubkey (1984) ‖ sig_old (3373) ‖ sig_new (3373) ‖ sig_remover (3373)
///
/// `sig_old` and `sig_new` are HybridSignatures over the statement, ctx `pixie/account-rotation/v1`; `sig_remover`
/// is the remover's device key's over the same bytes, ctx `pixie/account-rotation/remover/v1`. The value is what
/// the log holds under `account-rotation/<kt_handle>` (``KeyTransparencyLabel/accountRotation(ktHandle:)``).
public struct AccountRotation: Sendable, Equatable {
    public static let context = Data("pixie/account-rotation/v1".utf8)
    /// The remover's signature's context: a device key's signature is never one of an account key's.
    public static let removerContext = Data("pixie/account-rotation/remover/v1".utf8)

    public let ktHandle: String
    /// The account's epoch after this rotation: the version of `account/<kt_handle>` that holds ``newKey`` (1 is the
    /// key the account was created with, so a rotation's epoch is 2 or more).
    public let epoch: UInt64
    /// The account signing key before the rotation.
    public let oldKey: HybridSignature.PublicKey
    public let newKey: HybridSignature.PublicKey
    /// SHA-256 of the `discovery/<phone_id>` value logged with the rotation (the new inbox and key).
    public let discoveryValueHash: Data
    /// SHA-256 of the roster pubkeys of the device that removed, and of the one removed.
    public let removerKeyHash: Data
    public let removedKeyHash: Data
    /// When the remover made it, Unix seconds.
    public let time: UInt64
    /// The remover's roster pubkey, whole (its hash is in the statement), and the three signatures.
    public let removerKey: HybridSignature.PublicKey
    public let oldSignature: HybridSignature.Signature
    public let newSignature: HybridSignature.Signature
    public let removerSignature: HybridSignature.Signature

    /// The statement's bytes, which both signatures cover.
    public var statement: Data {
        Self.statement(
            ktHandle: ktHandle, epoch: epoch, oldKey: oldKey, newKey: newKey,
            discoveryValueHash: discoveryValueHash, removerKeyHash: removerKeyHash, removedKeyHash: removedKeyHash,
            time: time)
    }

    static func statement(
        ktHandle: String, epoch: UInt64, oldKey: HybridSignature.PublicKey, newKey: HybridSignature.PublicKey,
        discoveryValueHash: Data, removerKeyHash: Data, removedKeyHash: Data, time: UInt64
    ) -> Data {
        var bytes = context
        bytes.append(0)
        bytes.appendShortField(Data(ktHandle.utf8))
        bytes.appendUInt64(epoch)
        bytes += oldKey.rawRepresentation
        bytes += newKey.rawRepresentation
        bytes += discoveryValueHash
        bytes += removerKeyHash
        bytes += removedKeyHash
        bytes.appendUInt64(time)
        return bytes
    }

    /// The logged value: the statement, the remover's key and the three signatures.
    public var encoded: Data {
        statement + removerKey.rawRepresentation + oldSignature.rawRepresentation + newSignature.rawRepresentation
            + removerSignature.rawRepresentation
    }

    /// Makes and signs the statement that `oldKey`'s account moves to `newKey` at `epoch`, as the device whose roster
    /// key is `remover` removes the one whose roster pubkey is `removed`.
    public init(
        ktHandle: String, epoch: UInt64, from oldKey: HybridSignature.PrivateKey, to newKey: HybridSignature.PrivateKey,
        discoveryValue: Data, remover: HybridSignature.PrivateKey, removed: Data, time: Date
    ) throws {
        guard !ktHandle.isEmpty, ktHandle.utf8.count <= 256, epoch >= 2 else {
            throw PixieWireError(.malformed, "a rotation names a KT handle of 1 to 256 bytes and an epoch of 2 or more")
        }
        let discoveryValueHash = Data(SHA256.hash(data: discoveryValue))
        let removerKeyHash = Data(SHA256.hash(data: remover.publicKey.rawRepresentation))
        let removedKeyHash = Data(SHA256.hash(data: removed))
        let seconds = UInt64(max(0, time.timeIntervalSince1970))
        let unsigned = Self.statement(
            ktHandle: ktHandle, epoch: epoch, oldKey: oldKey.publicKey, newKey: newKey.publicKey,
            discoveryValueHash: discoveryValueHash, removerKeyHash: removerKeyHash, removedKeyHash: removedKeyHash,
            time: seconds)
        self.ktHandle = ktHandle
        self.epoch = epoch
        self.oldKey = oldKey.publicKey
        self.newKey = newKey.publicKey
        self.discoveryValueHash = discoveryValueHash
        self.removerKeyHash = removerKeyHash
        self.removedKeyHash = removedKeyHash
        self.time = seconds
        removerKey = remover.publicKey
        oldSignature = try oldKey.signature(for: unsigned, context: Self.context)
        newSignature = try newKey.signature(for: unsigned, context: Self.context)
        removerSignature = try remover.signature(for: unsigned, context: Self.removerContext)
    }

    /// Reads a logged value; throws ``PixieWireError/Code/malformed`` for one that is not a rotation. The signatures
    /// are not checked: ``verify(previousKey:)`` does that.
    public init(decoding value: Data) throws(PixieWireError) {
        var reader = WireReader(value)
        guard reader.bytes(Self.context.count) == Self.context, reader.byte() == 0,
            let handle = reader.shortField(), let ktHandle = String(data: handle, encoding: .utf8), !ktHandle.isEmpty,
            let epoch = reader.uint64(), epoch >= 2,
            let oldKeyBytes = reader.bytes(HybridSignature.publicKeyByteCount),
            let oldKey = try? HybridSignature.PublicKey(rawRepresentation: oldKeyBytes),
            let newKeyBytes = reader.bytes(HybridSignature.publicKeyByteCount),
            let newKey = try? HybridSignature.PublicKey(rawRepresentation: newKeyBytes),
            let discoveryValueHash = reader.bytes(32), let removerKeyHash = reader.bytes(32),
            let removedKeyHash = reader.bytes(32), let time = reader.uint64(),
            let removerKeyBytes = reader.bytes(HybridSignature.publicKeyByteCount),
            let removerKey = try? HybridSignature.PublicKey(rawRepresentation: removerKeyBytes),
            let old = reader.bytes(HybridSignature.signatureByteCount),
            let oldSignature = try? HybridSignature.Signature(rawRepresentation: old),
            let new = reader.bytes(HybridSignature.signatureByteCount),
            let newSignature = try? HybridSignature.Signature(rawRepresentation: new),
            let byRemover = reader.bytes(HybridSignature.signatureByteCount),
            let removerSignature = try? HybridSignature.Signature(rawRepresentation: byRemover),
            reader.rest().isEmpty
        else {
            throw PixieWireError(
                .malformed, "the value is not an account rotation statement with its remover's key and three signatures"
            )
        }
        self.ktHandle = ktHandle
        self.epoch = epoch
        self.oldKey = oldKey
        self.newKey = newKey
        self.discoveryValueHash = discoveryValueHash
        self.removerKeyHash = removerKeyHash
        self.removedKeyHash = removedKeyHash
        self.time = time
        self.removerKey = removerKey
        self.oldSignature = oldSignature
        self.newSignature = newSignature
        self.removerSignature = removerSignature
    }

    /// Checks that this rotation moves the account from `previousKey` (the key the checker knew, or the log's
    /// previous version of `account/<kt_handle>`): it names that key, both the old key's and the new key's
    /// signatures verify, and so does the remover's, by the device key the statement names, which is not the removed
    /// device's. A contact takes ``newKey`` only after this; a new key without it is refused. Whether the remover was
    /// on the account's roster is the device's check, which holds the roster (``AccountRotator``).
    public func verify(previousKey: HybridSignature.PublicKey) throws(PixieWireError) {
        guard oldKey == previousKey else {
            throw PixieWireError(.badSignature, "the rotation does not start from the account key this device knew")
        }
        guard safeCompare(removerKeyHash, Data(SHA256.hash(data: removerKey.rawRepresentation))) else {
            throw PixieWireError(.badSignature, "the rotation carries another device key than the remover it names")
        }
        guard !safeCompare(removerKeyHash, removedKeyHash) else {
            throw PixieWireError(
                .badSignature,
                "the rotation names one device as both remover and removed: a device does not remove itself")
        }
        let unsigned = statement
        guard removerKey.isValidSignature(removerSignature, for: unsigned, context: Self.removerContext) else {
            throw PixieWireError(.badSignature, "the rotation is not signed by the device that it says removed")
        }
        guard oldKey.isValidSignature(oldSignature, for: unsigned, context: Self.context) else {
            throw PixieWireError(.badSignature, "the rotation is not signed by the account's previous key")
        }
        guard newKey.isValidSignature(newSignature, for: unsigned, context: Self.context) else {
            throw PixieWireError(.badSignature, "the rotation is not signed by the account's new key")
        }
    }
}
