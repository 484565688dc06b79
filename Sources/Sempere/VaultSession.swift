import Age
import Foundation
import SiblingsCrypto

/// A device's session with one vault: what an app opens to read and write notes and, on home, to manage
/// the devices (docs/sempere-format.md). The `sempere` command is a thin shell around it.
///
/// Opening checks vault.json against the pin this device keeps (``DeviceState``), so a rolled-back, forked
/// or swapped vault is refused, and saves the newer pin and a copy of the list. Every note is opened and
/// checked through ``VaultNote/open(_:path:vault:keyring:)``: its author is its signer, never its path, and
/// a note whose checks fail is set aside with the reason, never shown and never deleted.
public struct VaultSession: Sendable {
    /// This device's configuration root (``DeviceState/configRoot(override:environment:)``).
    public let configRoot: URL
    public let keys: DeviceKeys
    public let folder: VaultFolder
    public private(set) var state: DeviceState
    public private(set) var vault: SignedVault
    /// What opening found that the person should be told: a copy of vault.json that was refused and why,
    /// or a deleted vault.json that home put back.
    public private(set) var notices: [String]
    /// The time this session acts at: the device's clock, read each time (tests give a fixed time).
    public var now: Date { fixedNow ?? Date() }
    private let fixedNow: Date?
    /// Whether the folder holds a rival takeover of the same generation (two holders of the kit).
    private var sawRivalTakeover = false

    public var body: VaultBody { vault.body }
    /// Whether this device manages the vault's devices.
    public var isHome: Bool { body.home == keys.id }

    // MARK: - Opening

    /// This device's keys for creating, joining or taking over a vault: nil when it has none yet. Keys
    /// whose making stopped half way, on a device in no vault, are dropped so that they are made again.
    static func keysBeforeJoining(configRoot: URL) throws -> DeviceKeys? {
        let store = try keyStore(configRoot: configRoot)
        if try DeviceState.all(root: configRoot).isEmpty { _ = try DeviceKeys.discardInterruptedSave(in: store) }
        return try DeviceKeys.load(from: store)
    }

    /// This device's keys, made first when it has none (``keysBeforeJoining(configRoot:)``).
    static func keysMadeIfNeeded(configRoot: URL, postQuantum: Bool) throws -> DeviceKeys {
        if let keys = try keysBeforeJoining(configRoot: configRoot) { return keys }
        return try DeviceKeys.loadOrCreate(in: try keyStore(configRoot: configRoot), postQuantum: postQuantum)
    }

    /// The key store of the device whose configuration root is `configRoot` (`<root>/keys`).
    public static func keyStore(configRoot: URL) throws -> FileKeyStore {
        try FileKeyStore(directory: DeviceState.keyStoreDirectory(root: configRoot))
    }

    /// This device's keys, which ``create(folder:homeName:postQuantum:passphrase:configRoot:)`` or
    /// ``askToJoin(folder:name:configRoot:now:)`` made.
    public static func deviceKeys(configRoot: URL) throws -> DeviceKeys {
        let store = try keyStore(configRoot: configRoot)
        guard let keys = try DeviceKeys.load(from: store) else {
            throw SempereError(
                .notFound,
                "this device has no keys in \(store.directory.path): run `sempere create` or `sempere join` first")
        }
        return keys
    }

