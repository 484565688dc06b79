import Age
import Foundation
import SiblingsCrypto

/// The notes: listing them (and what a listing owes the vault), the manifests, and opening a note's versions
/// (docs/sempere-format.md, "Notes", "Versions and manifests", "Late files"); writing them is
/// VaultSession+Writing.swift.
extension VaultSession {
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
        /// The other devices' versions of this note signed to replace (device id → version).
        public let replaces: [String: Int]
        /// The files of the note's other current versions, when it is in conflict: written on devices that had not
        /// seen each other's version. Empty for a note with one current version.
        public internal(set) var otherVersions: [String] = []
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
        /// Whether it waits for a file of the vault that has not synced to this device yet (the record of the
        /// notes that existed when an epoch ended), rather than for the note's own file.
        public internal(set) var waitingForSync = false

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
        // Under the lock: a listing writes this device's index and, tidying, its notes and manifest.
        try state.locked(root: configRoot) { try listLocked(tidy: tidy, withText: withText) }
    }

    private func listLocked(tidy: Bool, withText: Bool) throws -> Listing {
        let indexFile = state.noteIndexFile(root: configRoot)
        var index = try NoteIndex.load(from: indexFile, identity: keys.identity)
        let keyring = try keyring()
        var memory = try EpochKeyMemory.load(from: state.epochKeysFile(root: configRoot), identity: keys.identity)
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
                    modified: modified, replaces: opened.replaces))
        }
        // A note with several current versions: each names the others.
        let files = Dictionary(grouping: notes.map { ($0.id, $0.file) }, by: \.0)
        for index in notes.indices where files[notes[index].id]!.count > 1 {
            notes[index].otherVersions = files[notes[index].id]!.map(\.1).filter { $0 != notes[index].file }.sorted()
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
        var updated = manifest ?? NoteManifest(vaultID: body.vaultID, device: keys.id)
        // Its own files of notes another device edited or deleted since: the manifest records each as deleted
        // first (so no device waits for it), then the file goes.
        let replaced = triage.superseded.filter { $0.remover == keys.id && $0.replacedVersion != nil }
        for file in replaced {
            let id = Self.noteID(file.path)
            updated.recordDeletion(id, version: max(file.replacedVersion!, updated.notes[id] ?? 0))
        }
        if !replaced.isEmpty { try saveOwnManifest(updated) }
        // Superseded files this device writes: those, its own files that home's copies replaced; on home, copies
        // a newer file replaced, and removed devices' files home copied or another device replaced.
        for file in triage.superseded where file.remover == keys.id {
            try folder.removeFile(file.path)
            changed = true
        }
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
            try write(text.markdown, at: file, version: version, replaces: text.replaces)
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
            try write(own.markdown, at: entry.path, version: version, replaces: own.replaces)
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
    ///
    /// Several devices' files can hold one note ("Editing any note"): every function that takes a note path
    /// reads only its note id, so any of them names the note.
    public func notePath(matching text: String) throws -> String {
        let wanted = text.lowercased()
        let paths = Set((try folder.notePaths() + folder.copyPaths()).map(VaultNote.authorPath)).sorted()
        let matches = paths.filter { $0 == text || Self.noteID($0).hasPrefix(wanted) }
        guard !wanted.isEmpty, let first = matches.first else {
            throw SempereError(.notFound, "no note \"\(text)\" in this vault: see `sempere ls`")
        }
        guard Set(matches.map(Self.noteID)).count == 1 else {
            throw SempereError(.notFound, "\"\(text)\" starts more than one note id: use more of it")
        }
        return first
    }

    /// The current versions of the note `path` names (its id): one, or several in conflict, each opened for its
    /// text and checked as a listing does, newest first. A note that is set aside or pending is never shown: the
    /// error says why.
    public func versions(of path: String) throws -> [Note] {
        let listing = try list(withText: false)
        let id = Self.noteID(path)
        let current = listing.notes.filter { $0.id == id }
        if !current.isEmpty {
            // The files the listing chose, opened for their text (and checked again).
            let keyring = try keyring()
            return try current.map { note in
                let opened = try VaultNote.open(
                    try folder.readNote(at: note.file), path: note.file, vault: body, keyring: keyring)
                var full = Note(
                    path: note.path, file: note.file, id: note.id, author: note.author, epoch: note.epoch,
                    version: note.version, keyEpoch: note.keyEpoch, markdown: opened.markdown, title: note.title,
                    modified: note.modified, replaces: note.replaces)
                full.otherVersions = note.otherVersions
                return full
            }
        }
        if let pending = listing.pending.first(where: { $0.id == id }) {
            throw SempereError(.notFound, "note \(id.prefix(8)) is pending, not shown yet: \(pending.reason)")
        }
        if let aside = listing.setAside.first(where: { Self.noteID($0.path) == id }) {
            throw SempereError(
                .untrustedNote, "note \(id.prefix(8)) is set aside, never shown: \(aside.reason)",
                setAside: aside.category)
        }
        throw SempereError(.notFound, "no note \"\(id.prefix(8))\" in this vault: see `sempere ls`")
    }

    /// The note `path` names, when it has one current version (``versions(of:)`` gives every version of a
    /// note in conflict; opening one throws `.conflict`).
    public func open(notePath path: String) throws -> VaultNote.Opened {
        let versions = try versions(of: path)
        guard versions.count == 1, let note = versions.first else {
            throw conflictError(versions)
        }
        return VaultNote.Opened(
            markdown: note.markdown, author: note.author, epoch: note.epoch, version: note.version,
            keyEpoch: note.keyEpoch, title: note.title, replaces: note.replaces)
    }

    func conflictError(_ versions: [Note]) -> SempereError {
        let id = versions.first.map { $0.id.prefix(8) } ?? ""
        let names = versions.map { name(of: $0.author) }.joined(separator: ", ")
        return SempereError(
            .conflict,
            "note \(id) has \(versions.count) versions, written on devices that had not seen each other's (\(names)): "
                + "`sempere cat \(id)` shows them all, `sempere edit \(id)` merges them, `sempere resolve \(id) --keep "
                + "<device>` keeps one")
    }
}
