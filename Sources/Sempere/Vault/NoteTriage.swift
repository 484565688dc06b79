import Foundation

/// Decides, for every note file that opened or did not, what a device shows (docs/sempere-format.md,
/// "Which file is the note", "Versions and manifests"):
///
/// 1. **One note, two files.** After Re-encrypt Everything a note can have its author's file *A*
///    (`notes/…`) and home's copy *H* (`reencrypted/…`, bound by home's list). *A* signed in *H*'s epoch or
///    later is the note (the author edited it since); *A* that is the very file home copied is superseded
///    by *H* (its author removes it); *A* changed since home copied it, still under an older key, is a late
///    edit and is the note (its author re-encrypts it). The file not shown is superseded: never shown, never
///    set aside, removed by its writer.
/// 2. **Versions.** The note shown is checked against its author's manifest (``NoteManifest``) and the
///    highest version this device has shown before: a note its author deleted is set aside (put back); a
///    version below one this device has shown is set aside (an old version put back); a version below the
///    manifest's, newer than any this device has shown, is pending (on its way); a note the manifest lists
///    and no file holds is pending too.
/// 3. **Several devices' files of one note** ("Editing any note"). Each device writes its edits of a note in its
///    own folder, and each version signs the versions of the other devices' files it replaces (a deletion, in
///    the deleter's manifest). A file another device's version or deletion replaced is superseded (its writer
///    removes it); the files of a note that nothing replaced are its current versions: one is the note, two or
///    more are a conflict, all shown until a device writes a version that replaces them. A note with a version
///    still on its way is pending as a whole, so that an older version is not shown as current meanwhile.
struct NoteTriage {
    struct File {
        let path: String
        let sha256: String
        let result: Result<VaultNote.Opened, SempereError>
    }

    /// A file no longer the note, and who removes it.
    struct Superseded {
        let path: String
        /// The device that may remove it: the author for its own folder, home for its copies and for the
        /// folders of removed devices.
        let remover: String
        let reason: String
        /// For a listed device's own file that another device's version or deletion replaced: the version its
        /// writer records as deleted in its manifest before removing the file (the file may be gone already).
        var replacedVersion: Int? = nil
    }

    var shown: [(path: String, note: VaultNote.Opened)] = []
    var setAside: [(path: String, category: SetAsideCategory, reason: String)] = []
    var pending: [VaultSession.Pending] = []
    var superseded: [Superseded] = []
    /// The updated highest versions shown, by author's path.
    var seen: [String: Int]
    /// For each note id, the highest version of each device's file of it that another device's signed version
    /// or deletion replaced.
    let replacedVersions: [String: [String: Int]]
    private let home: String
    private let me: String
    private let ownManifest: NoteManifest?
    private let removedDevices: Set<String>
    /// Notes of which a device's manifest lists a version that has not reached this device.
    private var onItsWay: Set<String> = []

