import Foundation
import PixieWire
import SiblingsCrypto

/// The device's half of a rotation (docs/pixie-protocol.md, "Revoking a device"), without I/O: the remover makes
/// the new secrets, the signed statement and a sealed bundle for each device that stays (``prepare(_:)``); every
/// other device checks a rotation against the key it knew and opens its bundle (``adopt(_:ktHandle:previousKey:sealing:device:)``).
/// What the log must also agree with is checked by the caller, which holds the proofs.
public enum AccountRotator {
    /// What a rotation hands the devices that stay.
    public struct Secrets: Sendable, Equatable {
        /// The new account signing seed: it derives the account key and the sibling channel key.
        public let accountSeed: Data
        /// The new discovery seed: the discovery X-Wing key and the discovery inbox's subscribe key.
        public let discoverySeed: Data
        /// The BackupKey for archives made from now on.
        public let backupKey: Data
    }

    /// A device that stays: where its bundle is sealed to.
    public struct Staying: Sendable {
        public let deviceID: String
        public let pubkey: Data
        public let sealingKey: XWing.PublicKey

        public init(deviceID: String, pubkey: Data, sealingKey: XWing.PublicKey) {
            self.deviceID = deviceID
            self.pubkey = pubkey
            self.sealingKey = sealingKey
        }
    }

    /// What the remover needs to make a rotation.
    public struct Request: Sendable {
        public let ktHandle: String
        /// The account's epoch now; the rotation makes `epoch + 1`.
        public let epoch: UInt64
        public let accountSeed: Data
        /// The remover's roster key (it signs the statement too), and the removed device's roster pubkey.
        public let remover: HybridSignature.PrivateKey
        public let removed: Data
        /// Every device that stays, the remover included.
        public let staying: [Staying]
        public let time: Date

        public init(
            ktHandle: String, epoch: UInt64, accountSeed: Data, remover: HybridSignature.PrivateKey, removed: Data,
            staying: [Staying],
            time: Date
        ) {
            self.ktHandle = ktHandle
            self.epoch = epoch
            self.accountSeed = accountSeed
            self.remover = remover
            self.removed = removed
            self.staying = staying
            self.time = time
        }
    }

    /// A rotation ready to send, and what the remover keeps from it.
    public struct Prepared: Sendable {
        public let rotation: IdentityAPI.RemoveDeviceRequest.Rotation
        public let statement: AccountRotation
        public let secrets: Secrets
    }

    /// Makes a rotation with fresh secrets from `random`.
    static func prepare(_ request: Request, random: any SecureRandomSource) throws -> Prepared {
        let secrets = Secrets(
            accountSeed: random.bytes(count: HybridSignature.seedByteCount),
            discoverySeed: random.bytes(count: 32), backupKey: random.bytes(count: 32))
        let oldKey = try HybridSignature.PrivateKey(seedRepresentation: request.accountSeed)
        let newKey = try HybridSignature.PrivateKey(seedRepresentation: secrets.accountSeed)
        let (inbox, discoveryKey) = try discovery(secrets.discoverySeed)
        let epoch = request.epoch + 1
        let statement = try AccountRotation(
            ktHandle: request.ktHandle, epoch: epoch, from: oldKey, to: newKey,
            discoveryValue: KeyTransparencyCommitment.discovery(
                inbox: inbox, discoveryKey: discoveryKey.rawRepresentation, ktHandle: request.ktHandle),
            remover: request.remover, removed: request.removed, time: request.time)
        let bundle = try RotationBundle(
            epoch: epoch, ktHandle: request.ktHandle, accountSeed: secrets.accountSeed,
            discoverySeed: secrets.discoverySeed, backupKey: secrets.backupKey,
            statementHash: Data(SHA256.hash(data: statement.encoded)))
        let bundles = try request.staying.map { device in
            IdentityAPI.RemoveDeviceRequest.SealedBundle(
                deviceID: device.deviceID,
                bundle: Base64URLBytes(try bundle.seal(to: device.sealingKey, device: device.pubkey)))
        }
        return Prepared(
            rotation: IdentityAPI.RemoveDeviceRequest.Rotation(
                accountSigningPubkey: Base64URLBytes(newKey.publicKey.rawRepresentation),
                discoveryInbox: Base64URLBytes(inbox.rawRepresentation),
                discoveryXWingPubkey: Base64URLBytes(discoveryKey.rawRepresentation),
                statement: Base64URLBytes(statement.encoded), bundles: bundles),
            statement: statement, secrets: secrets)
    }

    /// The discovery inbox and X-Wing key a discovery seed derives (as account creation makes them).
    static func discovery(_ seed: Data) throws -> (RelaySubject, XWing.PublicKey) {
        (try RelaySubjectKey(discoverySeed: seed).subject, try XWing.PrivateKey(seedRepresentation: seed).publicKey)
    }

