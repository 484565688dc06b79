import Age
import Foundation
import SiblingsCrypto

/// What home does to the device list, the recovery kit, and taking the vault over with the kit
/// (docs/sempere-format.md, "Who may sign the list: home, handoffs, takeovers").
extension VaultSession {
    // MARK: - Devices (home)

    /// A device's name, listed or removed, else the start of its id.
    public func name(of id: String) -> String {
        body.device(id)?.name ?? body.removed.first { $0.device.id == id }?.device.name ?? String(id.prefix(8))
    }

    /// The listed device named by `text`: its name (any case), or a unique start of its id.
    public func device(matching text: String) throws -> VaultBody.Device {
        let byName = body.devices.filter { $0.name.caseInsensitiveCompare(text) == .orderedSame }
        if byName.count == 1 { return byName[0] }
        let byID = body.devices.filter { $0.id.hasPrefix(text.lowercased()) }
        if byName.isEmpty, byID.count == 1, !text.isEmpty { return byID[0] }
        if byName.count > 1 || byID.count > 1 {
            throw SempereError(
                .notFound, "\"\(text)\" names more than one device: use more of its id (`sempere devices list`)")
        }
        throw SempereError(.notFound, "no device \"\(text)\" in this vault: see `sempere devices list`")
    }

    func checkHome() throws {
        guard isHome else {
            throw SempereError(
                .notHome,
                "only the home device (\(name(of: body.home))) manages devices: run this there")
        }
    }

    /// Refuses a change that ends the epoch while Re-encrypt Everything is under way: the copies made so far
    /// would be bound to no list, and it would start again with another kit.
    func checkNoReencryptionUnderWay() throws {
        if let epoch = unfinishedReencryption {
            throw SempereError(
                .alreadyExists,
                "Re-encrypt Everything is under way (epoch \(epoch)) and has not finished: run `sempere reencrypt` "
                    + "to finish it, then this")
        }
    }

    /// On home: approves the join request that the new device's words or code name, lists it, and
    /// returns what home shows back.
    public mutating func approve(_ check: JoinCheck) throws -> JoinApproval.Approved {
        try checkHome()
        let requests = try folder.requests()
        let request: JoinRequest
        switch check {
        case .words(let words): request = try JoinRequest.matching(words: words, in: requests)
        case .code(let code): request = try JoinRequest.matching(code: code, in: requests)
        }
        let approved = try JoinApproval.approve(request, vault: vault, home: VaultHome(credentials: keys), now: now)
        if !approved.alreadyListed { try publish(approved.vault) }
        return approved
    }

    /// On home: removes `device` and starts a new epoch, recording the notes that exist now.
    public mutating func remove(device: VaultBody.Device) throws {
        try checkHome()
        try checkNoReencryptionUnderWay()
        let existing = try Self.existingNotes(folder, hashes: noteHashes, notices: &notices)
        try publish(try VaultHome(credentials: keys).remove(deviceID: device.id, from: vault, existingNotes: existing))
    }

    /// On home: Make Home. `device` manages the devices from now on; a new epoch starts. This device stays
    /// listed, as any other device.
    public mutating func makeHome(_ device: VaultBody.Device) throws {
        try checkHome()
        try checkNoReencryptionUnderWay()
        let existing = try Self.existingNotes(folder, hashes: noteHashes, notices: &notices)
        try publish(try VaultHome(credentials: keys).makeHome(deviceID: device.id, in: vault, existingNotes: existing))
    }

    /// The note files that exist now, for the record of an epoch that ends, hashed through this device's
    /// note index (a file unchanged since it was hashed is not read again). A file that cannot be read is
    /// left out and named in `notices` (it stops nothing: if it is a removed device's note, it is set aside
    /// later, never trusted), so a provider cannot stop home removing a device with one broken file.
    static func existingNotes(
        _ folder: VaultFolder, hashes: NoteHashes = NoteHashes(), notices: inout [String]
    ) throws -> [VaultBody.NoteReference] {
        let (references, unreadable) = try hashes.references(folder: folder)
        for path in unreadable {
            notices.append("\(path) cannot be read, so the record of this change does not list it")
        }
        return references
    }

    /// ``existingNotes(_:hashes:notices:)`` of this vault, what it could not read told in ``notices``.
    mutating func existingNotesNow() throws -> [VaultBody.NoteReference] {
        try Self.existingNotes(folder, hashes: noteHashes, notices: &notices)
    }