    /// Opens the vault in `folder` (the only vault this device is in when nil), checked against the pin.
    ///
    /// When vault.json is gone from the folder, home puts back the list it signed last (and says so in
    /// ``notices``); any other device refuses with a message that says what happened and what to do.
    public init(configRoot: URL, folder path: String? = nil, now fixed: Date? = nil) throws {
        self.configRoot = configRoot
        fixedNow = fixed
        let now = fixed ?? Date()
        keys = try Self.deviceKeys(configRoot: configRoot)
        var state = try DeviceState.find(root: configRoot, folder: path)
        let folder = VaultFolder(url: URL(fileURLWithPath: state.folder))
        self.folder = folder
        var notices: [String] = []
        guard folder.isFolder("") else {
            throw SempereError(
                .notFound,
                "the vault folder \(state.folder) is missing: is the synced folder there (mounted, or moved)?")
        }
        // vault.json itself gone (whatever copies a provider made of it): home puts back the list it signed.
        let vaultFileMissing = !FileManager.default.fileExists(
            atPath: folder.url.appendingPathComponent(VaultFolder.vaultFile).path)
        if vaultFileMissing,
            let restored = try Self.restoreList(folder: folder, state: state, root: configRoot, keys: keys, over: nil)
        {
            notices.append(restored)
        }
        var opened: (vault: SignedVault, pin: VaultPin, refused: [(String, SempereError)])
        do {
            opened = try folder.vault(pinned: state.pin, now: now)
        } catch let error as SempereError where vaultFileMissing {
            throw Self.deletedListError(folder: folder, state: state, root: configRoot, cause: error)
        } catch let error as SempereError where error.code == .rollback {
            // Every list in the folder is older than the one this device follows (a provider's old version,
            // or one that a home a takeover dropped signed after it): home puts back the list it follows, so
            // such a list cannot stop the vault; any other device waits for that. A rival takeover (a second
            // holder of the kit) is never written over: this device opens from its own list, says so, and
            // can take over again.
            if let followed = Self.followedCopy(state: state, root: configRoot, now: now),
                let other = try? SignedVault(parsing: try folder.read(VaultFolder.vaultFile)),
                other.isRivalTakeover(of: followed.vault.body, pin: state.pin)
            {
                opened = (followed.vault, followed.pin, [(VaultFolder.vaultFile, error)])
            } else if let restored = try Self.restoreList(
                folder: folder, state: state, root: configRoot, keys: keys, over: error)
            {
                notices.append(restored)
                opened = try folder.vault(pinned: state.pin, now: now)
            } else if state.pin.homeSigningKey == keys.publicKey.rawRepresentation {
                throw SempereError(
                    .rollback,
                    "\(error.reason). This device is home, but has no copy of the list it follows to put back: "
                        + "restore vault.json from a backup of the folder, or take over with the recovery kit")
            } else {
                throw SempereError(
                    .rollback,
                    "\(error.reason). Nothing was changed here; the home device puts back the list it signed on its "
                        + "next sempere command on this vault, then run this again")
            }
        }
        var (vault, pin, refused) = opened
        // Lists older than the one followed are the provider's old versions, and say nothing, unless one is a
        // rival takeover (which may be older too): that one is shown for what it is.
        refused = refused.compactMap { name, error in
            if let other = try? SignedVault(parsing: try folder.read(name)),
                other.isRivalTakeover(of: vault.body, pin: state.pin)
            {
                return (name, SignedVault.rivalTakeover(home: other.body.home))
            }
            return error.code != .rollback || name == VaultFolder.vaultFile ? (name, error) : nil
        }
        // vault.json older than the list home follows from a copy beside it (a conflict copy of a takeover, say):
        // home writes that list to vault.json, so that the older one is not what the next device reads first.
        if vault.body.home == keys.id,
            let older = refused.first(where: { $0.0 == VaultFolder.vaultFile && $0.1.code == .rollback })?.1
        {
            try folder.write(vault)
            refused.removeAll { $0.0 == VaultFolder.vaultFile }
            notices.append(Self.putBack(folder: folder, over: older, generation: vault.body.generation))
        }
        for (name, error) in refused { notices.append("\(name) refused: \(error.reason)") }
        sawRivalTakeover = refused.contains { $0.1.code == .fork && vault.body.takeoverGeneration > 0 }
        // Home completes a kit replacement whose delay has passed.
        if vault.body.home == keys.id, let pending = vault.body.kitReplacement,
            Int64(now.timeIntervalSince1970) >= pending.effectiveAt,
            let change = try VaultHome(credentials: keys).completeKitReplacement(
                in: vault, existingNotes: try Self.existingNotes(folder, notices: &notices), now: now)
        {
            try folder.write(change.fileList)
            try folder.write(change.vault)
            pin = try change.vault.accept(pinned: pin, now: now)
            vault = change.vault
            notices.append(
                "the new recovery kit is in effect: new notes use epoch \(vault.body.currentEpoch.number)'s key, "
                    + "which the old kit never gets")
        }
        notices += Self.kitNotices(body: vault.body, pin: pin, home: keys.id)
        if try Self.unshownKit(root: configRoot, body: vault.body, identity: keys.identity) != nil {
            notices.append(
                "the recovery kit that `sempere create` or `sempere kit replace` made on this device was never shown "
                    + "(the command stopped before printing it), and it is in use: run `sempere kit print` now, and "
                    + "print it or write it down")
        }
        if pin.takeoverGeneration > state.pin.takeoverGeneration, let home = vault.body.device(vault.body.home) {
            notices.append(Self.takeoverAlert(home: home, thisDevice: keys.id, body: vault.body))
        } else if pin.homeSigningKey != state.pin.homeSigningKey, let home = vault.body.device(vault.body.home) {
            notices.append(
                home.id == keys.id
                    ? "this device is home now: it manages the vault's devices (the home role was handed to it)"
                    : "\(home.name) (\(home.id.prefix(8))) is home now: it manages the vault's devices")
        }
        // The copy is written before the pin moves, so it is never older than the pin: it needs writing only
        // when the pin moves (or when a device from before sempere 0.2 has none yet).
        if pin != state.pin || !FileManager.default.fileExists(atPath: state.vaultCopyFile(root: configRoot).path) {
            try Self.saveCopy(of: vault, state: state, root: configRoot)
            state.pin = pin
            try state.save(root: configRoot)
        }
        self.state = state
        self.vault = vault
        self.notices = notices
        // Once per change of epoch or re-encryption: this device goes over its own notes (``list()``), so that
        // notes it wrote late under an older key are re-encrypted whatever command it runs first.
        let mark = "\(vault.body.currentEpoch.recipient):\(vault.body.reencryptions.count)"
        if state.notesTidiedAt != mark, vault.body.device(keys.id) != nil {
            let listing = try list(withText: false)
            self.notices += listing.warnings
            if !listing.ownNotesUndecided {
                self.state.notesTidiedAt = mark
                try self.state.save(root: configRoot)
            }
        }
    }

