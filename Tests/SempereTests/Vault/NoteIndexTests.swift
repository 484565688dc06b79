import Foundation
import Sempere
import SiblingsCrypto
import Testing

@Suite("Sempere note index: open only what changed")
struct NoteIndexTests {
    @Test(
        "unchanged notes come from the index; changed, tampered and set-aside notes, and all after a removal, are checked again"
    )
    func refresh() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-index-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = VaultFolder(url: root.appendingPathComponent("vault"))
        try folder.create()
        let home = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "Mac", credentials: home, postQuantum: false)
        try folder.write(created.vault)
        var paths: [String] = []
        for number in 0..<20 {
            let path = VaultFolder.notePath(author: home.id, noteID: VaultFolder.newNoteID())
            try folder.writeNote(
                try VaultNote.seal(markdown: "# \(number)", path: path, vault: created.vault.body, author: home),
                at: path)
            paths.append(path)
        }
        let keyring = try VaultKeyring(vault: created.vault.body, credentials: home)
        let indexFile = root.appendingPathComponent("index.age")

        var index = try NoteIndex.load(from: indexFile, identity: home.identity)
        #expect(try index.refresh(folder: folder, vault: created.vault, keyring: keyring).count == 20)
        #expect(index.openedInLastRefresh == 20)
        try index.save(to: indexFile, identity: home.identity)

        // Saved encrypted: the notes' text is not in the file, and another device cannot load it.
        let saved = try Data(contentsOf: indexFile)
        #expect(saved.firstRange(of: Data("# 7".utf8)) == nil)
        #expect(
            try NoteIndex.load(from: indexFile, identity: DeviceKeys.generate(postQuantum: false).identity)
                .openedInLastRefresh == 0)

        var again = try NoteIndex.load(from: indexFile, identity: home.identity)
        let first = try again.refresh(folder: folder, vault: created.vault, keyring: keyring)
        #expect(again.openedInLastRefresh == 0)
        #expect(first.compactMap { try? $0.result.get().markdown }.sorted() == (0..<20).map { "# \($0)" }.sorted())

        // One note rewritten, one tampered with: only those two are opened; the tampered one is set aside.
        try folder.writeNote(
            try VaultNote.seal(markdown: "# changed", path: paths[0], vault: created.vault.body, author: home),
            at: paths[0])
        var tampered = try folder.readNote(at: paths[1])
        tampered[tampered.count - 3] ^= 0x01
        try folder.writeNote(tampered, at: paths[1])
        let second = try again.refresh(folder: folder, vault: created.vault, keyring: keyring)
        #expect(again.openedInLastRefresh == 2)
        #expect(second.first { $0.path == paths[0] }.flatMap { try? $0.result.get().markdown } == "# changed")
        #expect((try? second.first { $0.path == paths[1] }!.result.get()) == nil)

        // A file changed in place, its size and modification time set back as they were (what a careless
        // tool, or a provider's client, can do): the change time still shows it, and it is checked again.
        let url = root.appendingPathComponent("vault").appendingPathComponent(paths[2])
        let modified = try #require(
            try FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date)
        var bytes = try Data(contentsOf: url)
        bytes[bytes.count - 3] ^= 0x01
        let handle = try FileHandle(forWritingTo: url)
        try handle.write(contentsOf: bytes)
        try handle.close()
        try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: url.path)
        let third = try again.refresh(folder: folder, vault: created.vault, keyring: keyring)
        #expect(again.openedInLastRefresh == 2)  // that one, and the set-aside one, checked every time
        #expect((try? third.first { $0.path == paths[2] }!.result.get()) == nil)
        // And the files the index hashed are not read again for a removal's record, yet are listed right.
        #expect(try NoteHashes(again).references(folder: folder).references == folder.noteReferences())

        // A list that only adds a device keeps the accepted notes; the set-aside ones are checked again.
        let phone = DeviceKeys.generate(postQuantum: false)
        let updated = try VaultHome(credentials: home).approve(
            name: "Phone", signingKey: phone.signingKey.publicKey, wrapRecipient: phone.identity.recipientString,
            in: created.vault)
        let updatedKeys = try VaultKeyring(vault: updated.body, credentials: home)
        _ = try again.refresh(folder: folder, vault: updated, keyring: updatedKeys)
        #expect(again.openedInLastRefresh == 2)

        // A new epoch and its record with no device removed (Make Home, a kit replacement, Re-encrypt
        // Everything) keep the accepted notes too: nothing of theirs changes.
        let kit = try VaultHome(credentials: home).replaceKit(
            in: updated, currentKit: created.kit, existingNotes: try folder.noteReferences())
        try folder.write(try #require(kit.fileList))
        _ = try again.refresh(
            folder: folder, vault: kit.vault,
            keyring: try VaultKeyring(
                vault: kit.vault.body, credentials: home, fileLists: EpochFileLists(folder: folder)))
        #expect(again.openedInLastRefresh == 2)

        // A removal changes what is trusted: everything is checked again under the new list.
        let change = try VaultHome(credentials: home).remove(
            deviceID: phone.id, from: kit.vault, existingNotes: try folder.noteReferences())
        try folder.write(change.fileList)
        let removed = change.vault
        let results = try again.refresh(
            folder: folder, vault: removed,
            keyring: try VaultKeyring(
                vault: removed.body, credentials: home, fileLists: EpochFileLists(folder: folder)))
        #expect(again.openedInLastRefresh == 20)
        #expect(results.filter { (try? $0.result.get()) != nil }.count == 18)
    }
}
