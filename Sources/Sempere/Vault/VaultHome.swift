import Foundation
import SiblingsCrypto

/// What only home does (the guide: "Only home changes the device list"): create the vault, approve,
/// remove and rename devices. Each change is a new body with the next generation, signed by home.
public struct VaultHome: Sendable {
    public let credentials: DeviceKeys

    public init(credentials: DeviceKeys) { self.credentials = credentials }

    /// Creates a vault with this device as home, epoch 1, and a recovery kit.
    public static func createVault(
        homeName: String, credentials: DeviceKeys, postQuantum: Bool
    ) throws -> (vault: SignedVault, kit: RecoveryKit, pin: VaultPin) {
        let vaultID = SecureRandom.bytes(count: 16).hexString
        let kit = RecoveryKit(vaultID: vaultID)
        let recoverySigning = try kit.signingKey()
        let home = VaultBody.Device(
            id: credentials.id, name: homeName, signingKey: credentials.signingKey.publicKey.rawRepresentation,
            wrapRecipient: credentials.identity.recipientString, addedIn: 1)
        let recovery = try Self.recovery(of: kit, postQuantum: postQuantum)
        let identity = WrapIdentity.generate(postQuantum: postQuantum)
        let epoch = VaultBody.Epoch(
            number: 1, startedIn: 1, reason: "created", recipient: identity.recipientString,
            wraps: try wraps(of: identity, devices: [home], recovery: recovery))
        var genesis = VaultBody.Genesis(home: home.id, homeSigningKey: home.signingKey, kitSignature: Data())
        genesis.kitSignature = try recoverySigning.signature(
            for: genesis.signedBytes(vaultID: vaultID), context: VaultBody.Genesis.context
        ).rawRepresentation
        let body = VaultBody(
            vaultID: vaultID, generation: 1, home: home.id, homeGeneration: 1, postQuantum: postQuantum,
            devices: [home], removed: [], recovery: recovery, epochs: [epoch], records: [], genesis: genesis)
        let vault = try SignedVault.sign(body, signer: home.id, key: credentials.signingKey)
        let pin = VaultPin(
            vaultID: vaultID, homeSigningKey: home.signingKey, generation: 1, bodySHA256: vault.bodySHA256,
            recoverySigningKey: recovery.signingKey)
        return (vault, kit, pin)
    }

    /// The public half of `kit` as vault.json lists it.
    static func recovery(of kit: RecoveryKit, postQuantum: Bool) throws -> VaultBody.Recovery {
        let signing = try kit.signingKey()
        return VaultBody.Recovery(
            kitID: VaultKeys.identifier(for: signing.publicKey), signingKey: signing.publicKey.rawRepresentation,
            wrapRecipient: try kit.wrapIdentity(postQuantum: postQuantum).recipientString)
    }

    static func wraps(
        of identity: WrapIdentity, devices: [VaultBody.Device], recovery: VaultBody.Recovery
    ) throws -> [String: String] {
        var wraps: [String: String] = ["recovery": try VaultKeys.wrap(identity, to: recovery.wrapRecipient)]
        for device in devices { wraps[device.id] = try VaultKeys.wrap(identity, to: device.wrapRecipient) }
        return wraps
    }

    func checkHome(_ vault: SignedVault) throws {
        guard vault.body.home == credentials.id else {
            throw SempereError(
                .notHome,
                "only the home device (\(vault.body.device(vault.body.home)?.name ?? vault.body.home)) manages devices")
        }
    }

    func next(_ vault: SignedVault, _ change: (inout VaultBody) throws -> Void) throws -> SignedVault {
        try checkHome(vault)
        var body = vault.body
        body.generation += 1
        try change(&body)
        return try SignedVault.sign(body, signer: credentials.id, key: credentials.signingKey)
    }

