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
    public internal(set) var state: DeviceState
    public internal(set) var vault: SignedVault
    /// What opening found that the person should be told: a copy of vault.json that was refused and why,
    /// or a deleted vault.json that home put back.
    public internal(set) var notices: [String]
    /// The time this session acts at: the device's clock, read each time (tests give a fixed time).
    public var now: Date { fixedNow ?? Date() }
    let fixedNow: Date?
    /// Whether the folder holds a rival takeover of the same generation (two holders of the kit).
    var sawRivalTakeover = false

    public var body: VaultBody { vault.body }
    /// Whether this device manages the vault's devices.
    public var isHome: Bool { body.home == keys.id }

    // MARK: - Opening

    /// This device's keys for creating, joining or taking over a vault: nil when it has none yet. Keys
    /// whose making stopped half way, on a device in no vault, are dropped so that they are made again.
    static func keysBeforeJoining(configRoot: URL) throws -> DeviceKeys? {
        let store = try keyStore(configRoot: configRoot)
        if try DeviceState.all(root: configRoot).isEmpty {
            do {
                if try DeviceKeys.discardInterruptedSave(in: store) {
                    KeyUnlocking.shared.forget(store.directory.path)
                }
            } catch let error as SempereError where error.code == .passphraseRequired {
                // Protected keys: both were saved whole (the signing key, saved last, is what asks).
            }
        }
        return try loadKeys(configRoot: configRoot)
    }

    /// This device's keys, made first when it has none (``keysBeforeJoining(configRoot:)``).
    static func keysMadeIfNeeded(configRoot: URL, postQuantum: Bool) throws -> DeviceKeys {
        if let keys = try keysBeforeJoining(configRoot: configRoot) {
            try checkNoPluginAskedFor(existing: keys)
            return keys
        }
        let keys = try newKeys(postQuantum: postQuantum)
        try keys.save(to: try keyStore(configRoot: configRoot))
        return keys
    }

    /// The key store of the device whose configuration root is `configRoot` (`<root>/keys`).
    ///
    /// It stores (and opens) with the passphrase this process knows for it: the one the keys were opened with, or
    /// the one ``protectNewKeys(with:)`` set.
    public static func keyStore(configRoot: URL) throws -> FileKeyStore {
        let directory = DeviceState.keyStoreDirectory(root: configRoot)
        return try FileKeyStore(directory: directory, passphrase: KeyUnlocking.shared.passphrase(for: directory.path))
    }

    /// This device's keys, which ``create(folder:homeName:postQuantum:passphrase:configRoot:)`` or
    /// ``askToJoin(folder:name:configRoot:now:)`` made.
    public static func deviceKeys(configRoot: URL) throws -> DeviceKeys {
        guard let keys = try loadKeys(configRoot: configRoot) else {
            throw SempereError(
                .notFound,
                "this device has no keys in \(DeviceState.keyStoreDirectory(root: configRoot).path): run "
                    + "`sempere create` or `sempere join` first")
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
            let text = Self.takeoverAlert(home: home, thisDevice: keys.id, body: vault.body)
            if home.id == keys.id {
                notices.append(text)
            } else {
                // Shown on every command from now on, until the person acknowledges it.
                state.raise(
                    DeviceState.Alert(
                        id: "takeover-\(pin.takeoverGeneration)", text: text,
                        raisedAt: Int64(now.timeIntervalSince1970)))
            }
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
        for alert in state.alerts ?? [] {
            notices.append("ALERT until you acknowledge it with `sempere alerts --ack`: \(alert.text)")
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