    /// Keeps this device's copy of the list it follows in step with it, written before the pin moves, so
    /// the copy is never older than the pin (home puts vault.json back from it).
    static func saveCopy(of vault: SignedVault, state: DeviceState, root: URL) throws {
        let copy = state.vaultCopyFile(root: root)
        do {
            try FileManager.default.createDirectory(
                at: copy.deletingLastPathComponent(), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw SempereError(
                .io,
                "cannot create \(copy.deletingLastPathComponent().path): "
                    + plainCreateFailure(at: copy.deletingLastPathComponent(), error))
        }
        try AtomicWrite.write(try vault.encoded(), to: copy, mode: 0o600)
    }

    /// This device's copy of the list it follows, when its pin accepts it.
    static func followedCopy(state: DeviceState, root: URL, now: Date) -> (vault: SignedVault, pin: VaultPin)? {
        guard let data = FileManager.default.contents(atPath: state.vaultCopyFile(root: root).path),
            let copy = try? SignedVault(parsing: data), let pin = try? copy.accept(pinned: state.pin, now: now)
        else { return nil }
        return (copy, pin)
    }

    /// vault.json was deleted (`refusal` nil), or every list in the folder is older than the pinned one
    /// (`refusal`, a ``SempereError/Code/rollback``): home writes back the copy of the list it signed last
    /// and returns what to tell; on another device, nil (the copies a provider made may still serve).
    static func restoreList(
        folder: VaultFolder, state: DeviceState, root: URL, keys: DeviceKeys, over refusal: SempereError?
    ) throws
        -> String?
    {
        let copy = FileManager.default.contents(atPath: state.vaultCopyFile(root: root).path).flatMap {
            try? SignedVault(parsing: $0)
        }
        guard let copy, copy.body.home == keys.id else { return nil }
        guard (try? copy.accept(pinned: state.pin)) != nil else {
            if refusal != nil { return nil }
            throw SempereError(
                .notFound,
                "vault.json is missing from \(folder.url.path), and this device's copy of the list (generation "
                    + "\(copy.body.generation)) is older than the one it follows (generation \(state.pin.generation)), "
                    + "so it cannot put it back: restore vault.json from a backup of the folder")
        }
        try folder.write(copy)
        return putBack(folder: folder, over: refusal, generation: copy.body.generation)
    }

    /// What home says when it put its list back in vault.json, over `refusal` (nil: vault.json was missing).
    static func putBack(folder: VaultFolder, over refusal: SempereError?, generation: UInt64) -> String {
        let what =
            refusal.map {
                "vault.json in \(folder.url.path) was a list this device refuses (\($0.reason)): an old version the "
                    + "storage provider put back, or one signed by a home that a takeover replaced"
            } ?? "vault.json was missing from \(folder.url.path) (deleted by the storage provider, or by mistake)"
        return what + ". This device, its home, put back the device list it follows (generation \(generation)); "
            + "nothing else changed"
    }

    /// What a device that is not home says when vault.json is gone and no copy of it serves.
    static func deletedListError(
        folder: VaultFolder, state: DeviceState, root: URL, cause: SempereError
    )
        -> SempereError
    {
        let copy = FileManager.default.contents(atPath: state.vaultCopyFile(root: root).path).flatMap {
            try? SignedVault(parsing: $0)
        }
        let home = copy.flatMap { $0.body.device($0.body.home)?.name }.map { "\($0), the home device," } ?? "home"
        return SempereError(
            .notFound,
            "vault.json is missing from \(folder.url.path): it was deleted (by the storage provider, or by "
                + "mistake), and nothing was changed here. \(home) keeps the device list it signed and puts it back "
                + "the next time it runs a sempere command on this vault; then run this again (the copies of it "
                + "in the folder did not serve: \(cause.reason))")
    }

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
            let keys = try? DeviceKeys.load(from: try keyStore(configRoot: configRoot)), vault.body.home == keys.id,
            let kit = UnshownKit.load(root: configRoot, vaultID: vault.body.vaultID, identity: keys.identity)
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
        if let state = try? DeviceState.find(root: configRoot, folder: url.path),
            state.vaultID == unverified.body.vaultID
        {
            throw SempereError(.alreadyExists, "this device is already in the vault in \(url.path)")
        }
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
            + "again). If it was not, someone has your recovery kit: take over again with it now, from a device you "
            + "hold (`sempere takeover`), which beats this one"
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
        try folder.write(updated)
        let pin = try updated.accept(pinned: state.pin, now: now)
        try Self.saveCopy(of: updated, state: state, root: configRoot)
        state.pin = pin
        try state.save(root: configRoot)
        vault = updated
    }

    // MARK: - Notes

    /// A note that opened and passed every check.
    public struct Note: Sendable {
        /// The author's path, `notes/<author>/<id>.age`.
        public let path: String
        /// The file shown: the author's, or home's re-encrypted copy of it (`reencrypted/…`).
        public let file: String
        public let id: String
        /// The device that signed it (always the device whose folder holds it).
        public let author: String
        public let epoch: Int
        /// 1 when written, one more with each edit (0 for a note written before sempere 0.3).
        public let version: Int
        /// The epoch whose key opens the file shown (newer than ``epoch`` for home's re-encrypted copy).
        public let keyEpoch: Int
        /// The Markdown (empty for a long note listed without its text: ``list(withText:)``).
        public let markdown: String
        /// The first line, without its heading marks.
        public let title: String
        public let modified: Date?
    }