    /// `me`: this device, whose own notes it wrote itself (a version below its own manifest's is one put
    /// back, never one on its way). `inProgress`: the epoch of a re-encryption home has started and not
    /// finished (its copies are not bound yet, so they are pending, not set aside).
    init(
        files: [File], vault: VaultBody, manifests: [String: NoteManifest], seen: [String: Int],
        reencrypted: ReencryptionLists, inProgress: Int?, me: String
    ) {
        self.seen = seen
        home = vault.home
        self.me = me
        ownManifest = manifests[me]
        removedDevices = Set(vault.removed.map(\.device.id))
        // What other devices' versions and deletions replaced: only from files that opened and passed every
        // check (signed by a device of the vault, in its folder) and from listed devices' manifests.
        var replaced: [String: [String: Int]] = [:]
        func raise(_ id: String, _ versions: [String: Int], writer: String) {
            for (device, version) in versions where device != writer {
                replaced[id, default: [:]][device] = max(replaced[id]?[device] ?? -1, version)
            }
        }
        for file in files {
            if case .success(let note) = file.result, !note.replaces.isEmpty {
                raise(VaultSession.noteID(file.path), note.replaces, writer: note.author)
            }
        }
        for (device, manifest) in manifests where vault.device(device) != nil {
            for (id, versions) in manifest.replaced { raise(id, versions, writer: device) }
        }
        replacedVersions = replaced
        var byNote: [String: (author: File?, copy: File?)] = [:]
        for file in files {
            let key = VaultNote.authorPath(file.path)
            if key == file.path {
                byNote[key, default: (nil, nil)].author = file
            } else {
                byNote[key, default: (nil, nil)].copy = file
            }
        }
        for (notePath, pair) in byNote.sorted(by: { $0.key < $1.key }) {
            let authorID = String(notePath.split(separator: "/")[1])
            // The remover of an author's file: the author, or home once the author is removed.
            let authorRemover = removedDevices.contains(authorID) ? vault.home : authorID
            var chosen: (file: File, note: VaultNote.Opened)?
            switch (pair.author, pair.copy) {
            case (let a?, let h?):
                let aNote = try? a.result.get()
                let hNote = try? h.result.get()
                let source = hNote.flatMap { reencrypted.entry(path: notePath, epoch: $0.keyEpoch)?.sourceSHA256 }
                if let aNote, let hNote {
                    if source == a.sha256 {
                        chosen = (h, hNote)
                        superseded.append(
                            Superseded(
                                path: a.path, remover: authorRemover,
                                reason: "home re-encrypted it under a newer key; the copy is the note"))
                    } else if aNote.version > hNote.version {
                        // The author wrote it again since home copied it: under the new key (it saw the
                        // re-encryption), or still under an older one (a late edit, until it re-encrypts it).
                        chosen = (a, aNote)
                        superseded.append(
                            Superseded(
                                path: h.path, remover: vault.home,
                                reason: "its author wrote the note again after home re-encrypted it"))
                    } else {
                        // Not the file home copied, and no newer: an old version put back. The copy stays the note.
                        chosen = (h, hNote)
                        setAside.append(
                            (
                                a.path, .oldVersionPutBack,
                                "it is version \(aNote.version) of the note, and home re-encrypted version "
                                    + "\(hNote.version) of it: an old version the storage provider put back"
                            ))
                    }
                } else if let hNote {
                    chosen = (h, hNote)
                    if source == a.sha256 {
                        superseded.append(
                            Superseded(
                                path: a.path, remover: authorRemover,
                                reason: "home re-encrypted it under a newer key; the copy is the note"))
                    } else {
                        setAside(a, inProgress: inProgress)
                    }
                } else if let aNote {
                    chosen = (a, aNote)
                    setAside(h, inProgress: inProgress)
                } else {
                    setAside(a, inProgress: inProgress)
                    setAside(h, inProgress: inProgress)
                }
            case (let a?, nil):
                if let note = try? a.result.get() { chosen = (a, note) } else { setAside(a, inProgress: inProgress) }
            case (nil, let h?):
                if let note = try? h.result.get() { chosen = (h, note) } else { setAside(h, inProgress: inProgress) }
            case (nil, nil):
                continue
            }
            guard let (file, note) = chosen else { continue }
            check(file: file, note: note, notePath: notePath, manifest: manifests[note.author])
        }
        // What an author's manifest lists and no file holds: on its way (or held back by the provider).
        for (author, manifest) in manifests where vault.device(author) != nil {
            for (id, version) in manifest.notes {
                let notePath = VaultFolder.notePath(author: author, noteID: id)
                guard byNote[notePath] == nil else { continue }
                // Another device's version or deletion replaced it: nothing is on its way (its writer records that).
                if isReplaced(author: author, id: id, version: version) {
                    if author == me {
                        superseded.append(
                            Superseded(
                                path: notePath, remover: me, reason: Self.replacedReason, replacedVersion: version))
                    }
                    continue
                }
                onItsWay.insert(id)
                pending.append(
                    VaultSession.Pending(
                        path: notePath, author: author, version: nil, expected: version,
                        reason: author == me
                            ? "this device wrote version \(version) of it, and its file is gone from the folder: "
                                + "deleted or lost by the storage provider (look in its version history)"
                            : "its author's device lists version \(version) of it, and its file has not reached "
                                + "this device (or the storage provider holds it back)"))
            }
        }
        // A device's file set aside (put back old, damaged, under a key not here yet) while its manifest lists
        // the note: that device's version is not here to read, and it may replace the one shown.
        var unreadable: [String: VaultSession.Pending] = [:]
        for entry in setAside where VaultFolder.isNotePath(entry.path) {
            let writer = String(entry.path.split(separator: "/")[1])
            let id = VaultSession.noteID(entry.path)
            guard vault.device(writer) != nil, let listed = manifests[writer]?.notes[id],
                !isReplaced(author: writer, id: id, version: listed)
            else { continue }
            onItsWay.insert(id)
            unreadable[id] = VaultSession.Pending(
                path: entry.path, author: writer, version: nil, expected: listed,
                reason: "its version \(listed) from this device's folder \(writer.prefix(8)) is set aside here "
                    + "(\(entry.reason)), and it may replace the version this device has: the note waits for it")
        }
        // A note with a version on its way is pending as a whole: the version here may be the one it replaces.
        let hidden = Set(shown.map { VaultSession.noteID($0.path) }).intersection(onItsWay)
        shown.removeAll { [onItsWay] in onItsWay.contains(VaultSession.noteID($0.path)) }
        pending += hidden.compactMap { unreadable[$0] }
        pending.sort { $0.path < $1.path }
    }