    /// Checks `rotation` (one step, from `previousKey`, the account key this device holds) and opens its bundle:
    /// the statement is signed by the previous key, the new one and the remover's device key, the bundle opens under
    /// this device's sealing key, and its seeds derive the statement's new key and discovery entry. Anything else is
    /// refused. Who the removers were is ``checkRemovers(_:listed:)``'s question, asked of the whole chain.
    public static func adopt(
        _ rotation: IdentityAPI.RotationsResponse.Rotation, ktHandle: String, previousKey: HybridSignature.PublicKey,
        sealing: XWing.PrivateKey, device: Data
    ) throws(RotationError) -> (AccountRotation, Secrets) {
        let statement: AccountRotation
        do {
            statement = try AccountRotation(decoding: rotation.statement.data)
            try statement.verify(previousKey: previousKey)
        } catch {
            throw .forged(rotation.epoch, error.reason)
        }
        guard statement.ktHandle == ktHandle, statement.epoch == rotation.epoch else {
            throw .forged(rotation.epoch, "the statement is for another account or epoch")
        }
        guard let sealed = rotation.bundle else { throw .withheld(rotation.epoch) }
        let bundle: RotationBundle
        do {
            bundle = try RotationBundle.open(sealed.data, with: sealing, device: device)
        } catch {
            throw .forged(rotation.epoch, error.reason)
        }
        guard bundle.epoch == statement.epoch, bundle.ktHandle == ktHandle,
            bundle.statementHash == Data(SHA256.hash(data: rotation.statement.data))
        else { throw .forged(rotation.epoch, "the bundle was made for another rotation") }
        do {
            let newKey = try HybridSignature.PrivateKey(seedRepresentation: bundle.accountSeed).publicKey
            let (inbox, discoveryKey) = try discovery(bundle.discoverySeed)
            let discoveryValue = KeyTransparencyCommitment.discovery(
                inbox: inbox, discoveryKey: discoveryKey.rawRepresentation, ktHandle: ktHandle)
            guard newKey == statement.newKey,
                Data(SHA256.hash(data: discoveryValue)) == statement.discoveryValueHash
            else { throw RotationError.forged(rotation.epoch, "the bundle's seeds do not make the statement's keys") }
        } catch let error as RotationError {
            throw error
        } catch {
            throw .forged(rotation.epoch, "the bundle's seeds are not keys")
        }
        return (
            statement,
            Secrets(accountSeed: bundle.accountSeed, discoverySeed: bundle.discoverySeed, backupKey: bundle.backupKey)
        )
    }
}

extension AccountRotator {
    /// Checks who made each step of `chain` (the rotations a device takes, oldest first) against `listed`, SHA-256
    /// of each roster pubkey of the account's logged roster now: every remover is accounted for, listed now or
    /// removed by a later step, and none was removed by an earlier one. A device that held an old account key (the
    /// removed one) can sign a statement with it and seal bundles to everyone, but not with a listed device's key;
    /// signed with its own, the chain shows it removing, in public, and after its own removal it is refused here.
    public static func checkRemovers(_ chain: [AccountRotation], listed: Set<Data>) throws(RotationError) {
        for (index, step) in chain.enumerated() {
            if chain[..<index].contains(where: { $0.removedKeyHash == step.removerKeyHash }) {
                throw .forged(step.epoch, "it was made by a device that an earlier rotation removed")
            }
            let removedLater = chain[(index + 1)...].contains { $0.removedKeyHash == step.removerKeyHash }
            guard listed.contains(step.removerKeyHash) || removedLater else {
                throw .forged(
                    step.epoch,
                    "it was made by a device that is not on the account's logged list of devices, and no later "
                        + "rotation removed it")
            }
        }
    }
}

/// Why a device could not take an account's rotation.
public enum RotationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The log shows a rotation the server holds no bundle of for this device.
    case withheld(UInt64)
    /// A rotation that does not check out: the reason says what.
    case forged(UInt64, String)
    /// The log and the server's rotations disagree.
    case logDisagrees(String)

    public var description: String {
        switch self {
        case .withheld(let epoch):
            "the server holds no rotation bundle for this device for epoch \(epoch), which the log shows: it is "
                + "withholding this device's new keys, or the device that made the rotation left this one out; "
                + "this device cannot talk to its siblings until it has them. Report the server, or sign this device "
                + "in again from a sibling"
        case .forged(let epoch, let reason):
            "the account's rotation to epoch \(epoch) was refused: \(reason); nothing was changed. Report the server"
        case .logDisagrees(let reason):
            "the server's account rotations do not match the transparency log (\(reason)); nothing was changed. "
                + "Report the server"
        }
    }
}
