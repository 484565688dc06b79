import Foundation
import SiblingsCrypto

/// Replacing the recovery kit (the guide: home "replaces the recovery kit"; docs/sempere-format.md,
/// "Replacing the kit").
///
/// Co-signed by the current kit (as right after a takeover, when home holds it), the replacement is
/// immediate: a new epoch whose key the old kit never gets. Asked by home alone, it waits the vault's delay
/// (72 hours): meanwhile every device shows it, both kits hold a wrap of the current epoch, and the old kit
/// can still take over, which cancels it. A stolen home "acts as the owner until you take over"; the delay
/// is what keeps the owner's paper kit alive through that.
extension VaultHome {
    /// What replacing the kit gives: the new vault.json, the list of files when an epoch ended (an
    /// immediate replacement), the new kit to print, and when a delayed one takes effect.
    public struct KitReplaced: Sendable {
        public let vault: SignedVault
        public let fileList: EpochFileList?
        public let kit: RecoveryKit
        public let effectiveAt: Date?
    }

    /// Replaces the kit: immediately when `currentKit` (this vault's kit) co-signs, else after the delay.
    /// With `reencrypt` (Re-encrypt Everything), the epoch the replacement starts is the one every note is
    /// then re-encrypted under (reason "reencrypt").
    public func replaceKit(
        in vault: SignedVault, currentKit: RecoveryKit?, existingNotes: [VaultBody.NoteReference], now: Date = Date(),
        reencrypt: Bool = false
    ) throws -> KitReplaced {
        try checkHome(vault)
        guard vault.body.kitReplacement == nil else {
            throw SempereError(
                .alreadyExists,
                "a replacement of the kit is already waiting for its delay: it takes effect on its own, or a "
                    + "takeover with the current kit cancels it")
        }
        let newKit = RecoveryKit(vaultID: vault.body.vaultID)
        let recovery = try Self.recovery(of: newKit, postQuantum: vault.body.postQuantum)
        let current = try VaultKeyring(vault: vault.body, credentials: credentials).current
        let anchorGeneration = vault.body.generation + 1
        let anchor = try newKit.signingKey().signature(
            for: VaultBody.KitChange.anchorBytes(
                vaultID: vault.body.vaultID, generation: anchorGeneration, home: credentials.id,
                homeKey: credentials.publicKey.rawRepresentation),
            context: VaultBody.KitChange.anchorContext
        ).rawRepresentation
        if let currentKit {
            let oldSigning = try currentKit.signingKey()
            guard currentKit.vaultID == vault.body.vaultID,
                oldSigning.publicKey.rawRepresentation == vault.body.recovery.signingKey
            else {
                throw SempereError(.wrongVault, "that is not this vault's current recovery kit")
            }
            let cosignature = try oldSigning.signature(
                for: VaultBody.KitChange.signedBytes(vaultID: vault.body.vaultID, newKey: recovery.signingKey),
                context: VaultBody.KitChange.context)
            var list: EpochFileList?
            let updated = try next(vault) { body in
                body.recovery = recovery
                body.kitChanges.append(
                    VaultBody.KitChange(
                        generation: body.generation, kitSigningKey: recovery.signingKey,
                        oldKitSignature: cosignature.rawRepresentation, anchorGeneration: anchorGeneration,
                        anchorHome: credentials.id, anchorHomeSigningKey: credentials.publicKey.rawRepresentation,
                        newKitSignature: anchor))
                list = try Self.endEpoch(
                    &body, reason: reencrypt ? Self.reencryptReason : "kit", existingNotes: existingNotes, old: current)
            }
            return KitReplaced(vault: updated, fileList: list, kit: newKit, effectiveAt: nil)
        }
        let effectiveAt = Int64(now.timeIntervalSince1970.rounded(.down)) + vault.body.kitReplacementDelay
        let updated = try next(vault) { body in
            body.kitReplacement = VaultBody.KitReplacement(
                recovery: recovery, requestedIn: body.generation, effectiveAt: effectiveAt, newKitSignature: anchor,
                reencrypt: reencrypt ? true : nil)
            // Both kits hold the current epoch until the replacement takes effect.
            body.epochs[body.epochs.count - 1].wraps["recovery-next"] = try VaultKeys.wrap(
                current, to: recovery.wrapRecipient)
        }
        return KitReplaced(
            vault: updated, fileList: nil, kit: newKit,
            effectiveAt: Date(timeIntervalSince1970: TimeInterval(effectiveAt)))
    }

    /// Home, once a delayed replacement's time has come: the new kit becomes the vault's, in a new epoch
    /// that only the listed devices and the new kit get. nil while the delay runs (or when none waits).
    public func completeKitReplacement(
        in vault: SignedVault, existingNotes: [VaultBody.NoteReference], now: Date = Date()
    ) throws -> EpochChange? {
        guard let pending = vault.body.kitReplacement, vault.body.home == credentials.id,
            Int64(now.timeIntervalSince1970) >= pending.effectiveAt
        else { return nil }
        let current = try VaultKeyring(vault: vault.body, credentials: credentials).current
        var list: EpochFileList?
        let updated = try next(vault) { body in
            body.recovery = pending.recovery
            body.kitReplacement = nil
            body.kitChanges.append(
                VaultBody.KitChange(
                    generation: body.generation, kitSigningKey: pending.recovery.signingKey, oldKitSignature: Data(),
                    anchorGeneration: pending.requestedIn, anchorHome: credentials.id,
                    anchorHomeSigningKey: credentials.publicKey.rawRepresentation,
                    newKitSignature: pending.newKitSignature))
            list = try Self.endEpoch(
                &body, reason: pending.reencrypt == true ? Self.reencryptReason : "kit", existingNotes: existingNotes,
                old: current)
        }
        return EpochChange(vault: updated, fileList: list!)
    }
}
