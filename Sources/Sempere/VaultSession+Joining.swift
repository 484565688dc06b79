import Age
import Foundation
import SiblingsCrypto

/// Making a vault, and joining one (docs/sempere-format.md, "Joining (six words, or a code, each way)").
extension VaultSession {
    // MARK: - Creating and joining

    /// Creates a vault in `folder` with this device as its home, and returns the session and the
    /// recovery kit to show once; call ``kitShown()`` once it has been shown. A create that stopped after
    /// writing vault.json is finished by running it again. With `passphrase`, the passphrase copy of the recovery key is kept in
    /// the vault as recovery.age (``RecoveryKit/checkPassphrase(_:)`` sets the floor).
    ///
    /// Refuses a folder that holds a vault, or notes or requests of one whose vault.json is gone: a new
    /// vault there would set every one of them aside.
    public static func create(
        folder url: URL, homeName: String, postQuantum: Bool, passphrase: String?, configRoot: URL, now: Date? = nil
    ) throws -> (session: VaultSession, kit: RecoveryKit) {
        try VaultHome.checkDeviceName(homeName)
        if let passphrase { try RecoveryKit.checkPassphrase(passphrase) }
        let folder = VaultFolder(url: url)
        if let resumed = try resumeCreate(folder: folder, passphrase: passphrase, configRoot: configRoot, now: now) {
            return resumed
        }
        if FileManager.default.fileExists(atPath: url.appendingPathComponent(VaultFolder.vaultFile).path) {
            throw SempereError(
                .alreadyExists,
                "\(url.path) already holds a vault: join it with `sempere join \(url.path) --name \(homeName)` instead")
        }
        let notes = try folder.notePaths().count
        if notes > 0 {
            throw SempereError(
                .alreadyExists,
                "\(url.path) has no vault.json but holds \(notes) note(s) of a vault: its vault.json was deleted. A "
                    + "new vault here would set all of them aside, so none was made. Run any sempere command on that "
                    + "vault's home device, which puts vault.json back; to start a separate vault, choose an empty "
                    + "folder")
        }
        // Anything else (a recovery.age, join requests, copies of a vault.json) could be another vault's too,
        // and create would write over some of it.
        // The empty layout folders a create that stopped early left are not in the way.
        let other = try folder.names(in: "").filter { name in
            !(["notes", "requests"].contains(name) && folder.isFolder(name)
                && (try? folder.names(in: name).isEmpty) == true)
        }
        if !other.isEmpty {
            throw SempereError(
                .alreadyExists,
                "\(url.path) is not empty (it holds \(other.sorted().prefix(3).joined(separator: ", "))"
                    + "\(other.count > 3 ? ", …" : "")): a vault is made in an empty or new folder, so that nothing "
                    + "there is overwritten or set aside")
        }
        let existing = try keysBeforeJoining(configRoot: configRoot)
        if postQuantum, let existing, !existing.identity.isPostQuantum {
            throw SempereError(
                .invalidSecret,
                "this device's keys are classical (X25519), made once for another vault; a post-quantum vault "
                    + "needs a device with post-quantum keys: use another configuration directory (--config) for it")
        }
        try folder.create()
        let keys = try existing ?? keysMadeIfNeeded(configRoot: configRoot, postQuantum: postQuantum)
        let created = try VaultHome.createVault(homeName: homeName, credentials: keys, postQuantum: postQuantum)
        // Kept until shown, so that a create stopped after vault.json is written still gives its kit.
        try UnshownKit.save(created.kit, root: configRoot, identity: keys.identity)
        try folder.write(created.vault)
        return try finishCreate(
            vault: created.vault, pin: created.pin, kit: created.kit, folder: folder, passphrase: passphrase,
            configRoot: configRoot, now: now)
    }

    /// A `create` of this device that stopped after writing vault.json (its kit is still kept unshown):
    /// finished, instead of refused as a folder that holds a vault. Nil when the folder holds no such vault.
    private static func resumeCreate(
        folder: VaultFolder, passphrase: String?, configRoot: URL, now: Date?
    ) throws -> (session: VaultSession, kit: RecoveryKit)? {
        guard FileManager.default.fileExists(atPath: folder.url.appendingPathComponent(VaultFolder.vaultFile).path),
            let vault = try? folder.unverifiedVault(), vault.body.generation == 1,
            let keys = try? loadKeys(configRoot: configRoot), vault.body.home == keys.id,
            let kit = try UnshownKit.load(root: configRoot, vaultID: vault.body.vaultID, identity: keys.identity)
        else { return nil }
        // The first list is checked as a device with only the kit checks it: the kit signed its home.
        let pin = try vault.accept(kitSigningKey: try kit.signingKey().publicKey)
        return try finishCreate(
            vault: vault, pin: pin, kit: kit, folder: folder, passphrase: passphrase, configRoot: configRoot,
            now: now)
    }