    /// A note that is not shown yet and is not wrong either: its author's device lists a newer version than
    /// the one here (or a note whose file has not arrived), or a copy of a re-encryption home has not
    /// finished. It resolves when the file arrives.
    public struct Pending: Sendable {
        public let path: String
        public let author: String
        /// The version here, nil when no file is here.
        public let version: Int?
        /// The version the author's manifest lists, when it lists one.
        public let expected: Int?
        public let reason: String

        public var id: String { VaultSession.noteID(path) }
    }

    /// A file that is not shown as a note, and why: it is never read as one and never deleted unless the
    /// person says so (``repairDelete(path:)``).
    public struct SetAside: Sendable {
        public let path: String
        public let category: SetAsideCategory
        public let reason: String
    }

    public struct Listing: Sendable {
        /// Newest first.
        public let notes: [Note]
        public let pending: [Pending]
        public let setAside: [SetAside]
        /// Files still under an old key that their writer removes on its next command (after Re-encrypt
        /// Everything), or copies that a newer file replaced.
        public let waitingForRemoval: [String]
        /// What the listing found that the person should be told (an author's manifest older than one seen).
        public let warnings: [String]
        /// Whether this device could not yet decide for one of its own notes whether it was written late (the
        /// record it is checked against has not arrived): it looks again on its next command.
        var ownNotesUndecided = false
    }

    /// Every note, opened and checked through this device's encrypted note index (only the notes that
    /// changed since the last listing are opened again), everything pending, and everything set aside.
    ///
    /// Listing also does what this device owes the vault, as each note's writer: it re-encrypts under the
    /// current key its own notes written late under an older one (the guide's "Files that arrive late"),
    /// removes its own files that home's re-encrypted copies replaced, keeps its manifest in step with its
    /// notes, and, on home, removes the copies and the removed devices' files that are superseded.
    public func list() throws -> Listing {
        try list(tidy: true, withText: true)
    }

    /// ``list()``, with each note's text only when `withText` (else each note has its title and an empty
    /// ``Note/markdown`` for a note longer than the index keeps: what a listing of titles needs, without
    /// opening every long note again).
    public func list(withText: Bool) throws -> Listing {
        try list(tidy: true, withText: withText)
    }

    func list(tidy: Bool, withText: Bool) throws -> Listing {
        let indexFile = state.noteIndexFile(root: configRoot)
        var index = NoteIndex.load(from: indexFile, identity: keys.identity)
        let keyring = try keyring()
        var memory = EpochKeyMemory.load(from: state.epochKeysFile(root: configRoot), identity: keys.identity)
        if memory.remember(keyring) {
            try memory.save(to: state.epochKeysFile(root: configRoot), identity: keys.identity)
        }
        let results = try index.refresh(folder: folder, vault: vault, keyring: keyring, needText: withText)
        var warnings: [String] = []
        let manifests = try readManifests(warnings: &warnings, keyring: keyring)
        let triage = NoteTriage(
            files: results.map {
                NoteTriage.File(path: $0.path, sha256: index.entries[$0.path]?.sha256 ?? "", result: $0.result)
            },
            vault: body, manifests: manifests, seen: index.seen ?? [:], reencrypted: keyring.reencrypted,
            inProgress: unfinishedReencryption, me: keys.id)
        // Saved only when something changed: the index holds every note's text, so writing it again costs as
        // much as the notes.
        if index.changedInLastRefresh || index.seen != triage.seen {
            index.seen = triage.seen
            try index.save(to: indexFile, identity: keys.identity)
            try NoteHashes(index).save(to: state.noteHashesFile(root: configRoot))
        }
        var undecided = false
        if tidy {
            let tidied = try tidyOwnNotes(
                triage, index: index, manifest: manifests[keys.id], keyring: keyring, memory: memory)
            undecided = tidied.undecided
            if tidied.changed {
                var listing = try list(tidy: false, withText: withText)
                listing.ownNotesUndecided = undecided
                return listing
            }
        }
        var notes: [Note] = []
        for (file, opened) in triage.shown {
            // From the stat the index took of the file this listing (one FileManager call per note cost as much
            // as the rest of a warm listing at 10,000 notes).
            let modified = index.entries[file]?.stat.flatMap(VaultFolder.modificationDate(statKey:))
            let path = VaultNote.authorPath(file)
            notes.append(
                Note(
                    path: path, file: file, id: Self.noteID(path), author: opened.author, epoch: opened.epoch,
                    version: opened.version, keyEpoch: opened.keyEpoch, markdown: opened.markdown, title: opened.title,
                    modified: modified))
        }
        var setAside = triage.setAside.map { SetAside(path: $0.path, category: $0.category, reason: $0.reason) }
        setAside += try folder.setAside().map {
            SetAside(
                path: $0, category: .notInTheLayout,
                reason: "not part of the vault layout (a sync conflict copy, or a stray file or folder)")
        }
        notes.sort { ($0.modified ?? .distantPast) > ($1.modified ?? .distantPast) }
        return Listing(
            notes: notes, pending: triage.pending, setAside: setAside.sorted { $0.path < $1.path },
            waitingForRemoval: triage.superseded.map(\.path).sorted(), warnings: warnings, ownNotesUndecided: undecided)
    }