    /// Adds a device: one more entry and one more wrap of the current epoch's identity. No note is
    /// rewritten and no epoch starts.
    public func approve(
        name: String, signingKey: HybridSignature.PublicKey, wrapRecipient: String, in vault: SignedVault
    ) throws -> SignedVault {
        try checkHome(vault)
        let id = VaultKeys.identifier(for: signingKey)
        try Self.checkDeviceName(name)
        try Self.checkNameIsFree(name, in: vault.body.devices, except: nil)
        guard vault.body.device(id) == nil else {
            throw SempereError(.malformedVault, "device \(name) (\(id)) is already in the vault")
        }
        guard !vault.body.removed.contains(where: { $0.device.id == id }) else {
            throw SempereError(
                .removed, "device \(id) was removed from this vault; a device rejoins with new keys, not its old ones")
        }
        // The join request commits to its key type (the recipient is in the signed body, and the words are
        // derived from it): a post-quantum vault admits only a post-quantum device, whatever flag an altered
        // vault.json showed the new device before it had anything to check it against.
        let postQuantumKey = wrapRecipient.lowercased().hasPrefix("age1pq1")
        guard postQuantumKey == vault.body.postQuantum else {
            throw SempereError(
                .malformedVault,
                vault.body.postQuantum
                    ? "device \(name) asks to join this post-quantum vault with a classical (X25519) key, so it was "
                        + "not added: the vault.json that device saw was altered to say the vault is classical. Let "
                        + "the folder sync there, then ask again from a new --config, whose keys will be post-quantum"
                    : "device \(name) asks to join this classical vault with a post-quantum key, so it was not "
                        + "added: let the folder sync there, then ask again from a new --config")
        }
        let current = try VaultKeyring(vault: vault.body, credentials: credentials).current
        return try next(vault) { body in
            let device = VaultBody.Device(
                id: id, name: name, signingKey: signingKey.rawRepresentation, wrapRecipient: wrapRecipient,
                addedIn: body.generation)
            body.devices.append(device)
            body.epochs[body.epochs.count - 1].wraps[id] = try VaultKeys.wrap(current, to: wrapRecipient)
        }
    }

    /// A device name: shown in lists and typed in commands, so printable, one line, 1 to 64 characters,
    /// at least one of them visible, and without control, format (zero-width, bidirectional override) or
    /// line and paragraph separator characters, which could make one name look like another.
    public static func checkDeviceName(_ name: String) throws {
        let refused: Set<Unicode.GeneralCategory> = [.control, .format, .lineSeparator, .paragraphSeparator]
        guard name.count <= 64,
            !name.unicodeScalars.contains(where: { refused.contains($0.properties.generalCategory) }),
            name.unicodeScalars.contains(where: { !$0.properties.isWhitespace })
        else {
            throw SempereError(
                .invalidName,
                "a device name is 1 to 64 characters on one line, with something visible, and without control, "
                    + "zero-width or text-direction characters")
        }
    }

    /// Device names identify devices in commands (`sempere devices remove iPhone`), so two listed devices
    /// never share one (compared without regard to case).
    static func checkNameIsFree(_ name: String, in devices: [VaultBody.Device], except deviceID: String?) throws {
        if let other = devices.first(where: {
            $0.id != deviceID && $0.name.caseInsensitiveCompare(name) == .orderedSame
        }) {
            throw SempereError(
                .alreadyExists,
                "another device of this vault is named \"\(other.name)\" (\(other.id.prefix(8))): choose another "
                    + "name, or rename that device first")
        }
    }

    /// Renames a device.
    public func rename(deviceID: String, to name: String, in vault: SignedVault) throws -> SignedVault {
        try checkHome(vault)
        guard vault.body.device(deviceID) != nil else {
            throw SempereError(.notFound, "no device \(deviceID) in this vault: see `sempere devices list`")
        }
        try Self.checkDeviceName(name)
        try Self.checkNameIsFree(name, in: vault.body.devices, except: deviceID)
        return try next(vault) { body in
            if let index = body.devices.firstIndex(where: { $0.id == deviceID }) { body.devices[index].name = name }
        }
    }

