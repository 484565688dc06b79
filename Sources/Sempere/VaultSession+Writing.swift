import Age
import Foundation
import SiblingsCrypto

/// Writing notes (docs/sempere-format.md, "Editing any note"): new notes and imports, drafts and edits of any
/// note, resolving a conflict, and removing a note. Each writes only this device's own folder and manifest.
extension VaultSession {
    /// Seals `markdown` as a new note of this device; returns its path.
    @discardableResult
    public func newNote(markdown: String) throws -> String {
        try state.locked(root: configRoot) {
            let path = VaultFolder.notePath(author: keys.id, noteID: VaultFolder.newNoteID())
            let manifest = try ownManifest()
            try write(markdown, at: path, version: 1)
            _ = try recordInManifest(manifest, id: Self.noteID(path), version: 1)
            return path
        }
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
        return try state.locked(root: configRoot) {
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
    }

    /// A note to edit: its text (with every current version between conflict markers when it has several), and the
    /// versions an edit of it replaces. Saved with ``updateNote(at:markdown:replacing:)``, an edit replaces only
    /// what it was made from: a version that arrives meanwhile is kept beside it, as a conflict.
    public struct Draft: Sendable {
        public let id: String
        public let markdown: String
        /// The versions it was made from (device id → version), with the versions those replaced.
        public let replaces: [String: Int]
        /// The current versions it was made from (more than one: a conflict).
        public let versions: [Note]

        /// A draft an app kept (an edit left open across a restart): what it replaces is all that saving reads.
        public init(id: String, markdown: String, replaces: [String: Int], versions: [Note] = []) {
            self.id = id
            self.markdown = markdown
            self.replaces = replaces
            self.versions = versions
        }
    }

    /// The note `path` names, ready to edit. Any listed device edits any note.
    public func draft(of path: String) throws -> Draft {
        let versions = try versions(of: path)
        let markdown: String
        if versions.count == 1 {
            markdown = versions[0].markdown
        } else {
            // As git marks a merge conflict: each version under a line that names its device.
            markdown = Self.conflictText(
                versions.map { ("\(name(of: $0.author)), version \($0.version)", $0.markdown) })
        }
        return Draft(id: Self.noteID(path), markdown: markdown, replaces: Self.merged(versions), versions: versions)
    }

    /// What a version written over `versions` replaces: each of them, and what each replaced.
    static func merged(_ versions: [Note]) -> [String: Int] {
        var replaces: [String: Int] = [:]
        for note in versions {
            replaces[note.author] = max(replaces[note.author] ?? 0, note.version)
            for (device, version) in note.replaces { replaces[device] = max(replaces[device] ?? 0, version) }
        }
        return replaces
    }

    /// Writes `markdown` as this device's next version of the note `path` names, replacing `draft`'s versions
    /// (nil: the note's current versions now). Any listed device edits any note; the version is written in this
    /// device's own folder and signed by it. An empty text is refused (as git refuses an empty commit message):
    /// removing a note is ``removeNote(at:)``.
    public func updateNote(at path: String, markdown: String, replacing draft: Draft? = nil) throws {
        try state.locked(root: configRoot) {
            let id = Self.noteID(path)
            guard !markdown.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw SempereError(
                    .emptyNote,
                    "the edited note is empty, so it was not saved and note \(id.prefix(8)) is unchanged; to delete "
                        + "it, `sempere rm \(id.prefix(8))`")
            }
            let replaces = try draft?.replaces ?? Self.merged(versions(of: path))
            try writeVersion(
                markdown, of: id, replacing: replaces, startedFrom: draft.map { $0.replaces[keys.id] ?? 0 })
        }
    }

    /// Ends a conflict by keeping the version written on `device` (its id, the start of one, or its name): its
    /// text becomes this device's next version of the note, replacing every current version.
    public func resolveConflict(at path: String, keeping device: String) throws {
        try state.locked(root: configRoot) {
            let versions = try versions(of: path)
            let id = Self.noteID(path)
            guard versions.count > 1 else {
                throw SempereError(
                    .notFound, "note \(id.prefix(8)) has one version, so there is no conflict to resolve")
            }
            let wanted = device.lowercased()
            let kept = versions.filter {
                $0.author.hasPrefix(wanted) || name(of: $0.author).lowercased() == wanted
            }
            guard kept.count == 1, let chosen = kept.first else {
                throw SempereError(
                    .notFound,
                    "\"\(device)\" names \(kept.isEmpty ? "none" : "more than one") of the versions of note "
                        + "\(id.prefix(8)): "
                        + versions.map { "\(name(of: $0.author)) (\($0.author.prefix(8)))" }.joined(separator: ", "))
            }
            try writeVersion(chosen.markdown, of: id, replacing: Self.merged(versions))
        }
    }