    /// The epoch of a Re-encrypt Everything home started and has not finished, if any.
    var unfinishedReencryption: Int? {
        let epoch = body.currentEpoch
        guard epoch.reason == VaultHome.reencryptReason,
            !body.reencryptions.contains(where: { $0.epoch == epoch.number })
        else { return nil }
        return epoch.number
    }

    /// What this device owes as the writer of its own files (``list()``); true when it changed anything.
    private func tidyOwnNotes(
        _ triage: NoteTriage, index: NoteIndex, manifest: NoteManifest?, keyring: VaultKeyring,
        memory: EpochKeyMemory
    ) throws -> (changed: Bool, undecided: Bool) {
        var changed = false
        var undecided = false
        // Superseded files this device writes: its own files that home's copies replaced; on home, copies a
        // newer file replaced and removed devices' files home copied.
        for file in triage.superseded where file.remover == keys.id {
            try folder.removeNote(at: file.path)
            changed = true
        }
        var updated = manifest ?? NoteManifest(vaultID: body.vaultID, device: keys.id)
        let mine = triage.shown.filter { $0.note.author == keys.id }
        var manifestChanged = manifest == nil && !mine.isEmpty
        // Late files: its own notes under an older key than the current one that no record lists (written
        // while this device had not seen the change) are written again under the current key.
        let current = body.currentEpoch.number
        for (file, note) in mine where !VaultFolder.isCopyPath(file) {
            guard note.keyEpoch < current,
                let record = body.records.first(where: { $0.epoch == note.keyEpoch }),
                let sha = index.entries[file]?.sha256
            else { continue }
            // Late only when the record says so: a record not here yet (held back) decides nothing yet.
            guard
                let recorded = try? keyring.fileLists.contains(
                    path: file, sha256: sha, record: record, vaultID: body.vaultID)
            else {
                undecided = true
                continue
            }
            guard !recorded else { continue }
            // Its text from the file itself (a listing without text leaves a long note's empty).
            let text = try VaultNote.open(try folder.readNote(at: file), path: file, vault: body, keyring: keyring)
            let version = max(note.version, updated.notes[Self.noteID(file)] ?? 0) + 1
            try write(text.markdown, at: file, version: version)
            updated.recordWrite(Self.noteID(file), version: version)
            manifestChanged = true
        }
        // Its own notes under a key no list it follows has any more (written under a list a takeover dropped):
        // opened with a key it held once, checked as its own, and written again under the current key.
        let older = memory.others(than: keyring)
        for entry in triage.setAside where entry.category == .cannotOpen && !older.isEmpty {
            guard entry.path.hasPrefix("notes/\(keys.id)/"), VaultFolder.isNotePath(entry.path),
                let file = try? folder.readNote(at: entry.path),
                let plaintext = older.lazy.compactMap({ try? Age.decrypt(file, identities: [$0.ageIdentity]) }).first,
                let own = VaultNote.signed(plaintext, by: keys, path: entry.path, vaultID: body.vaultID)
            else { continue }
            let id = Self.noteID(entry.path)
            let version = max(own.version, updated.notes[id] ?? 0) + 1
            try write(own.markdown, at: entry.path, version: version)
            updated.recordWrite(id, version: version)
            manifestChanged = true
        }
        // Its manifest in step with its notes: a note newer than the manifest says (a command stopped between
        // the two writes, or a vault from before manifests) is recorded; a note the manifest says it deleted
        // is removed (the deletion had stopped half way).
        for (file, note) in mine {
            let id = Self.noteID(VaultNote.authorPath(file))
            if (updated.notes[id] ?? -1) < note.version {
                updated.recordWrite(id, version: note.version)
                manifestChanged = true
            }
        }
        if manifestChanged {
            try saveOwnManifest(updated)
            changed = true
        }
        for entry in triage.setAside where entry.category == .deletedNotePutBack {
            guard entry.path.hasPrefix("notes/\(keys.id)/") else { continue }
            try folder.removeNote(at: entry.path)
            changed = true
        }
        return (changed, undecided)
    }

    // MARK: - Manifests

