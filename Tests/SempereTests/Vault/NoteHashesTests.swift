import Foundation
import Sempere
import SiblingsCrypto
import Testing

/// The cache of note files' SHA-256 that epoch changes list the files through.
@Suite("Sempere note hashes cache")
struct NoteHashesTests {
    @Test(
        "saved and loaded, it lists the files as hashing them would; a changed file, or a damaged cache, is hashed again"
    )
    func references() throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let home = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "Mac", credentials: home, postQuantum: false)
        let folder = VaultFolder(url: root.appendingPathComponent("vault"))
        try folder.create()
        try folder.write(created.vault)
        var paths: [String] = []
        for index in 0..<5 {
            let path = VaultFolder.notePath(author: home.id, noteID: VaultFolder.newNoteID())
            try folder.writeNote(
                try VaultNote.seal(markdown: "# Note \(index)\n", path: path, vault: created.vault.body, author: home),
                at: path)
            paths.append(path)
        }
        var index = NoteIndex()
        _ = try index.refresh(
            folder: folder, vault: created.vault,
            keyring: try VaultKeyring(vault: created.vault.body, credentials: home))
        let file = root.appendingPathComponent("hashes")
        try NoteHashes(index).save(to: file)
        let loaded = NoteHashes.load(from: file)
        #expect(try loaded.references(folder: folder).references == folder.noteReferences())

        // The cache is what answers for a file whose stat is unchanged: a cache that names another SHA-256
        // for it, with its current stat, is believed (which is why only this device writes it).
        var saved = try Data(contentsOf: file)
        let real = SHA256.hash(data: try folder.readNote(at: paths[0])).description
        let claimed = String(repeating: "e", count: 64)
        let at = try #require(saved.firstRange(of: Data(real.utf8)))
        saved.replaceSubrange(at, with: Data(claimed.utf8))
        try saved.write(to: file)
        let believed = try NoteHashes.load(from: file).references(folder: folder).references
        #expect(believed.first { $0.path == paths[0] }?.sha256 == claimed)
        try NoteHashes(index).save(to: file)

        // A note rewritten since (the cache's digest is stale): its stat shows it, and it is hashed again.
        let changed = paths[1]
        try folder.writeNote(
            try VaultNote.seal(markdown: "# Changed\n", path: changed, vault: created.vault.body, author: home),
            at: changed)
        let after = try loaded.references(folder: folder).references
        #expect(after == (try folder.noteReferences()))
        #expect(
            after.first { $0.path == changed }?.sha256
                == SHA256.hash(data: try folder.readNote(at: changed)).description)

        // A cache that does not parse (cut short, or another format) is an empty one: every file is hashed.
        let bytes = try Data(contentsOf: file)
        try bytes.prefix(bytes.count - 10).write(to: file)
        #expect(try NoteHashes.load(from: file).references(folder: folder).references == folder.noteReferences())
        try Data("sempere-note-hashes-v9\n".utf8).write(to: file)
        #expect(try NoteHashes.load(from: file).references(folder: folder).references == folder.noteReferences())
    }
}