    /// Writes `markdown` at this device's own path of note `id`, as its next version, replacing `replaces`, then
    /// the manifest.
    ///
    /// `startedFrom`: this device's own version of the note the edit started from (a ``Draft``'s). When this
    /// device has written the note again since (a second `sempere edit` at once, an app's kept draft), its one
    /// file cannot hold both, so the version written holds both texts between conflict markers: none is lost.
    /// What this device's deletions of the note replaced is kept in what the version replaces, so that what a
    /// device once replaced stays replaced.
    private func writeVersion(
        _ markdown: String, of id: String, replacing replaces: [String: Int], startedFrom: Int? = nil
    ) throws {
        let own = VaultFolder.notePath(author: keys.id, noteID: id)
        let manifest = try ownManifest()
        var markdown = markdown
        if let startedFrom, let current = manifest.notes[id], current > startedFrom,
            let mine = try? VaultNote.open(try folder.readNote(at: own), path: own, vault: body, keyring: keyring()),
            mine.markdown != markdown
        {
            markdown = Self.conflictText([
                (
                    "\(name(of: keys.id)), version \(mine.version) (written on this device after this edit began)",
                    mine.markdown
                ),
                ("this edit", markdown),
            ])
        }
        var claims = replaces
        for (device, version) in manifest.replaced[id] ?? [:] { claims[device] = max(claims[device] ?? 0, version) }
        let version =
            try max(
                manifest.notes[id] ?? 0, manifest.deleted[id] ?? 0, claims[keys.id] ?? 0,
                highestVersionShown(own)) + 1
        try write(markdown, at: own, version: version, replaces: claims)
        _ = try recordInManifest(manifest, id: id, version: version)
    }

    /// Texts between git-style conflict markers, each under a line naming where it comes from.
    static func conflictText(_ versions: [(label: String, markdown: String)]) -> String {
        versions.enumerated().map { index, version in
            (index == 0 ? "<<<<<<< " : "======= ") + version.label + "\n" + version.markdown
                + (version.markdown.hasSuffix("\n") ? "" : "\n")
        }.joined() + ">>>>>>> end of the conflict: keep what you want, remove these marker lines\n"
    }

    /// The highest version of the note at `path` (an author's path) this device has shown.
    func highestVersionShown(_ path: String) throws -> Int {
        try NoteIndex.load(from: state.noteIndexFile(root: configRoot), identity: keys.identity).seen?[path] ?? 0
    }

    /// Deletes the note `path` names, on every device: its text goes into this device's trash (``trash()``,
    /// restorable for ``trashDays`` days); this device's manifest records the deletion of every current version,
    /// then this device's own file goes (the other devices' files of it go when each sees the deletion). Any
    /// listed device deletes any note. A set-aside one is kept ("never deleted unless you say so", and only
    /// through Repair): removing it here could lose a note that the provider moved. A note in conflict goes
    /// whole, its trash entry keeping every version.
    public func removeNote(at path: String) throws {
        try state.locked(root: configRoot) { try removeNoteLocked(at: path) }
    }

    private func removeNoteLocked(at path: String) throws {
        let draft: Draft
        do {
            draft = try self.draft(of: path)
        } catch let error as SempereError where error.code == .untrustedNote {
            throw SempereError(.untrustedNote, "\(error.reason); it is kept, not removed (`sempere repair` handles it)")
        }
        let id = draft.id
        let own = VaultFolder.notePath(author: keys.id, noteID: id)
        // Into this device's trash first, so that nothing is lost if the command stops after the manifest.
        try moveToTrash(path: own, markdown: draft.markdown)
        var manifest = try ownManifest()
        manifest.recordDeletion(
            id, version: max(draft.replaces[keys.id] ?? 0, manifest.notes[id] ?? 0, manifest.deleted[id] ?? 0),
            replacing: draft.replaces)
        try saveOwnManifest(manifest)
        // This device's own file of the note, unless it is set aside there (not its own: Repair decides).
        if try !list(withText: false).setAside.contains(where: { $0.path == own }) {
            try folder.removeFile(own)
        }
    }

    func write(_ markdown: String, at path: String, version: Int, replaces: [String: Int] = [:]) throws {
        try folder.writeNote(
            try VaultNote.seal(
                markdown: markdown, path: path, vault: body, author: keys, version: version,
                replaces: replaces.filter { $0.key != keys.id }),
            at: path)
    }
}