    static let replacedReason = "another device wrote a newer version of this note, or deleted it, after this one"

    /// Whether another device's version or deletion replaced `author`'s file of note `id` at `version`. No device
    /// can have replaced a version this device never wrote: such a claim about its own file is not followed
    /// here (its own file stays, and the other devices see that version as replaced).
    private func isReplaced(author: String, id: String, version: Int) -> Bool {
        guard let over = replacedVersions[id]?[author], over >= version else { return false }
        guard author == me else { return true }
        return over <= max(version, ownManifest?.notes[id] ?? 0, ownManifest?.deleted[id] ?? 0)
    }

    private mutating func setAside(_ file: File, inProgress: Int?) {
        guard case .failure(let error) = file.result else { return }
        // Its check waits for a file the provider has not delivered yet: pending, never set aside.
        if error.setAsideCategory == .waitingForSync {
            pending.append(
                VaultSession.Pending(
                    path: file.path, author: String(file.path.split(separator: "/")[1]), version: nil, expected: nil,
                    reason: error.reason, waitingForSync: true))
            return
        }
        // A copy of a re-encryption home is still making: not bound yet (or, after a stop, half written), so not
        // a note yet, but nothing wrong.
        if let inProgress, VaultFolder.isCopyPath(file.path),
            error.reason == VaultNote.unboundCopyReason || error.setAsideCategory == .cannotOpen
        {
            pending.append(
                VaultSession.Pending(
                    path: file.path, author: String(file.path.split(separator: "/")[1]), version: nil, expected: nil,
                    reason: "home is re-encrypting the vault into epoch \(inProgress); this copy counts once it has "
                        + "finished"))
            return
        }
        setAside.append((file.path, error.setAsideCategory ?? .untrusted, error.reason))
    }

    /// The version checks of the file chosen for a note.
    private mutating func check(file: File, note: VaultNote.Opened, notePath: String, manifest: NoteManifest?) {
        let id = VaultSession.noteID(notePath)
        let version = note.version
        // Another device replaced this device's file (its newest version the manifest lists, if newer): the
        // file is superseded, removed by its writer.
        if isReplaced(author: note.author, id: id, version: max(version, manifest?.notes[id] ?? 0)) {
            let isCopy = VaultFolder.isCopyPath(file.path)
            let listed = !removedDevices.contains(note.author)
            superseded.append(
                Superseded(
                    path: file.path, remover: isCopy || !listed ? home : note.author, reason: Self.replacedReason,
                    replacedVersion: isCopy || !listed ? nil : max(version, manifest?.notes[id] ?? 0)))
            return
        }
        if let deletedAt = manifest?.deleted[id], version <= deletedAt {
            if VaultFolder.isCopyPath(file.path) {
                // Home's copy of a note its author deleted since: home removes it.
                superseded.append(
                    Superseded(path: file.path, remover: home, reason: "its author deleted the note"))
                return
            }
            setAside.append(
                (
                    file.path, .deletedNotePutBack,
                    "its author deleted this note (at version \(deletedAt)), and this is a copy of it from before: put "
                        + "back by the storage provider, or the deletion has not reached this device yet"
                ))
            return
        }
        // This device's own note: it wrote every version its manifest lists, so an older file was put back.
        let newest = max(seen[notePath] ?? 0, note.author == me ? manifest?.notes[id] ?? 0 : 0)
        if version < newest {
            setAside.append(
                (
                    file.path, .oldVersionPutBack,
                    "it is version \(version) of the note, and this device has already "
                        + "\(note.author == me ? "written" : "shown") version \(newest): an old version the storage "
                        + "provider put back (the newer one may be in its version history)"
                ))
            return
        }
        if let listed = manifest?.notes[id], version < listed {
            onItsWay.insert(id)
            pending.append(
                VaultSession.Pending(
                    path: file.path, author: note.author, version: version, expected: listed,
                    reason: "its author's device lists version \(listed), and version \(version) is what has reached "
                        + "this device so far: the newer one is on its way (or the storage provider holds it back)"))
            return
        }
        seen[notePath] = max(seen[notePath] ?? 0, version)
        shown.append((file.path, note))
    }
}