    private static func finishCreate(
        vault: SignedVault, pin: VaultPin, kit: RecoveryKit, folder: VaultFolder, passphrase: String?,
        configRoot: URL, now: Date?
    ) throws -> (session: VaultSession, kit: RecoveryKit) {
        if let passphrase {
            try folder.writeRecoveryCopy(
                try kit.passphraseCopy(passphrase: passphrase, postQuantum: vault.body.postQuantum))
        }
        // The pin as opening the vault makes it (so the session below writes nothing again).
        let state = DeviceState(folder: folder.url.path, pin: try vault.accept(pinned: pin, now: now ?? Date()))
        try saveCopy(of: vault, state: state, root: configRoot)
        try state.save(root: configRoot)
        return (try VaultSession(configRoot: configRoot, folder: folder.url.path, now: now), kit)
    }

    /// Step 1 of joining, on the new device: writes a join request into `folder` and returns it (show its
    /// ``JoinRequest/words`` and ``JoinRequest/code``). The device's keys are made first if it has none,
    /// of the type the folder's vault.json shows; home refuses a key of another type. This device's
    /// earlier requests in the folder are removed: only the newest one's words are shown.
    public static func askToJoin(
        folder url: URL, name: String, configRoot: URL, now: Date = Date()
    ) throws -> JoinRequest {
        try VaultHome.checkDeviceName(name)
        let folder = VaultFolder(url: url)
        guard folder.isFolder("") else {
            throw SempereError(
                .notFound, "\(url.path) does not exist: give the vault's folder as this device syncs it")
        }
        let unverified = try folder.unverifiedVault()
        _ = try keepAsideIfRemoved(folder: url, configRoot: configRoot, now: now)
        let keys = try keysMadeIfNeeded(configRoot: configRoot, postQuantum: unverified.body.postQuantum)
        if unverified.body.postQuantum && !keys.identity.isPostQuantum {
            throw SempereError(
                .invalidSecret,
                "this vault is post-quantum but this device's keys are classical: join from another configuration "
                    + "directory (--config)")
        }
        for old in try folder.requests() where old.body.signingKey == keys.publicKey.rawRepresentation {
            try folder.removeRequest(old)
        }
        let request = try JoinRequest(name: name, credentials: keys, now: now)
        try folder.write(request)
        return request
    }

    /// Before this device asks to join the vault in `folder`: when it is in that vault already and was removed from
    /// it, keeps its old state and key aside (``setAsideRemovedDevice(state:configRoot:now:)``) and returns where,
    /// so that it asks with a fresh key; nil when it is not in the vault. A device still listed is refused.
    public static func keepAsideIfRemoved(folder url: URL, configRoot: URL, now: Date = Date()) throws -> URL? {
        guard let state = try? DeviceState.find(root: configRoot, folder: url.path),
            let unverified = try? VaultFolder(url: url).unverifiedVault(), state.vaultID == unverified.body.vaultID
        else { return nil }
        let keys = try deviceKeys(configRoot: configRoot)
        // Decided on the list this device can verify from its pin, never on an unchecked vault.json: a forged one
        // must not get this device's keys moved aside.
        let body = try VaultFolder(url: url).vault(pinned: state.pin, now: now).vault.body
        guard body.removed.contains(where: { $0.device.id == keys.id }), body.device(keys.id) == nil else {
            throw SempereError(.alreadyExists, "this device is already in the vault in \(url.path)")
        }
        return try state.locked(root: configRoot) {
            try setAsideRemovedDevice(state: state, configRoot: configRoot, now: now)
        }
    }

