import Foundation
import SiblingsCrypto

/// Takeover with the recovery kit, for when home is lost, stolen or broken (the guide: "a device with
/// your recovery key (the paper kit, or the passphrase copy) takes over. On the takeover screen you keep
/// checked the devices you still have; the recovery key and the new home sign the new list together. A
/// takeover wins over any change from the old home that it did not see"; docs/sempere-format.md,
/// "Takeover").
public enum VaultTakeover {
    /// Takes `vault` over: `newHome` (this device; listed already, or new, then named `newHomeName`)
    /// becomes home, the devices in `keep` stay listed, every other listed device is removed, and a new
    /// epoch starts whose key only the kept devices and the kit get. The kit and the new home both sign
    /// the takeover record; the body's takeover generation grows by one, so it beats every list the old
    /// home signs from now on, whatever its generation.
    ///
    /// - Parameters:
    ///   - vault: the newest vault.json this device accepted (or, for a device with nothing but the kit,
    ///     one accepted with ``SignedVault/accept(kitSigningKey:)``).
    ///   - existingNotes: the note files that exist now (the record of the epoch that ends).
    ///   - currentIdentity: the current epoch's identity when this device holds it (a listed device), else
    ///     it is unwrapped with the kit.
    ///   - trustedKits: the kits this device may take over with (its pin's, and one home replaced without
    ///     its co-signature while the grace lasts); nil: only the vault's current kit.
    public static func takeOver(
        _ vault: SignedVault, kit: RecoveryKit, newHome: DeviceKeys, newHomeName: String?, keep: Set<String>,
        existingNotes: [VaultBody.NoteReference], currentIdentity: WrapIdentity? = nil, trustedKits: [Data]? = nil
    ) throws -> VaultHome.EpochChange {
        var body = vault.body
        let kitSigning = try kit.signingKey()
        let kitKey = kitSigning.publicKey.rawRepresentation
        guard kit.vaultID == body.vaultID, (trustedKits ?? [body.recovery.signingKey]).contains(kitKey) else {
            throw SempereError(
                .wrongVault,
                "this recovery kit is not the one of vault \(body.vaultID) (or the vault's kit was replaced, and the "
                    + "time in which the old one could still take over has passed): check that it is the kit "
                    + "printed for this vault")
        }
        let old: WrapIdentity
        if let currentIdentity {
            old = currentIdentity
        } else {
            guard let recoveryWrap = body.currentEpoch.wraps["recovery"] else {
                throw SempereError(.malformedVault, "the current epoch has no wrap for the recovery kit")
            }
            old = try VaultKeys.unwrap(
                recoveryWrap, with: try kit.wrapIdentity(postQuantum: body.postQuantum).ageIdentity)
        }
        // The kit that takes over is the vault's kit from now on: a replacement waiting for its delay is
        // cancelled, and one that home made without this kit's co-signature is undone.
        body.kitReplacement = nil
        if body.recovery.signingKey != kitKey {
            body.recovery = try VaultHome.recovery(of: kit, postQuantum: body.postQuantum)
        }
        for id in keep where body.device(id) == nil {
            throw SempereError(
                .notFound, "device \(id) is not listed in this vault, so it cannot be kept (see `sempere devices list`)"
            )
        }
        guard !body.removed.contains(where: { $0.device.id == newHome.id }) else {
            throw SempereError(
                .removed,
                "this device was removed from the vault; a takeover needs a device that is listed or new: use "
                    + "another configuration directory (--config), which makes new keys")
        }
        guard newHome.identity.isPostQuantum == body.postQuantum else {
            throw SempereError(
                .invalidSecret,
                body.postQuantum
                    ? "this vault is post-quantum but this device's keys are classical: take over from another "
                        + "configuration directory (--config)"
                    : "this vault is classical but this device's keys are post-quantum: take over from another "
                        + "configuration directory (--config)")
        }
        body.generation += 1
        body.takeoverGeneration += 1
        body.homeGeneration += 1
        if body.device(newHome.id) == nil {
            guard let newHomeName else {
                throw SempereError(.invalidName, "this device is not in the vault yet: give it a name (--name)")
            }
            try VaultHome.checkDeviceName(newHomeName)
            try VaultHome.checkNameIsFree(
                newHomeName, in: body.devices.filter { keep.contains($0.id) }, except: nil)
            body.devices.append(
                VaultBody.Device(
                    id: newHome.id, name: newHomeName, signingKey: newHome.publicKey.rawRepresentation,
                    wrapRecipient: newHome.identity.recipientString, addedIn: body.generation))
        }
        let kept = keep.union([newHome.id])
        for device in body.devices where !kept.contains(device.id) {
            body.removed.append(VaultBody.Removal(device: device, removedIn: body.generation))
        }
        body.devices.removeAll { !kept.contains($0.id) }
        var record = VaultBody.Takeover(
            takeoverGeneration: body.takeoverGeneration, generation: body.generation, home: newHome.id,
            homeSigningKey: newHome.publicKey.rawRepresentation, kept: kept.sorted(),
            kitSigningKey: kitSigning.publicKey.rawRepresentation)
        let bytes = record.signedBytes(vaultID: body.vaultID)
        record.kitSignature = try kitSigning.signature(for: bytes, context: VaultBody.Takeover.context)
            .rawRepresentation
        record.homeSignature = try newHome.signingKey.signature(for: bytes, context: VaultBody.Takeover.context)
            .rawRepresentation
        body.takeovers.append(record)
        body.home = newHome.id
        let list = try VaultHome.endEpoch(&body, reason: "takeover", existingNotes: existingNotes, old: old)
        return VaultHome.EpochChange(
            vault: try SignedVault.sign(body, signer: newHome.id, key: newHome.signingKey), fileList: list)
    }
}
