import Age
import Foundation
import SiblingsCrypto

/// Notes out of the vault as plaintext Markdown, and what a removed device had not synced.
extension VaultSession {
    // MARK: - Export

    /// Writes every note as a plaintext Markdown file (mode 0600) into `directory`, created 0700 if
    /// missing, and returns the files written and what was set aside (not exported). Refuses a directory
    /// inside the vault folder: plaintext there would be synced to the provider.
    public func export(to directory: URL) throws -> (written: [(id: String, file: URL)], setAside: [SetAside]) {
        try checkOutsideVault(directory)
        let listing = try list()
        let files = listing.notes.map { note in
            let safe = String(note.title.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "_" }.prefix(60))
            // Each version of a note in conflict, named by its device.
            let version = note.otherVersions.isEmpty ? "" : "-\(note.author.prefix(8))"
            return (note, directory.appendingPathComponent("\(safe)-\(note.id)\(version).md"))
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
}
