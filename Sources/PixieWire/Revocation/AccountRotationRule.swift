import Foundation
import SiblingsCrypto
import Transparency

/// What `pixie-server audit` checks of account keys beside the log's structure (docs/pixie-protocol.md, "Revoking a
/// device"): version 1 of `account/<kt_handle>` is the key the account was created with; every later version `e`
/// comes in the same checkpoint as version `e − 1` of `account-rotation/<kt_handle>`, a statement for this account
/// and epoch that names the previous version's key and this one and is signed by both; and no rotation is logged
/// without its key. So a server cannot move an account to a key of its own without the old key's signature, and a
/// contact that follows the log can follow a rotation with the key it knew.
///
/// It keeps SHA-256 of each account's current key, 32 bytes per account.
public struct AccountRotationRule: AuditRule {
    private var current: [String: Data] = [:]

    public init() {}

    public mutating func check(_ entries: [Entry]) throws(TransparencyError) {
        var keys: [String: [(version: UInt64, value: Data)]] = [:]
        var rotations: [String: [UInt64: Data]] = [:]
        for entry in entries {
            let label = entry.label.rawValue
            if label.hasPrefix("account/") {
                keys[String(label.dropFirst(8)), default: []].append((entry.version, entry.value))
            } else if label.hasPrefix("account-rotation/") {
                rotations[String(label.dropFirst(17)), default: [:]][entry.version] = entry.value
            }
        }
        for (handle, versions) in rotations.sorted(by: { $0.key < $1.key }) {
            for version in versions.keys.sorted() where !(keys[handle]?.contains { $0.version == version + 1 } ?? false)
            {
                throw TransparencyError(
                    .badValue,
                    "version \(version) of account-rotation/\(handle) was logged without version \(version + 1) of "
                        + "account/\(handle), the key it rotates to, in the same checkpoint")
            }
        }
        for (handle, versions) in keys.sorted(by: { $0.key < $1.key }) {
            for (version, value) in versions.sorted(by: { $0.version < $1.version }) {
                let label = "version \(version) of account/\(handle)"
                guard let key = try? HybridSignature.PublicKey(rawRepresentation: value) else {
                    throw TransparencyError(
                        .badValue, "\(label) is not a \(HybridSignature.publicKeyByteCount)-byte key")
                }
                defer { current[handle] = Data(SHA256.hash(data: value)) }
                guard version > 1 else { continue }
                guard let statement = rotations[handle]?[version - 1] else {
                    throw TransparencyError(
                        .badValue,
                        "\(label) changed the account's key without a rotation statement (version \(version - 1) of "
                            + "account-rotation/\(handle)) in the same checkpoint")
                }
                let rotation: AccountRotation
                do {
                    rotation = try AccountRotation(decoding: statement)
                } catch {
                    throw TransparencyError(.badValue, "the rotation to \(label) is not a statement: \(error)")
                }
                guard rotation.ktHandle == handle, rotation.epoch == version, rotation.newKey == key else {
                    throw TransparencyError(
                        .badValue, "the rotation logged beside \(label) names another account, epoch or key")
                }
                guard let previous = current[handle],
                    safeCompare(previous, Data(SHA256.hash(data: rotation.oldKey.rawRepresentation)))
                else {
                    throw TransparencyError(
                        .badValue, "the rotation to \(label) does not start from the account's previous key")
                }
                do {
                    try rotation.verify(previousKey: rotation.oldKey)
                } catch {
                    throw TransparencyError(.badValue, "the rotation to \(label) is not validly signed: \(error)")
                }
            }
        }
    }
}