    /// Moves a removed device's state of the vault, and its keys, out of the way (`<root>/removed/<vault_id>-<time>`,
    /// itself a configuration directory: `sempere export --unsynced <folder> --config <it>` still saves what the
    /// device had not synced), so that joining again starts with a fresh device key, as a new device (home
    /// approves it anew). The keys are one per device: when another vault still uses them, nothing is moved, and
    /// the error says to join from a configuration directory of its own. Each move is a rename; when one fails,
    /// those made are moved back, so that the device is left as it was.
    static func setAsideRemovedDevice(state: DeviceState, configRoot: URL, now: Date) throws -> URL {
        let others = try DeviceState.all(root: configRoot).filter { $0.vaultID != state.vaultID }
        guard others.isEmpty else {
            throw SempereError(
                .alreadyExists,
                "this device was removed from the vault in \(state.folder), and its keys are also this device's in "
                    + "\(others.map(\.folder).joined(separator: ", ")), so they cannot be replaced here: join again "
                    + "from a configuration directory of its own (`sempere join \(state.folder) --name <device> "
                    + "--config <new folder>`)")
        }
        let aside = configRoot.appendingPathComponent("removed")
            .appendingPathComponent("\(state.vaultID)-\(Int64(now.timeIntervalSince1970))")
        let vaults = aside.appendingPathComponent("vaults")
        let manager = FileManager.default
        var moved: [(from: URL, to: URL)] = []
        do {
            try manager.createDirectory(
                at: vaults, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            // The keys first, then the state: the lock file stays (this command holds it).
            var moves = [(DeviceState.keyStoreDirectory(root: configRoot), DeviceState.keyStoreDirectory(root: aside))]
            let directory = DeviceState.file(root: configRoot, vaultID: state.vaultID).deletingLastPathComponent()
            let lock = state.lockFile(root: configRoot).lastPathComponent
            for name in try manager.contentsOfDirectory(atPath: directory.path).sorted()
            where name.hasPrefix("\(state.vaultID).") && name != lock {
                moves.append((directory.appendingPathComponent(name), vaults.appendingPathComponent(name)))
            }
            for (from, to) in moves {
                try manager.moveItem(at: from, to: to)
                moved.append((from, to))
            }
            // The keys this process opened are the old ones: a fresh key is made next.
            KeyUnlocking.shared.forget(DeviceState.keyStoreDirectory(root: configRoot).path)
        } catch {
            var restored = true
            for (from, to) in moved.reversed() where (try? manager.moveItem(at: to, to: from)) == nil {
                restored = false
            }
            throw SempereError(
                .io,
                "cannot keep this removed device's old state aside in \(aside.path): \(plainDescription(of: error)); "
                    + (restored
                        ? "nothing was changed"
                        : "some of it is there and the rest is still in \(configRoot.path): move the rest there "
                            + "by hand before joining again"))
        }
        return aside
    }

    /// Step 3 of joining, on the new device: checks home's words or code against the vault.json in
    /// `folder` and this device's own unexpired request, pins that vault, removes the request, and opens
    /// the session.
    public static func finishJoin(
        folder url: URL, check: JoinCheck, configRoot: URL, now: Date? = nil
    ) throws -> VaultSession {
        let keys = try deviceKeys(configRoot: configRoot)
        let folder = VaultFolder(url: url)
        let vault = try folder.unverifiedVault()
        let mine = try folder.requests().filter { $0.body.signingKey == keys.publicKey.rawRepresentation }
            .sorted { $0.body.createdAt > $1.body.createdAt }
        guard !mine.isEmpty else {
            throw SempereError(
                .notFound,
                "this device has no join request in \(url.path): run `sempere join \(url.path) --name <device>` first")
        }
        var lastError: SempereError?
        for request in mine {
            do {
                let pin = try JoinApproval.accept(
                    check, vault: vault, request: request, credentials: keys, now: now ?? Date())
                let state = DeviceState(folder: url.path, pin: pin)
                try saveCopy(of: vault, state: state, root: configRoot)
                try state.save(root: configRoot)
                for done in mine { try? folder.removeRequest(done) }
                return try VaultSession(configRoot: configRoot, folder: url.path, now: now)
            } catch let error as SempereError {
                // The words name one request; a typo in them is the same for every request.
                if [.unknownWord, .ambiguousWord, .wrongWordCount, .invalidEncoding].contains(error.code) {
                    throw error
                }
                // The newest request's reason is the one to show, unless an older one is only not listed yet.
                if lastError == nil || error.code == .notFound { lastError = error }
            }
        }
        throw lastError!
    }
}
