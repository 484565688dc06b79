import Foundation
import SiblingsCrypto

/// The new secrets of an account rotation, sealed to one remaining device (docs/pixie-protocol.md, "Revoking a
/// device", "The rotation bundle"). Never under the old channel key, which the removed device holds: HPKE base mode
/// (RFC 9180) to the device's roster sealing key, the sealed-sender suite, info `"pixie/rotation-bundle/v1"`:
///
///     offset  size  field
///     0       1     version = 1
///     1       1120  enc
///     1121    n+16  ciphertext (aad: version ‖ SHA-256(recipient's device pubkey)) of
///                     u64 epoch ‖ u16 len ‖ kt_handle ‖ account_seed (32) ‖ discovery_seed (32) ‖ backup_key (32)
///                     ‖ SHA-256(statement) (32)
///
/// Opening proves only that the bundle was sealed to this device. A device adopts it only when the log agrees
/// (the account seed derives the logged key at that epoch, the discovery seed the logged discovery value, and the
/// statement is the logged one): the removed device knows the old seeds and could seal a rival bundle.
public struct RotationBundle: Sendable, Equatable {
    public static let version: UInt8 = 1
    static let info = Data("pixie/rotation-bundle/v1".utf8)

    public let epoch: UInt64
    public let ktHandle: String
    public let accountSeed: Data
    public let discoverySeed: Data
    public let backupKey: Data
    /// SHA-256 of the rotation's statement (``AccountRotation/statement``).
    public let statementHash: Data

    public init(
        epoch: UInt64, ktHandle: String, accountSeed: Data, discoverySeed: Data, backupKey: Data, statementHash: Data
    ) throws(PixieWireError) {
        guard epoch >= 2, !ktHandle.isEmpty, ktHandle.utf8.count <= 256, accountSeed.count == 32,
            discoverySeed.count == 32, backupKey.count == 32, statementHash.count == 32
        else {
            throw PixieWireError(
                .malformed,
                "a rotation bundle holds an epoch of 2 or more, a KT handle of 1 to 256 bytes and four 32-byte values")
        }
        self.epoch = epoch
        self.ktHandle = ktHandle
        self.accountSeed = accountSeed
        self.discoverySeed = discoverySeed
        self.backupKey = backupKey
        self.statementHash = statementHash
    }

    /// Seals the bundle to the device whose roster pubkey is `device` and whose sealing key is `sealingKey`.
    public func seal(to sealingKey: XWing.PublicKey, device: Data) throws -> Data {
        var sender = try HPKE.Sender(recipientKey: sealingKey, ciphersuite: DiscoveryBox.ciphersuite, info: Self.info)
        var plaintext = Data()
        plaintext.appendUInt64(epoch)
        plaintext.appendShortField(Data(ktHandle.utf8))
        plaintext += accountSeed + discoverySeed + backupKey + statementHash
        defer { plaintext.resetBytes(in: 0..<plaintext.count) }
        let header = Data([Self.version])
        return header + sender.encapsulatedKey
            + (try sender.seal(plaintext, authenticating: header + SHA256.hash(data: device)))
    }

    /// Opens a bundle sealed to this device (`sealingKey`, and its roster pubkey `device`); throws
    /// ``PixieWireError/Code/malformed`` for one that does not open or does not decode.
    public static func open(
        _ sealed: some DataProtocol, with sealingKey: XWing.PrivateKey, device: Data
    ) throws(PixieWireError) -> RotationBundle {
        let bytes = Data(sealed)
        let encapsulated = XWing.ciphertextByteCount
        guard bytes.count > 1 + encapsulated + 16, bytes[bytes.startIndex] == version else {
            throw PixieWireError(.malformed, "not a version-\(version) rotation bundle")
        }
        var plaintext: Data
        do {
            var recipient = try HPKE.Recipient(
                privateKey: sealingKey, ciphersuite: DiscoveryBox.ciphersuite, info: info,
                encapsulatedKey: bytes.dropFirst(1).prefix(encapsulated))
            plaintext = try recipient.open(
                bytes.dropFirst(1 + encapsulated), authenticating: bytes.prefix(1) + SHA256.hash(data: device))
        } catch {
            throw PixieWireError(.malformed, "the rotation bundle does not open under this device's sealing key")
        }
        defer { plaintext.resetBytes(in: 0..<plaintext.count) }
        var reader = WireReader(plaintext)
        guard let epoch = reader.uint64(), let handle = reader.shortField(),
            let ktHandle = String(data: handle, encoding: .utf8), let accountSeed = reader.bytes(32),
            let discoverySeed = reader.bytes(32), let backupKey = reader.bytes(32),
            let statementHash = reader.bytes(32), reader.isAtEnd
        else { throw PixieWireError(.malformed, "the rotation bundle is truncated or too long") }
        return try RotationBundle(
            epoch: epoch, ktHandle: ktHandle, accountSeed: accountSeed, discoverySeed: discoverySeed,
            backupKey: backupKey, statementHash: statementHash)
    }
}
