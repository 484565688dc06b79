import Age
import Foundation

/// The trash (`sempere trash`): a note this device removes stays restorable here for ``trashDays`` days, then the
/// deletion is final. The vault itself records the deletion at once (the manifest, then the file goes), so every
/// device stops showing the note as it does today; the trash is this device's own, like a phone's "Recently
/// Deleted": each entry is the note's text encrypted to this device's own key, in
/// `<config>/vaults/<vault_id>.trash/<note_id>.age`, never in the synced folder, so the provider keeps no copy of
/// what was deleted.
extension VaultSession {
    /// How long a removed note can be restored.
    public static let trashDays = 30

    /// A removed note, restorable until ``expiresAt``.
    public struct TrashEntry: Sendable, Equatable {
        public let id: String
        /// Where the note was: its author's path.
        public let path: String
        public let title: String
        public let deletedAt: Date
        public var expiresAt: Date { deletedAt.addingTimeInterval(TimeInterval(VaultSession.trashDays) * 86_400) }
    }

    struct TrashFile: Codable {
        var path: String
        var title: String
        var deletedAt: Int64
        var markdown: String

        enum CodingKeys: String, CodingKey {
            case path, title, deletedAt = "deleted_at", markdown
        }
    }

    var trashDirectory: URL { state.trashDirectory(root: configRoot) }

    /// Keeps `markdown`, the note at `path` this device is removing, in the trash.
    func moveToTrash(path: String, markdown: String) throws {
        let file = TrashFile(
            path: path, title: Self.title(of: markdown), deletedAt: Int64(now.timeIntervalSince1970),
            markdown: markdown)
        let sealed = try Age.encrypt(try JSONEncoder().encode(file), to: [keys.identity.recipient])
        do {
            try FileManager.default.createDirectory(
                at: trashDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw SempereError(
                .io, "cannot create the trash \(trashDirectory.path): \(plainCreateFailure(at: trashDirectory, error))")
        }
        // One entry per removal: a note removed again (an edit elsewhere survived the first removal) keeps both.
        var name = "\(Self.noteID(path)).\(file.deletedAt).age"
        var count = 1
        while FileManager.default.fileExists(atPath: trashDirectory.appendingPathComponent(name).path) {
            count += 1
            name = "\(Self.noteID(path)).\(file.deletedAt)-\(count).age"
        }
        try AtomicWrite.write(sealed, to: trashDirectory.appendingPathComponent(name), mode: 0o600)
    }

    /// What the trash holds, newest first; entries past their ``trashDays`` are deleted for good first.
    public func trash() throws -> [TrashEntry] {
        try state.locked(root: configRoot) {
            try trashFiles().compactMap { url, file in
                // `<note id>.age` (sempere 0.4's first trash) or `<note id>.<unix time>[-n].age`.
                let entry = TrashEntry(
                    id: String(url.lastPathComponent.prefix(32)), path: file.path, title: file.title,
                    deletedAt: Date(timeIntervalSince1970: TimeInterval(file.deletedAt)))
                guard entry.expiresAt > now else {
                    try? FileManager.default.removeItem(at: url)
                    return nil
                }
                return entry
            }.sorted { $0.deletedAt > $1.deletedAt }
        }
    }

    /// Brings the note `text` names (its id, or a unique start of it) back from the trash: written at this device's
    /// own path, as its next version (the vault then shows it again on every device), and the entry goes.
    public func restoreFromTrash(_ text: String) throws -> String {
        try state.locked(root: configRoot) {
            _ = try trash()  // drops the entries past their days
            let wanted = text.lowercased()
            // Newest first: a note removed twice comes back as it was at its latest removal.
            let matches = try trashFiles().filter { url, _ in
                !wanted.isEmpty && url.lastPathComponent.prefix(32).hasPrefix(wanted)
            }.sorted { $0.1.deletedAt > $1.1.deletedAt }
            guard Set(matches.map { $0.0.lastPathComponent.prefix(32) }).count == 1, let (url, file) = matches.first
            else {
                throw SempereError(
                    .notFound,
                    matches.isEmpty
                        ? "the trash holds no note \"\(text)\": `sempere trash` lists what it holds"
                        : "\"\(text)\" starts more than one note id in the trash: use more of it")
            }
            let entry = (id: String(url.lastPathComponent.prefix(32)), path: file.path)
            var manifest = try ownManifest()
            let id = Self.noteID(entry.path)
            // Only a note whose deletion the manifest holds: a `rm` that stopped after keeping the entry left the
            // note live, and its text since may be newer than the entry's.
            guard manifest.deleted[id] != nil, manifest.notes[id] == nil else {
                try? FileManager.default.removeItem(at: url)
                throw SempereError(
                    .notFound,
                    "note \(entry.id.prefix(8)) was never removed from the vault (the `rm` that kept it stopped before "
                        + "recording the deletion), so it is still a note: `sempere cat \(entry.id.prefix(8))`; the trash "
                        + "entry is dropped")
            }
            // At this device's own path, replacing what the deletion replaced: a version another device wrote
            // since stays beside it, as a conflict.
            let own = VaultFolder.notePath(author: keys.id, noteID: id)
            let version = max(manifest.notes[id] ?? 0, manifest.deleted[id] ?? 0) + 1
            try write(file.markdown, at: own, version: version, replaces: manifest.replaced[id] ?? [:])
            manifest.recordWrite(id, version: version)
            try saveOwnManifest(manifest)
            try? FileManager.default.removeItem(at: url)
            return own
        }
    }

    /// Every trash file this device can open, with its contents.
    private func trashFiles() throws -> [(URL, TrashFile)] {
        guard FileManager.default.fileExists(atPath: trashDirectory.path) else { return [] }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: trashDirectory.path)
        } catch {
            throw SempereError(.io, "cannot list the trash \(trashDirectory.path): \(plainDescription(of: error))")
        }
        return try names.filter { $0.hasSuffix(".age") }.sorted().compactMap { name in
            let url = trashDirectory.appendingPathComponent(name)
            guard let plain = try DeviceLocalFile.open(url, identity: keys.identity),
                let file = try? JSONDecoder().decode(TrashFile.self, from: plain)
            else { return nil }
            return (url, file)
        }
    }
}