    /// A change that ends an epoch: the new vault.json, and the list of the note files that existed, which
    /// is written to records/epoch-<n>.json before vault.json (``VaultFolder/write(_:)-(EpochFileList)``).
    public struct EpochChange: Sendable {
        public let vault: SignedVault
        public let fileList: EpochFileList
    }

    /// Ends the current epoch inside `body` (whose generation is already the new one): a fresh vault
    /// identity wrapped to the devices `body` lists and to the kit, and a record that seals the old
    /// identity to it and commits to the list of `existingNotes`.
    static func endEpoch(
        _ body: inout VaultBody, reason: String, existingNotes: [VaultBody.NoteReference], old: WrapIdentity
    ) throws -> EpochFileList {
        let fresh = WrapIdentity.generate(postQuantum: body.postQuantum)
        let list = try EpochFileList(vaultID: body.vaultID, epoch: body.currentEpoch.number, notes: existingNotes)
        body.records.append(
            VaultBody.Record(
                epoch: body.currentEpoch.number, sealedIdentity: try VaultKeys.wrap(old, to: fresh.recipientString),
                notes: nil, notesSHA256: list.sha256, notesCount: list.notes.count))
        body.epochs.append(
            VaultBody.Epoch(
                number: body.currentEpoch.number + 1, startedIn: body.generation, reason: reason,
                recipient: fresh.recipientString,
                wraps: try Self.wraps(of: fresh, devices: body.devices, recovery: body.recovery)))
        return list
    }

    /// Removes a device and starts a new epoch: a new vault identity wrapped to the devices still listed
    /// and to the kit, and a record that keeps the old identity sealed under the new one and commits to
    /// the list of the notes that existed, so old notes stay readable to those devices.
    public func remove(
        deviceID: String, from vault: SignedVault, existingNotes: [VaultBody.NoteReference]
    ) throws -> EpochChange {
        try checkHome(vault)
        guard let device = vault.body.device(deviceID) else {
            throw SempereError(.notFound, "no device \(deviceID) in this vault: see `sempere devices list`")
        }
        guard deviceID != vault.body.home else {
            throw SempereError(
                .notHome,
                "home cannot remove itself: the vault would have no device to manage it. Hand the home role to "
                    + "another device first (`sempere devices make-home <device>`), then remove this one there")
        }
        let old = try VaultKeyring(vault: vault.body, credentials: credentials).current
        var list: EpochFileList?
        let updated = try next(vault) { body in
            body.devices.removeAll { $0.id == deviceID }
            body.removed.append(VaultBody.Removal(device: device, removedIn: body.generation))
            list = try Self.endEpoch(&body, reason: "removed", existingNotes: existingNotes, old: old)
        }
        return EpochChange(vault: updated, fileList: list!)
    }

    /// Make Home: hands the home role to another listed device. A new epoch starts (as with any device
    /// change), the body names the new home, and a handoff record signed by this (the old) home lets
    /// every device follow the new home's lists from now on, even one that never saw this vault.json.
    /// This body itself is signed by the old home, the last one it signs.
    public func makeHome(
        deviceID: String, in vault: SignedVault, existingNotes: [VaultBody.NoteReference]
    ) throws -> EpochChange {
        try checkHome(vault)
        guard let device = vault.body.device(deviceID) else {
            throw SempereError(
                .notFound,
                "no device \(deviceID) in this vault: the home role goes only to a listed device (`sempere devices "
                    + "list`)")
        }
        guard deviceID != credentials.id else {
            throw SempereError(.alreadyExists, "this device is home already")
        }
        guard vault.body.kitReplacement == nil else {
            throw SempereError(
                .alreadyExists,
                "a replacement of the recovery kit is waiting for its delay: hand the home role on once it has "
                    + "taken effect")
        }
        let old = try VaultKeyring(vault: vault.body, credentials: credentials).current
        var list: EpochFileList?
        let updated = try next(vault) { body in
            var handoff = VaultBody.Handoff(
                generation: body.generation, from: credentials.id, to: device.id, toSigningKey: device.signingKey,
                signature: Data())
            handoff.signature = try credentials.signingKey.signature(
                for: handoff.signedBytes(vaultID: body.vaultID), context: VaultBody.Handoff.context
            ).rawRepresentation
            body.handoffs.append(handoff)
            body.home = device.id
            body.homeGeneration += 1
            list = try Self.endEpoch(&body, reason: "handoff", existingNotes: existingNotes, old: old)
        }
        return EpochChange(vault: updated, fileList: list!)
    }
}

