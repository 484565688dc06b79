import Age
import Foundation

/// Repair (the guide: set-aside files are "never read as notes and never deleted unless you say so. They
/// are listed in Repair ▸ From Before a Device Change"; docs/sempere-format.md, "Repair").
///
/// Everything set aside is listed by ``SetAsideCategory`` with its reason (``list()``). Each entry can be
/// restored (its text becomes a note of this device: a new note, or, for a note of this device's own, its
/// next version) or deleted, each only when the person says so. A file in another listed device's folder is
/// never removed from here (only that device writes there, and removing an old copy could reach that
/// device's newer file through the sync): restoring copies its text, and that device's own Repair removes
/// the file.
extension VaultSession {
    /// What restoring did: the note the text became, and whether the set-aside file was removed.
    public struct Restored: Sendable {
        /// The note's path (this device's folder).
        public let path: String
        public let removedSetAside: Bool
        /// Why it was kept, when it was.
        public let keptBecause: String?
    }

    /// The set-aside entry at `path` (a path, or a unique start of its note id).
    public func setAsideEntry(_ text: String) throws -> SetAside {
        let entries = try list(withText: false).setAside
        if let exact = entries.first(where: { $0.path == text }) { return exact }
        let wanted = text.lowercased()
        let matches = entries.filter { !wanted.isEmpty && Self.noteID($0.path).hasPrefix(wanted) }
        guard matches.count == 1 else {
            throw SempereError(
                .notFound,
                matches.isEmpty
                    ? "nothing set aside is \"\(text)\": `sempere repair` lists what is, with each path"
                    : "\"\(text)\" starts more than one set-aside entry: give its whole path")
        }
        return matches[0]
    }

    /// The text of a set-aside file, when it opens with a key this device holds: the Markdown before its
    /// signature line, or the whole plaintext when it has none.
    public func setAsideText(_ entry: SetAside) throws -> String {
        let file: Data
        do {
            file = try folder.read(entry.path)
        } catch {
            throw SempereError(.io, "\(entry.path) cannot be read, so it cannot be restored; only deleting it is left")
        }
        let keyring = try keyring()
        for (_, identity) in keyring.identities.sorted(by: { $0.key > $1.key }) {
            guard let plaintext = try? Age.decrypt(file, identities: [identity.ageIdentity]) else { continue }
            let markdown = VaultNote.Trailer(plaintext).map { plaintext[..<$0.markdownEnd] } ?? plaintext[...]
            guard let text = String(validating: markdown, as: UTF8.self),
                !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
            else {
                throw SempereError(
                    .invalidEncoding, "\(entry.path) opens, but holds no text of a note: only deleting it is left")
            }
            return text
        }
        throw SempereError(
            .untrustedNote,
            "\(entry.path) does not open with any key this device holds, so its text cannot be restored here: "
                + "only deleting it is left (or restore it from a device that holds a newer key)")
    }

    /// Whether this device may remove the set-aside file at `path`, and if not, why.
    func mayRemove(_ path: String) -> String? {
        let parts = path.split(separator: "/")
        guard parts.count == 3, parts[0] == "notes" || parts[0] == "reencrypted",
            VaultFolder.isNotePath(path) || VaultFolder.isCopyPath(path)
        else { return nil }  // not in the layout: a conflict copy or a stray, which nobody writes
        let owner = String(parts[1])
        if parts[0] == "reencrypted" {
            return isHome ? nil : "only home writes reencrypted/: run `sempere repair` on \(name(of: body.home))"
        }
        if owner == keys.id || body.device(owner) == nil { return nil }
        return "it is in \(name(of: owner))'s folder, which only that device writes (removing it here could reach "
            + "that device's own newer file through the sync): run `sempere repair` there to remove it"
    }

    /// Restores the set-aside entry: its text becomes a note of this device (the next version of this device's
    /// own note at that path, or a new note), then the set-aside file is removed where this device may.
    public func repairRestore(_ entry: SetAside) throws -> Restored {
        try state.locked(root: configRoot) { try repairRestoreLocked(entry) }
    }

    private func repairRestoreLocked(_ entry: SetAside) throws -> Restored {
        let text = try setAsideText(entry)
        var manifest = try ownManifest()
        let target: String
        if VaultFolder.isNotePath(entry.path), entry.path.hasPrefix("notes/\(keys.id)/") {
            target = entry.path
            let id = Self.noteID(target)
            let version = max(manifest.notes[id] ?? 0, manifest.deleted[id] ?? 0, try highestVersionShown(target)) + 1
            // What this device's deletion of the note replaced stays replaced.
            try write(text, at: target, version: version, replaces: manifest.replaced[id] ?? [:])
            manifest.recordWrite(id, version: version)
            try saveOwnManifest(manifest)
            return Restored(path: target, removedSetAside: true, keptBecause: nil)
        }
        target = VaultFolder.notePath(author: keys.id, noteID: VaultFolder.newNoteID())
        try write(text, at: target, version: 1)
        manifest.recordWrite(Self.noteID(target), version: 1)
        try saveOwnManifest(manifest)
        if let reason = mayRemove(entry.path) {
            return Restored(path: target, removedSetAside: false, keptBecause: reason)
        }
        try folder.removeFile(entry.path)
        return Restored(path: target, removedSetAside: true, keptBecause: nil)
    }

    /// Deletes the set-aside file (after the person said so), where this device may.
    public func repairDelete(_ entry: SetAside) throws {
        try state.locked(root: configRoot) { try repairDeleteLocked(entry) }
    }

    private func repairDeleteLocked(_ entry: SetAside) throws {
        if let reason = mayRemove(entry.path) {
            throw SempereError(.notHome, "\(entry.path) was not deleted: \(reason)")
        }
        try folder.removeFile(entry.path)
    }

}