    /// Every listed device's manifest this device trusts: of the one in the folder and the copy this device
    /// kept of the newest it accepted, the newer. An older one in the folder is a warning, never followed.
    func readManifests(warnings: inout [String], keyring: VaultKeyring? = nil) throws -> [String: NoteManifest] {
        var manifests: [String: NoteManifest] = [:]
        let keyring = try keyring ?? self.keyring()
        for device in body.devices {
            guard let key = keyring.signingKeys[device.id] else { continue }
            func parse(_ data: Data?) -> Result<NoteManifest, SempereError>? {
                data.map { data in
                    Result {
                        try NoteManifest(parsing: data, device: device.id, vaultID: body.vaultID, key: key)
                    }.mapError { $0 as? SempereError ?? SempereError(.malformedVault, plainDescription(of: $0)) }
                }
            }
            let kept = try? parse(FileManager.default.contents(atPath: manifestCopy(device.id).path))?.get()
            let inFolder = parse(folder.manifestFile(device: device.id))
            switch inFolder {
            case .success(let manifest)?:
                if let kept, kept.sequence > manifest.sequence {
                    manifests[device.id] = kept
                    warnings.append(
                        "\(NoteManifest.path(device: device.id)) (\(device.name)'s list of its notes) is older than one "
                            + "this device has seen (\(manifest.sequence) < \(kept.sequence)): the storage provider put "
                            + "back an old version; this device follows the newer one")
                } else {
                    manifests[device.id] = manifest
                    if kept?.sequence != manifest.sequence, let data = folder.manifestFile(device: device.id) {
                        try saveManifestCopy(data, device: device.id)
                    }
                }
            case .failure(let error)?:
                manifests[device.id] = kept
                warnings.append("\(NoteManifest.path(device: device.id)) refused: \(error.reason)")
            case nil:
                manifests[device.id] = kept
                if kept != nil, device.id != keys.id {
                    warnings.append(
                        "\(NoteManifest.path(device: device.id)) (\(device.name)'s list of its notes) is missing from "
                            + "the folder: this device follows the copy it kept")
                }
            }
        }
        return manifests
    }

    /// Where this device keeps the newest manifest it accepted from `device`.
    func manifestCopy(_ device: String) -> URL {
        state.manifestCopiesDirectory(root: configRoot).appendingPathComponent("\(device).json")
    }