/// The vault identities a listed device can reach: the current epoch's from its own wrap, every earlier
/// one through the records' chain.
public struct VaultKeyring: Sendable {
    public let identities: [Int: WrapIdentity]
    public let currentEpoch: Int
    /// Every listed and removed device's signing key, decoded once (decoding expands ML-DSA's matrix),
    /// so opening many notes does not decode a key per note.
    let signingKeys: [String: HybridSignature.PublicKey]
    /// The epochs' file lists, for the notes of devices removed since (``EpochFileList``).
    public let fileLists: EpochFileLists
    /// The lists of the copies home re-encrypted (``ReencryptionList``): a copy opens only when listed.
    public let reencrypted: ReencryptionLists

    /// The keys `credentials` opens in `vault`; `fileLists` are where the records' lists are read (without
    /// them, a removed device's old notes cannot be checked against a compact record and are set aside), and
    /// `reencrypted` where the re-encryption lists are (without them, no re-encrypted copy opens).
    public init(
        vault: VaultBody, credentials: DeviceKeys, fileLists: EpochFileLists = EpochFileLists(),
        reencrypted: ReencryptionLists = ReencryptionLists()
    ) throws {
        self.fileLists = fileLists
        self.reencrypted = reencrypted
        guard vault.device(credentials.id) != nil else {
            if vault.removed.contains(where: { $0.device.id == credentials.id }) {
                throw SempereError(
                    .removed,
                    "this device was removed from the vault: it no longer syncs or reads new notes. Save the notes "
                        + "it wrote that the vault did not record with `sempere export --unsynced <folder>`; to use "
                        + "this device with the vault again, `sempere join <vault> --name <device>` asks home to "
                        + "approve it anew, with a fresh key (its old state is kept aside)")
            }
            throw SempereError(.notFound, "this device is not in the vault: join it first")
        }
        guard let wrap = vault.currentEpoch.wraps[credentials.id] else {
            throw SempereError(
                .malformedVault, "the current epoch has no wrap for this device: ask home to approve it again")
        }
        var identities = [
            vault.currentEpoch.number: try VaultKeys.unwrap(wrap, with: credentials.identity.ageIdentity)
        ]
        for record in vault.records.sorted(by: { $0.epoch > $1.epoch }) {
            guard let newer = identities[record.epoch + 1] else { continue }
            identities[record.epoch] = try VaultKeys.unwrap(record.sealedIdentity, with: newer.ageIdentity)
        }
        self.identities = identities
        self.currentEpoch = vault.currentEpoch.number
        var keys: [String: HybridSignature.PublicKey] = [:]
        for device in vault.devices + vault.removed.map(\.device) {
            keys[device.id] = try? HybridSignature.PublicKey(rawRepresentation: device.signingKey)
        }
        self.signingKeys = keys
    }

    /// The current epoch's vault identity.
    public var current: WrapIdentity { identities[currentEpoch]! }

    /// For a device that was removed: the epoch identities it still holds wraps for (the epochs before its
    /// removal), so it can save the notes it wrote that the vault did not record.
    public static func ofRemovedDevice(vault: VaultBody, credentials: DeviceKeys) throws -> [Int: WrapIdentity] {
        guard vault.removed.contains(where: { $0.device.id == credentials.id }) else {
            throw SempereError(.notFound, "this device was not removed from the vault")
        }
        var identities: [Int: WrapIdentity] = [:]
        for epoch in vault.epochs {
            guard let wrap = epoch.wraps[credentials.id] else { continue }
            identities[epoch.number] = try VaultKeys.unwrap(wrap, with: credentials.identity.ageIdentity)
        }
        return identities
    }
}