    /// This device's hashes of the note files, so that unchanged ones are not read again (only a cache:
    /// an empty one when it does not parse).
    var noteHashes: NoteHashes { NoteHashes.load(from: state.noteHashesFile(root: configRoot)) }

    // MARK: - The recovery kit

    /// What every device shows about the kit: a replacement waiting for its delay, or an old kit still in
    /// its grace on this device.
    static func kitNotices(body: VaultBody, pin: VaultPin, home: String) -> [String] {
        var notices: [String] = []
        let homeName = body.device(body.home)?.name ?? String(body.home.prefix(8))
        if let pending = body.kitReplacement {
            let when = ISO8601DateFormatter().string(
                from: Date(timeIntervalSince1970: TimeInterval(pending.effectiveAt)))
            notices.append(
                "THE RECOVERY KIT IS BEING REPLACED by the home device, \(homeName): from \(when) the current kit no "
                    + "longer opens new notes. If you did not ask for this, home is in someone else's hands: take "
                    + "over with your current kit before then (`sempere takeover`), which cancels it")
        }
        if let until = pin.previousRecoveryValidUntil, pin.previousRecoverySigningKey != nil {
            let when = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(until)))
            notices.append(
                "the home device, \(homeName), replaced the recovery kit without the old kit's signature. If you did "
                    + "not ask for this, take over with the old kit from this device before \(when) (`sempere "
                    + "takeover`); after that only the new kit can")
        }
        return notices
    }

    /// On home: replaces the recovery kit and returns the new one to print; call ``kitShown()`` once it has
    /// been shown (until then this device keeps it, see ``unshownKit()``). With `currentKit` (the vault's
    /// kit now, which co-signs), at once: a new epoch the old kit never gets. Without, after the vault's
    /// delay, during which the old kit can still take over.
    public mutating func replaceKit(currentKit: RecoveryKit?) throws -> VaultHome.KitReplaced {
        try checkHome()
        try checkNoReencryptionUnderWay()
        let existing = try Self.existingNotes(folder, hashes: noteHashes, notices: &notices)
        let replaced = try VaultHome(credentials: keys).replaceKit(
            in: vault, currentKit: currentKit, existingNotes: existing, now: now)
        try UnshownKit.save(replaced.kit, root: configRoot, identity: keys.identity)
        if let list = replaced.fileList { try folder.write(list) }
        try publish(replaced.vault)
        return replaced
    }

    // MARK: - Takeover

    /// What every other device shows after a takeover, on its next command: what happened, and what to do
    /// in each case (the guide: "If you did not do it, someone has your recovery kit").
    static func takeoverAlert(home: VaultBody.Device, thisDevice: String, body: VaultBody) -> String {
        if home.id == thisDevice {
            // Only when this device's own takeover stopped after writing vault.json: it is finished now.
            return "this device took the vault over with the recovery kit, and is home now (the takeover had "
                + "stopped before it finished saving; it is finished now)"
        }
        let kept = body.device(thisDevice) != nil
        return "THE VAULT WAS TAKEN OVER with the recovery kit: \(home.name) (\(home.id.prefix(8))) is home now. "
            + (kept
                ? "This device was kept. "
                : "This device was not kept, so it is removed: it reads no new notes. ")
            + "If the takeover was yours, nothing more to do (devices the old home added since must be approved "
            + "again). If you did not do it, someone has your recovery kit: replace the kit, from the device that "
            + "now manages devices (\(home.name)), at once (`sempere kit replace` there); if \(home.name) is not "
            + "yours, take over again with the kit from a device you hold first (`sempere takeover`, which beats "
            + "this one), then replace the kit"
    }

    /// The alerts this device shows on every command until they are acknowledged.
    public var alerts: [DeviceState.Alert] { state.alerts ?? [] }

    /// Acknowledges every alert: they are no longer shown. Returns how many there were.
    @discardableResult
    public mutating func acknowledgeAlerts() throws -> Int {
        let count = alerts.count
        guard count > 0 else { return 0 }
        let (current, root) = (state, configRoot)
        let shown = Set(alerts.map(\.id))
        state = try current.locked(root: root) {
            // Read again under the lock: another command may have moved the pin, or raised an alert this one has
            // not shown, since this one opened the vault. Only the alerts shown here are acknowledged.
            var saved = try DeviceState.load(DeviceState.file(root: root, vaultID: current.vaultID))
            saved.alerts = saved.alerts?.filter { !shown.contains($0.id) }
            if saved.alerts?.isEmpty == true { saved.alerts = nil }
            try saved.save(root: root)
            return saved
        }
        return count
    }

    /// Takes the vault over with the recovery kit, this device (listed) becoming home; the devices named in
    /// `keep` (names or id starts) stay listed with it, every other one is removed.
    public mutating func takeOver(kit: RecoveryKit, keep: [String]) throws {
        let kept = Set(try keep.map { try device(matching: $0).id })
        if !sawRivalTakeover, let last = body.takeovers.last, last.home == keys.id, last.generation == body.generation,
            Set(last.kept) == kept.union([keys.id]),
            last.kitSigningKey == (try kit.signingKey().publicKey.rawRepresentation)
        {
            // The same takeover again, with nothing changed since and no rival takeover in the folder: it is
            // done (the command that made it may have stopped before saying so). A second one would only
            // start another epoch. With a rival, taking over again is the remedy, and it goes ahead.
            notices.append("this device already took the vault over keeping these devices; nothing changed")
            return
        }
        let existing = try Self.existingNotes(folder, hashes: noteHashes, notices: &notices)
        try publish(
            try VaultTakeover.takeOver(
                vault, kit: kit, newHome: keys, newHomeName: nil, keep: kept,
                existingNotes: existing, currentIdentity: try keyring().current,
                trustedKits: SignedVault.trustedKits(state.pin, now: Int64(now.timeIntervalSince1970))))
    }

    /// A device with nothing but the recovery kit takes over the vault in `folder` and becomes its home
    /// under `name` (its keys are made if it has none). vault.json is checked from the kit alone: the chain
    /// of homes from the first one, which the kit signed at creation. `keep` names the listed devices
    /// (names or id starts) that stay.
    public static func takeOver(
        folder url: URL, kit: RecoveryKit, name: String?, keep: [String], configRoot: URL, now: Date? = nil
    ) throws -> VaultSession {
        let folder = VaultFolder(url: url)
        if let state = try? DeviceState.find(root: configRoot, folder: url.path), state.vaultID == kit.vaultID {
            var session = try VaultSession(configRoot: configRoot, folder: url.path, now: now)
            try session.takeOver(kit: kit, keep: keep)
            return session
        }
        let kitKey = try kit.signingKey().publicKey
        var best: (vault: SignedVault, pin: VaultPin)?
        var firstError: SempereError?
        for name in try folder.vaultCandidates() {
            do {
                let vault = try SignedVault(parsing: try folder.read(name))
                let pin = try vault.accept(kitSigningKey: kitKey)
                if best == nil
                    || (pin.takeoverGeneration, pin.generation) > (best!.pin.takeoverGeneration, best!.pin.generation)
                {
                    best = (vault, pin)
                }
            } catch let error as SempereError {
                if firstError == nil { firstError = error }
            }
        }
        guard let (vault, pin) = best else {
            throw firstError ?? SempereError(.notFound, "\(url.path) has no vault.json: is this the vault folder?")
        }
        if let keys = try keysBeforeJoining(configRoot: configRoot), vault.body.home == keys.id {
            // This device's own takeover, stopped after vault.json was written and before it saved its state:
            // finish it rather than take over a second time.
            let state = DeviceState(folder: url.path, pin: pin)
            try saveCopy(of: vault, state: state, root: configRoot)
            try state.save(root: configRoot)
            return try VaultSession(configRoot: configRoot, folder: url.path, now: now)
        }
        // The name is checked before this device's keys are made, so that a refused takeover makes none.
        guard let name else {
            throw SempereError(
                .invalidName, "this device is not in the vault: give it a name to be listed under as home (--name)")
        }
        try VaultHome.checkDeviceName(name)
        let session = try Self.partial(
            vault: vault, pin: pin, folder: url, configRoot: configRoot, postQuantum: vault.body.postQuantum, now: now)
        let kept = Set(
            try keep.map { text in
                try session.device(matching: text).id
            })
        let keys = session.keys
        var ignored: [String] = []
        let change = try VaultTakeover.takeOver(
            vault, kit: kit, newHome: keys, newHomeName: name, keep: kept,
            existingNotes: try Self.existingNotes(folder, notices: &ignored))
        try folder.write(change.fileList)
        try folder.write(change.vault)
        let state = DeviceState(folder: url.path, pin: try change.vault.accept(pinned: pin, now: now ?? Date()))
        try saveCopy(of: change.vault, state: state, root: configRoot)
        try state.save(root: configRoot)
        return try VaultSession(configRoot: configRoot, folder: url.path, now: now)
    }

    /// A session over a vault this device is not in yet, for naming its devices (takeover from the kit).
    private static func partial(
        vault: SignedVault, pin: VaultPin, folder: URL, configRoot: URL, postQuantum: Bool, now: Date?
    ) throws -> VaultSession {
        let keys = try keysMadeIfNeeded(configRoot: configRoot, postQuantum: postQuantum)
        return VaultSession(
            configRoot: configRoot, keys: keys, folder: VaultFolder(url: folder),
            state: DeviceState(folder: folder.path, pin: pin), vault: vault, notices: [], now: now)
    }

    private init(
        configRoot: URL, keys: DeviceKeys, folder: VaultFolder, state: DeviceState, vault: SignedVault,
        notices: [String], now: Date?
    ) {
        fixedNow = now
        self.configRoot = configRoot
        self.keys = keys
        self.folder = folder
        self.state = state
        self.vault = vault
        self.notices = notices
    }

    /// Writes an epoch change: the list of files first, then the vault.json that commits to it, so a
    /// crash between the two leaves the old vault.json and an unused list (written again next time).
    mutating func publish(_ change: VaultHome.EpochChange) throws {
        try folder.write(change.fileList)
        try publish(change.vault)
    }

    /// On home: renames `device`.
    public mutating func rename(device: VaultBody.Device, to name: String) throws {
        try checkHome()
        try VaultHome.checkDeviceName(name)
        try publish(try VaultHome(credentials: keys).rename(deviceID: device.id, to: name, in: vault))
    }

    /// Writes vault.json after a change home made, and follows it.
    mutating func publish(_ updated: SignedVault) throws {
        let (current, root, folder, now) = (state, configRoot, folder, now)
        var saved = current
        // Under the lock: two commands on home at once must not both write vault.json and the state.
        try current.locked(root: root) {
            try folder.write(updated)
            saved.pin = try updated.accept(pinned: current.pin, now: now)
            try Self.saveCopy(of: updated, state: current, root: root)
            try saved.save(root: root)
        }
        state = saved
        vault = updated
    }

    // MARK: - Recovery kit

    /// The kit the last `create` or kit replacement on this device made, when the program stopped before
    /// it was shown (``UnshownKit``): the vault's kit, or the one a pending replacement names. A kit kept
    /// from a replacement whose vault.json was never written is dropped here (it never took effect).
    public func unshownKit() throws -> RecoveryKit? {
        try Self.unshownKit(root: configRoot, body: body, identity: keys.identity)
    }

    static func unshownKit(root: URL, body: VaultBody, identity: any DeviceUnwrapKey) throws -> RecoveryKit? {
        guard let kit = try UnshownKit.load(root: root, vaultID: body.vaultID, identity: identity) else { return nil }
        let key = try kit.signingKey().publicKey.rawRepresentation
        guard key == body.recovery.signingKey || key == body.kitReplacement?.recovery.signingKey else {
            try UnshownKit.remove(root: root, vaultID: body.vaultID)
            return nil
        }
        return kit
    }

    /// Call once the kit from ``create(folder:homeName:postQuantum:passphrase:configRoot:)``,
    /// ``replaceKit(currentKit:)`` or ``unshownKit()`` has been shown to the person: this device then keeps
    /// no copy of it.
    public func kitShown() throws {
        try UnshownKit.remove(root: configRoot, vaultID: body.vaultID)
    }

    /// The recovery kit, from the passphrase copy in the vault (recovery.age).
    public func recoveryKit(passphrase: String) throws -> RecoveryKit {
        guard
            let file = FileManager.default.contents(
                atPath: folder.url.appendingPathComponent(VaultFolder.recoveryFile).path)
        else {
            throw SempereError(
                .notFound,
                "this vault has no passphrase copy of the recovery key (recovery.age): the kit exists only on the "
                    + "paper printed at `sempere create`")
        }
        let kit = try RecoveryKit(passphraseCopy: file, passphrase: passphrase, vaultID: body.vaultID)
        guard try kit.signingKey().publicKey.rawRepresentation == body.recovery.signingKey else {
            throw SempereError(
                .wrongVault,
                "recovery.age holds a kit this vault no longer uses (the kit was replaced since, or the file was "
                    + "swapped): use the kit printed by `sempere kit replace`")
        }
        return kit
    }
}