    private func saveManifestCopy(_ data: Data, device: String) throws {
        let directory = state.manifestCopiesDirectory(root: configRoot)
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw SempereError(.io, "cannot create \(directory.path): \(plainCreateFailure(at: directory, error))")
        }
        try AtomicWrite.write(data, to: manifestCopy(device), mode: 0o600)
    }

    /// Writes this device's manifest into the folder and keeps a copy.
    func saveOwnManifest(_ manifest: NoteManifest) throws {
        var manifest = manifest
        let kept =
            (try? NoteManifest(
                parsing: Data(contentsOf: manifestCopy(keys.id)), device: keys.id, vaultID: body.vaultID,
                key: keys.signingKey.publicKey))?.sequence ?? 0
        manifest.advance(past: kept)
        let data = try manifest.signed(by: keys)
        try folder.write(manifest: data, device: keys.id)
        try saveManifestCopy(data, device: keys.id)
    }

    /// `manifest` (or this device's manifest now, made from its notes when it has none) with note `id` at
    /// `version`, saved.
    func recordInManifest(_ manifest: NoteManifest?, id: String, version: Int) throws -> NoteManifest {
        var updated = try manifest ?? ownManifest()
        updated.recordWrite(id, version: version)
        try saveOwnManifest(updated)
        return updated
    }

    /// This device's manifest now: the newest it has, or, when it has none, one made from a listing of its
    /// notes (which writes it).
    func ownManifest() throws -> NoteManifest {
        var warnings: [String] = []
        if let manifest = try readManifests(warnings: &warnings)[keys.id] { return manifest }
        _ = try list(withText: false)
        return try readManifests(warnings: &warnings)[keys.id] ?? NoteManifest(vaultID: body.vaultID, device: keys.id)
    }

    func keyring() throws -> VaultKeyring {
        try VaultKeyring(
            vault: body, credentials: keys, fileLists: EpochFileLists(folder: folder),
            reencrypted: ReencryptionLists(folder: folder, vault: body))
    }

    /// The note path (the author's, `notes/<device>/<id>.age`) named by a note id or a unique start of one.
    public func notePath(matching text: String) throws -> String {
        let wanted = text.lowercased()
        let paths = Set((try folder.notePaths() + folder.copyPaths()).map(VaultNote.authorPath)).sorted()
        let matches = paths.filter { $0 == text || Self.noteID($0).hasPrefix(wanted) }
        guard !wanted.isEmpty, let first = matches.first else {
            throw SempereError(.notFound, "no note \"\(text)\" in this vault: see `sempere ls`")
        }
        guard matches.count == 1 else {
            throw SempereError(.notFound, "\"\(text)\" starts more than one note id: use more of it")
        }
        return first
    }

    /// The note at `path` (the author's path), opened and checked as a listing does; a note that is set
    /// aside or pending is never shown: the error says why.
    public func open(notePath path: String) throws -> VaultNote.Opened {
        let listing = try list(withText: false)
        let id = Self.noteID(path).prefix(8)
        if let note = listing.notes.first(where: { $0.path == path }) {
            // The file the listing chose, opened for its text (and checked again).
            return try VaultNote.open(
                try folder.readNote(at: note.file), path: note.file, vault: body, keyring: keyring())
        }
        if let pending = listing.pending.first(where: { VaultNote.authorPath($0.path) == path }) {
            throw SempereError(.notFound, "note \(id) is pending, not shown yet: \(pending.reason)")
        }
        if let aside = listing.setAside.first(where: { VaultNote.authorPath($0.path) == path }) {
            throw SempereError(
                .untrustedNote, "note \(id) is set aside, never shown: \(aside.reason)", setAside: aside.category)
        }
        throw SempereError(.notFound, "no note \"\(id)\" in this vault: see `sempere ls`")
    }

    /// Seals `markdown` as a new note of this device; returns its path.
    @discardableResult
    public func newNote(markdown: String) throws -> String {
        let path = VaultFolder.notePath(author: keys.id, noteID: VaultFolder.newNoteID())
        let manifest = try ownManifest()
        try write(markdown, at: path, version: 1)
        _ = try recordInManifest(manifest, id: Self.noteID(path), version: 1)
        return path
    }

    /// Imports files as notes, one each, after checking them all: every file must be readable, non-empty
    /// UTF-8 (a note is UTF-8 Markdown, and changing a file's bytes to make it so would lose data
    /// silently). Returns the new notes' paths, in order.
    public func importNotes(_ files: [URL]) throws -> [String] {
        var texts: [String] = []
        for file in files {
            guard let data = FileManager.default.contents(atPath: file.path) else {
                throw SempereError(.io, "cannot read \(file.path), so nothing was imported: check the path")
            }
            guard let text = String(validating: data, as: UTF8.self) else {
                throw SempereError(
                    .invalidEncoding,
                    "\(file.path) is not UTF-8 text, so nothing was imported: a note is UTF-8 Markdown, and sempere "
                        + "does not change a file's bytes to make it one. Convert it first, for example "
                        + "`iconv -f latin1 -t utf-8 \(file.path) > converted.md`")
            }
            guard !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw SempereError(.emptyNote, "\(file.path) is empty, so nothing was imported")
            }
            texts.append(text)
        }
        var manifest = try ownManifest()
        var paths: [String] = []
        for text in texts {
            let path = VaultFolder.notePath(author: keys.id, noteID: VaultFolder.newNoteID())
            try write(text, at: path, version: 1)
            manifest.recordWrite(Self.noteID(path), version: 1)
            paths.append(path)
        }
        try saveOwnManifest(manifest)
        return paths
    }

    /// The note at `path` when this device may edit it: it opens, and this device signed it.
    public func editableNote(at path: String) throws -> VaultNote.Opened {
        let opened = try open(notePath: path)
        guard opened.author == keys.id else {
            throw SempereError(
                .notFound,
                "note \(Self.noteID(path).prefix(8)) was written by \(name(of: opened.author)); each device edits "
                    + "only its own notes: `sempere cat \(Self.noteID(path).prefix(8)) | sempere new <title>` makes "
                    + "a copy")
        }
        return opened
    }

    /// Replaces this device's note at `path` with `markdown`, as its next version. An empty text is refused
    /// (as git refuses an empty commit message): removing a note is ``removeNote(at:)``.
    public func updateNote(at path: String, markdown: String) throws {
        let opened = try editableNote(at: path)
        guard !markdown.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw SempereError(
                .emptyNote,
                "the edited note is empty, so it was not saved and note \(Self.noteID(path).prefix(8)) is unchanged; "
                    + "to delete it, `sempere rm \(Self.noteID(path).prefix(8))`")
        }
        let manifest = try ownManifest()
        let version = max(opened.version, manifest.notes[Self.noteID(path)] ?? 0) + 1
        try write(markdown, at: path, version: version)
        _ = try recordInManifest(manifest, id: Self.noteID(path), version: version)
    }

    /// Removes this device's note at `path`. Only a note that opens and that this device signed is removed.
    /// A set-aside one is kept ("never deleted unless you say so", and only through Repair): removing it
    /// here could lose another device's note that the provider moved into this folder. The deletion is
    /// recorded in this device's manifest first, so a copy of the note put back later is set aside.
    public func removeNote(at path: String) throws {
        let opened: VaultNote.Opened
        do {
            opened = try open(notePath: path)
        } catch let error as SempereError where error.code == .untrustedNote {
            throw SempereError(.untrustedNote, "\(error.reason); it is kept, not removed (`sempere repair` handles it)")
        }
        guard opened.author == keys.id else {
            throw SempereError(
                .notFound,
                "note \(Self.noteID(path).prefix(8)) was written by \(name(of: opened.author)); only its author "
                    + "removes it (each device writes only its own notes)")
        }
        var manifest = try ownManifest()
        let id = Self.noteID(path)
        manifest.recordDeletion(id, version: max(opened.version, manifest.notes[id] ?? 0))
        try saveOwnManifest(manifest)
        try folder.removeNote(at: path)
    }

    func write(_ markdown: String, at path: String, version: Int) throws {
        try folder.writeNote(
            try VaultNote.seal(markdown: markdown, path: path, vault: body, author: keys, version: version), at: path)
    }

    // MARK: - Export

    /// Writes every note as a plaintext Markdown file (mode 0600) into `directory`, created 0700 if
    /// missing, and returns the files written and what was set aside (not exported). Refuses a directory
    /// inside the vault folder: plaintext there would be synced to the provider.
    public func export(to directory: URL) throws -> (written: [(id: String, file: URL)], setAside: [SetAside]) {
        try checkOutsideVault(directory)
        let listing = try list()
        let files = listing.notes.map { note in
            let safe = String(note.title.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "_" }.prefix(60))
            return (note, directory.appendingPathComponent("\(safe)-\(note.id).md"))
        }
        // Nothing is overwritten: a file already there (an earlier export, perhaps edited since) stops the
        // export before anything is written.
        if let taken = files.first(where: { FileManager.default.fileExists(atPath: $0.1.path) }) {
            throw SempereError(
                .alreadyExists,
                "\(taken.1.path) exists already, so nothing was exported (nothing is overwritten): export into a new "
                    + "or empty folder")
        }
        var written: [(id: String, file: URL)] = []
        for (note, file) in files {
            try AtomicWrite.write(Data(note.markdown.utf8), to: file, mode: 0o600)
            written.append((note.id, file))
        }
        return (written, listing.setAside)
    }

    /// On a device that was removed: writes its own notes that the vault did not record at its removal
    /// (what it "had not synced") into `directory`, as `unsynced-<id>.md`.
    public static func exportUnsynced(
        configRoot: URL, folder path: String?, to directory: URL
    ) throws -> [(id: String, file: URL)] {
        let keys = try deviceKeys(configRoot: configRoot)
        let state = try DeviceState.find(root: configRoot, folder: path)
        let folder = VaultFolder(url: URL(fileURLWithPath: state.folder))
        let (vault, _, _) = try folder.vault(pinned: state.pin)
        try checkOutside(directory, vault: folder.url)
        var written: [(id: String, file: URL)] = []
        for note in try VaultNote.unsynced(folder: folder, vault: vault.body, credentials: keys) {
            let id = noteID(note.path)
            let file = directory.appendingPathComponent("unsynced-\(id.prefix(8)).md")
            try AtomicWrite.write(Data(note.markdown.utf8), to: file, mode: 0o600)
            written.append((id, file))
        }
        return written
    }

    func checkOutsideVault(_ directory: URL) throws { try Self.checkOutside(directory, vault: folder.url) }

    /// Refuses a file path inside the vault folder (for a plaintext file such as the printable kit page),
    /// creating its folder (0700) otherwise.
    public func checkOutsideVault(file: URL) throws {
        try Self.checkOutside(file.deletingLastPathComponent(), vault: folder.url)
    }

    /// Refuses `directory` when it is the vault folder or inside it (following symbolic links), and
    /// creates it (0700) otherwise.
    static func checkOutside(_ directory: URL, vault: URL) throws {
        func resolved(_ url: URL) -> String {
            // The nearest existing ancestor, with its links resolved, and the rest appended.
            var existing = url.standardizedFileURL
            var rest: [String] = []
            while !FileManager.default.fileExists(atPath: existing.path), existing.path != "/" {
                rest.insert(existing.lastPathComponent, at: 0)
                existing = existing.deletingLastPathComponent()
            }
            return rest.reduce(existing.resolvingSymlinksInPath()) { $0.appendingPathComponent($1) }.path
        }
        let target = resolved(directory)
        let vaultPath = resolved(vault)
        guard target != vaultPath, !target.hasPrefix(vaultPath + "/") else {
            throw SempereError(
                .unsafeDestination,
                "\(directory.path) is inside the vault folder \(vault.path), which is synced: exported notes are "
                    + "plaintext, so nothing was written. Export to a private folder outside it")
        }
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw SempereError(.io, "cannot create \(directory.path): \(plainCreateFailure(at: directory, error))")
        }
    }

    // MARK: - Recovery kit

    /// The kit the last `create` or kit replacement on this device made, when the program stopped before
    /// it was shown (``UnshownKit``): the vault's kit, or the one a pending replacement names. A kit kept
    /// from a replacement whose vault.json was never written is dropped here (it never took effect).
    public func unshownKit() throws -> RecoveryKit? {
        try Self.unshownKit(root: configRoot, body: body, identity: keys.identity)
    }

    static func unshownKit(root: URL, body: VaultBody, identity: WrapIdentity) throws -> RecoveryKit? {
        guard let kit = UnshownKit.load(root: root, vaultID: body.vaultID, identity: identity) else { return nil }
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

    // MARK: - Names

    /// The note id in a note path (`notes/<device>/<id>.age`).
    public static func noteID(_ path: String) -> String {
        String(path.split(separator: "/").last.map { $0.hasSuffix(".age") ? $0.dropLast(4) : $0 } ?? "")
    }

    /// A note's title: its first non-empty line without heading marks, or "(untitled)".
    public static func title(of markdown: String) -> String {
        // Only as far as the first non-empty line, on bytes: splitting a 100 KiB note into Characters to take
        // its first line cost more than decrypting it.
        let utf8 = markdown.utf8
        var start = utf8.startIndex
        var line: Substring = ""
        while start < utf8.endIndex {
            let end = utf8[start...].firstIndex(of: UInt8(ascii: "\n")) ?? utf8.endIndex
            if end > start {
                line = markdown[start..<end]
                break
            }
            start = utf8.index(after: end)
        }
        let title = line.drop(while: { $0 == "#" }).trimmingCharacters(in: .whitespaces)
        return title.isEmpty ? "(untitled)" : title
    }
}
